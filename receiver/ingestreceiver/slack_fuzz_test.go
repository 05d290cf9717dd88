package ingestreceiver

import (
	"errors"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/otelcol-svc/otelcol-svc/receiver/ingestreceiver/internal/console"
)

// FuzzSlackInteraction feeds the interaction parser raw bodies and payloads (each also
// wrapped in a form as Slack sends it): it never panics, and what it takes is one of our
// four actions by a bounded, printable "slack:" user.
func FuzzSlackInteraction(f *testing.F) {
	seeds := []string{
		`{"type":"block_actions","user":{"id":"U1","username":"alice","name":"Alice"},"actions":[{"action_id":"incident_acknowledge","block_id":"b","value":"inc_0123456789abcdef0123456789abcdef_1"}]}`,
		`{"type":"block_actions","user":{"id":"U1"},"actions":[{"action_id":"incident_resolve","value":"x"}]}`,
		`{"type":"block_actions","user":{"name":"bob"},"actions":[{"action_id":"incident_mute"},{"action_id":"incident_resolve"}]}`,
		`{"type":"block_actions","user":{"username":"\u0000\u001f"},"actions":[{"action_id":"incident_reinvestigate","value":"inc_a_1"}]}`,
		`{"type":"block_actions","actions":[]}`,
		`{"type":"block_actions","actions":[{"action_id":"incident_"}]}`,
		`{"type":"view_submission","view":{"id":"V1"}}`,
		`{"type":"block_actions","user":"U1","actions":{"action_id":"incident_mute"}}`,
		`[]`, `null`, `{`, ``,
	}
	for _, s := range seeds {
		f.Add([]byte(url.Values{"payload": {s}}.Encode()), s)
	}
	f.Add([]byte("payload=%7B&payload=x"), "")
	f.Add([]byte("foo=bar&payload=%ZZ"), "\xff")
	f.Add([]byte(";;;&&&==="), `{"type":"block_actions","user":{"username":"`+strings.Repeat("é", 200)+`"},"actions":[{"action_id":"incident_mute","value":"v"}]}`)
	f.Fuzz(func(t *testing.T, body []byte, payload string) {
		for _, b := range [][]byte{body, []byte(url.Values{"payload": {payload}}.Encode())} {
			act, err := parseSlackInteraction(b)
			if err != nil {
				if act != (slackAction{}) {
					t.Fatalf("an error with an action: %+v", act)
				}
				if !errors.Is(err, errSlackIgnored) && err.Error() == "" {
					t.Fatal("an error without a message")
				}
				continue
			}
			if !console.IsIncidentAction(act.Action) {
				t.Fatalf("action %q is none of ours", act.Action)
			}
			user, ok := strings.CutPrefix(act.By, "slack:")
			if !ok || user == "" || len(user) > maxSlackUser {
				t.Fatalf("by %q", act.By)
			}
			for _, r := range user {
				if r < 0x20 || r == 0x7f {
					t.Fatalf("by %q holds a control character", act.By)
				}
			}
			if !utf8.ValidString(user) {
				// The name goes into JSON and chat: a cut must not split a character.
				t.Fatalf("by %q is not valid UTF-8", act.By)
			}
		}
	})
}
