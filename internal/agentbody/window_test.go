package agentbody

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func encodedSize(recs [][]byte) int {
	return len(WindowCall(nil, recs, 0, 0)) - len(`{"trigger":,"window":}`)
}

func TestFitWindowKeepsTheNewestWithinTheBytes(t *testing.T) {
	var window [][]byte
	for i := 0; i < 100; i++ {
		window = append(window, []byte(fmt.Sprintf(`{"n":%03d}`, i))) // 9 bytes
	}
	kept, markers := FitWindow(window, 10*9+9+2) // ten records, their commas, the brackets
	assert.Zero(t, markers)
	require.Len(t, kept, 10)
	assert.Equal(t, `{"n":090}`, string(kept[0]))
	assert.Equal(t, `{"n":099}`, string(kept[9]), "the newest is last, as before")
	assert.LessOrEqual(t, encodedSize(kept), 10*9+9+2)

	kept, _ = FitWindow(window, 1<<20)
	assert.Len(t, kept, 100, "a window within the budget is sent whole")
	kept, _ = FitWindow(nil, 100)
	assert.Empty(t, kept)
}

func TestOversizedRecordBecomesAMarker(t *testing.T) {
	huge := []byte(`{"log":"` + strings.Repeat("é", 20_000) + `"}`)
	window := [][]byte{[]byte(`{"old":1}`), huge, []byte(`{"new":1}`)}
	kept, markers := FitWindow(window, 8192)
	assert.Equal(t, 1, markers)
	require.Len(t, kept, 3)
	assert.Equal(t, `{"old":1}`, string(kept[0]))
	assert.Equal(t, `{"new":1}`, string(kept[2]))
	var m struct {
		Truncated bool   `json:"_truncated"`
		Bytes     int    `json:"_bytes"`
		Preview   string `json:"_preview"`
	}
	require.NoError(t, json.Unmarshal(kept[1], &m), "%s", kept[1])
	assert.True(t, m.Truncated)
	assert.Equal(t, len(huge), m.Bytes)
	assert.True(t, strings.HasPrefix(string(huge), m.Preview), "the preview is the record's start")
	assert.LessOrEqual(t, len(m.Preview), previewBytes)
	assert.True(t, utf8.ValidString(m.Preview), "no rune cut in half")
	assert.LessOrEqual(t, encodedSize(kept), 8192)
}

// The worst-escaped preview still fits the smallest budget a pipeline may set.
func TestMarkerFitsTheSmallestBudget(t *testing.T) {
	rec := bytes.Repeat([]byte{0x01}, 9000)
	kept, markers := FitWindow([][]byte{rec}, 8192)
	require.Equal(t, 1, markers)
	require.Len(t, kept, 1)
	assert.True(t, json.Valid(kept[0]))
}

// Window records are outside input (whatever a project ingested): cutting any window to
// any budget a pipeline may set gives a JSON array within the budget, newest kept.
func FuzzFitWindow(f *testing.F) {
	f.Add([]byte(`{"a":1}`), []byte(`{"b":"`+strings.Repeat("x", 9000)+`"}`), 8192)
	f.Add([]byte("{\"s\":\"\xff\xfe\"}"), []byte(`{}`), 10_000)
	f.Fuzz(func(t *testing.T, a, b []byte, budget int) {
		if budget < 8192 || budget > 1<<20 || !json.Valid(a) || !json.Valid(b) {
			return
		}
		window := [][]byte{a, b, a, b}
		kept, markers := FitWindow(window, budget)
		if n := encodedSize(kept); n > budget {
			t.Fatalf("%d bytes over a budget of %d", n, budget)
		}
		if markers > len(kept) {
			t.Fatalf("%d markers in %d records", markers, len(kept))
		}
		var arr []json.RawMessage
		if err := json.Unmarshal(WindowCall([]byte(`{}`), kept, 0, 0), &struct {
			Window *[]json.RawMessage `json:"window"`
		}{&arr}); err != nil {
			t.Fatalf("not JSON: %v", err)
		}
		if len(kept) > 0 && len(b) <= budget && !bytes.Equal(kept[len(kept)-1], b) {
			t.Fatal("the newest record is not last")
		}
	})
}
