package e2e

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/streams"
)

func TestEventsStoredByteForByte(t *testing.T) {
	e := startReceiver(t, nil)
	key := e.project(t, "ev")

	// Odd spacing, key order, big integers and number text must all survive.
	raw := `{ "order": 12345678901234567890, "amount": 1.50, "status":"failed",  "nested": {"z": [1, 2.0, "x"], "a": null} }`
	r := post(t, e.col.HTTP+"/v1/events", key, "application/json", []byte(raw), nil)
	require.Equal(t, http.StatusAccepted, r.StatusCode, "%s", r.Body)
	assert.JSONEq(t, `{"accepted": 1}`, string(r.Body))

	// Headers add _event_type and _source; a header replaces a field of that name.
	withHeaders := `{"_source": "old", "status": "failed", "amount": 1.50}`
	r = post(t, e.col.HTTP+"/v1/events", key, "application/json; charset=utf-8", []byte(withHeaders),
		map[string]string{"X-Event-Type": "payment.failed", "X-Source": "billing"})
	require.Equal(t, http.StatusAccepted, r.StatusCode, "%s", r.Body)

	msgs := stored(t, e.js, "ev")
	require.Len(t, msgs, 2)
	assert.Equal(t, raw, string(msgs[0].Data))
	assert.Equal(t, "event", msgs[0].Header.Get(streams.HeaderSignal))
	assert.Equal(t, `{"status": "failed","amount": 1.50,"_event_type":"payment.failed","_source":"billing"}`, string(msgs[1].Data))
}

func TestEventsHeaderAppendKeepsBytes(t *testing.T) {
	e := startReceiver(t, nil)
	key := e.project(t, "evh")
	raw := `{"n": 1.50, "big": 12345678901234567890}`
	r := post(t, e.col.HTTP+"/v1/events", key, "application/json", []byte(raw), map[string]string{"X-Event-Type": "t"})
	require.Equal(t, http.StatusAccepted, r.StatusCode)
	msgs := stored(t, e.js, "evh")
	require.Len(t, msgs, 1)
	assert.Equal(t, `{"n": 1.50, "big": 12345678901234567890,"_event_type":"t"}`, string(msgs[0].Data))
}

func TestEventsBatchArrayAndNDJSON(t *testing.T) {
	e := startReceiver(t, nil)
	key := e.project(t, "batch")

	arr := `[{"i": 1}, {"i": 2, "v": 1.50}, {"i": 3}]`
	r := post(t, e.col.HTTP+"/v1/events/batch", key, "application/json", []byte(arr), map[string]string{"X-Event-Type": "deploy"})
	require.Equal(t, http.StatusAccepted, r.StatusCode, "%s", r.Body)
	assert.JSONEq(t, `{"accepted": 3}`, string(r.Body))

	nd := "{\"i\": 4}\r\n\n{\"i\": 5, \"big\": 12345678901234567890}\n"
	r = post(t, e.col.HTTP+"/v1/events/batch", key, "application/x-ndjson", []byte(nd), nil)
	require.Equal(t, http.StatusAccepted, r.StatusCode, "%s", r.Body)
	assert.JSONEq(t, `{"accepted": 2}`, string(r.Body))

	msgs := stored(t, e.js, "batch")
	require.Len(t, msgs, 5)
	got := make([]string, len(msgs))
	for i, m := range msgs {
		got[i] = string(m.Data)
	}
	assert.Equal(t, []string{
		`{"i": 1,"_event_type":"deploy"}`,
		`{"i": 2, "v": 1.50,"_event_type":"deploy"}`,
		`{"i": 3,"_event_type":"deploy"}`,
		`{"i": 4}`,
		`{"i": 5, "big": 12345678901234567890}`,
	}, got)
}

func TestEventsBatchWithOneBadElementStoresNothing(t *testing.T) {
	e := startReceiver(t, nil)
	key := e.project(t, "bad")
	for _, tc := range []struct {
		name, ct, body, index, code string
	}{
		{"array element is a string", "application/json", `[{"i":1}, {"i":2}, "oops", {"i":4}]`, "element 2", "invalid_body"},
		{"array element is a number", "application/json", `[{"i":1}, 7]`, "element 1", "invalid_body"},
		{"ndjson line is an array", "application/x-ndjson", "{\"i\":1}\n[1]\n{\"i\":3}", "element 1", "invalid_body"},
		{"ndjson line is not JSON", "application/x-ndjson", "{\"i\":1}\n{\"i\":\n", "element 1", "invalid_json"},
		{"array not closed", "application/json", `[{"i":1}, {"i":2}`, "", "invalid_json"},
		{"empty array", "application/json", `[]`, "", "invalid_body"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := post(t, e.col.HTTP+"/v1/events/batch", key, tc.ct, []byte(tc.body), nil)
			require.Equal(t, http.StatusBadRequest, r.StatusCode, "%s", r.Body)
			assert.Equal(t, tc.code, errorCode(t, r))
			assert.True(t, strings.Contains(string(r.Body), tc.index), "%s should name %q", r.Body, tc.index)
		})
	}
	assert.Empty(t, stored(t, e.js, "bad"))
}
