package sinkexporter

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestResultText(t *testing.T) {
	assert.Equal(t, "restarted", resultText([]byte(`{"summary":" ","text":"restarted"}`)))
	assert.Equal(t, `{"a":1}`, resultText([]byte(`{ "a": 1 }`)))
	assert.Equal(t, strings.Repeat("é", 499)+"…", resultText([]byte(`{"text":"`+strings.Repeat("é", 600)+`"}`)))
}

// An agent's result is shown as the incident's last result whatever it holds: valid
// text within 500 characters.
func FuzzResultText(f *testing.F) {
	for _, s := range []string{`{"text":"x"}`, `{"message":1}`, `[1,2]`, "not json \xff", `{"text":"` + strings.Repeat("a", 700) + `"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		s := resultText(payload)
		assert.True(t, utf8.ValidString(s))
		assert.LessOrEqual(t, utf8.RuneCountInString(s), 500)
	})
}

// A notice's title comes from an event: its chat line is one line of valid JSON text.
func FuzzNoticeChatPayload(f *testing.F) {
	f.Add("db down", "opened", "slack:bob")
	f.Add("<!channel>\n\u202e", "muted", "")
	f.Add("", "other", "x\x00")
	f.Fuzz(func(t *testing.T, title, transition, by string) {
		n := &noticeFields{Transition: transition, By: by}
		n.Incident.Title, n.Incident.ID = title, "inc_x_1"
		var m map[string]string
		require.NoError(t, json.Unmarshal(noticeChatPayload(n), &m))
		assert.True(t, strings.HasPrefix(m["text"], "[Incident] "))
		assert.NotContains(t, m["text"], "\n")
	})
}
