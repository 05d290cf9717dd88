package service

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/otelcol-svc/otelcol-svc/internal/envelope"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/textfmt"
)

// decodeStrict decodes as the API does (unknown fields refused).
func decodeStrict(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

func FuzzSinkBody(f *testing.F) {
	for _, s := range []string{
		`{"kind":"webhook","url":"https://h.example.com/x","method":"put","headers":{"X-Token":"t"}}`,
		`{"kind":"chat","url":"https://hooks.slack.com/services/x","format":"slack","text_template":"{summary}"}`,
		`{"kind":"chat","url":"http://10.0.0.1/","format":"irc"}`, `{"kind":"webhook","headers":{"Host":"x"}}`, `{"enabled":"yes"}`,
		`{"kind":"slack_app","bot_token":"xoxb-1234567890-abcdefghij","signing_secret":"0123456789abcdef0123456789abcdef","channel":"C0123ABCDE"}`,
		`{"kind":"slack_app","bot_token":"xoxp-1","signing_secret":"short","channel":"#ops"}`,
		`{"kind":"slack_app","bot_token":"[redacted]","signing_secret":"[redacted]","channel":"#incidents"}`,
		`{"kind":"slack_app","url":"https://slack.com/api/","bot_token":"xoxb-1234567890-abcdefghij"}`,
		`{"kind":"webhook","url":"https://h.example.com/x","channel":"C0123ABCDE"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var b SinkUpdate
		if decodeStrict(body, &b) != nil {
			return
		}
		c := mirror.Sink{Enabled: true}
		b.Apply(&c)
		if e := ValidateSink(&c); e != nil {
			return
		}
		if c.Kind == KindSlackApp {
			if c.URL != "" || !slackBotToken.MatchString(c.BotToken) || !validSigningSecret(c.SigningSecret) ||
				!slackChannel.MatchString(c.Channel) || c.BotToken == Redacted || c.SigningSecret == Redacted {
				t.Fatalf("accepted an invalid slack_app sink: %+v", c)
			}
			return
		}
		if c.Kind != "webhook" && c.Kind != "chat" || c.URL == "" || c.BotToken != "" || c.SigningSecret != "" || c.Channel != "" {
			t.Fatalf("accepted an invalid sink: %+v", c)
		}
		for k := range c.Headers {
			if reservedHeaders[strings.ToLower(k)] {
				t.Fatalf("accepted a reserved header %q", k)
			}
		}
	})
}

// Source settings come from anyone with a token too: whatever passes validation must be a
// source the receiver can build envelopes with, and its template must render.
func FuzzSourceBody(f *testing.F) {
	for _, s := range []string{
		`{"name":"github","event_type_field":"action","text_template":"{repo.name}: {action}","event_time_field":"created_at","labels":{"repo":"repo.name"}}`,
		`{"name":"x","text_template":"{{literal}} {a}}}"}`, `{"name":"x","text_template":"{a"}`, `{"name":"x","text_template":"}"}`,
		`{"name":"x","labels":{"":"a"}}`, `{"name":"x","labels":{"a":"b..c"}}`, `{"name":"x","connector":"email"}`, `{"name":""}`,
	} {
		f.Add([]byte(s), []byte(`{"action":"opened","repo":{"name":"acme/api"},"created_at":"2024-05-01T12:00:00Z"}`))
	}
	f.Fuzz(func(t *testing.T, body, payload []byte) {
		var spec SourceSpec
		if decodeStrict(body, &spec) != nil {
			return
		}
		src, e := spec.Validate("", true)
		if e != nil {
			if e.Code != "invalid_body" || e.Message == "" {
				t.Fatalf("validation error %+v", e)
			}
			return
		}
		if src.Connector != "webhook" || src.Name == "" || src.EventType == "" || len(src.Labels) > maxLabels {
			t.Fatalf("accepted an invalid source: %+v", src)
		}
		for _, ph := range textfmt.Placeholders(src.TextTemplate) {
			if checkPath(ph) != nil {
				t.Fatalf("accepted template %q with placeholder %q", src.TextTemplate, ph)
			}
		}
		if res, err := envelope.Build(src, payload, time.Unix(0, 0)); err == nil && !json.Valid(res.Record) {
			t.Fatalf("invalid envelope %s", res.Record)
		}
	})
}
