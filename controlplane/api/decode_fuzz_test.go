package api

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/otelcol-svc/otelcol-svc/components/envelope"
	"github.com/otelcol-svc/otelcol-svc/components/mirror"
	"github.com/otelcol-svc/otelcol-svc/components/textfmt"
)

// Request bodies come from anyone with a token: decoding and validating them must never
// panic, and whatever passes validation must compile in the data plane.
func FuzzPipelineBody(f *testing.F) {
	for _, s := range []string{
		`{"trigger":"severity_number >= 17","transforms":["set(event[\"a\"], 1)"],"batch_size":5}`,
		`{"window_enabled":true,"group_key":"traceId","context_filter":"severity_number >= 9","window_duration_seconds":60}`,
		`{"agent_endpoint_url":"https://agent.example.com/x"}`, `{"trigger":1}`, `{"nope":true}`, `[]`, `{`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var b mirror.Pipeline
		if e := decodeBytes(body, &b); e != nil {
			if e.Status != http.StatusBadRequest || e.Message == "" {
				t.Fatalf("decode error %+v", e)
			}
			return
		}
		pl := withDefaults(b)
		if e := ValidatePipeline(pl); e != nil {
			if e.Code != "invalid_pipeline" || !strings.Contains(e.Message, ":") {
				t.Fatalf("validation error without a field: %+v", e)
			}
		}
	})
}

func FuzzSinkBody(f *testing.F) {
	for _, s := range []string{
		`{"kind":"webhook","url":"https://h.example.com/x","method":"put","headers":{"X-Token":"t"}}`,
		`{"kind":"chat","url":"https://hooks.slack.com/services/x","format":"slack","text_template":"{summary}"}`,
		`{"kind":"chat","url":"http://10.0.0.1/","format":"irc"}`, `{"kind":"webhook","headers":{"Host":"x"}}`, `{"enabled":"yes"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var b sinkBody
		if e := decodeBytes(body, &b); e != nil {
			return
		}
		c := mirror.Sink{Enabled: true}
		b.apply(&c)
		if e := ValidateSink(&c); e != nil {
			return
		}
		if c.Kind != "webhook" && c.Kind != "chat" || c.URL == "" {
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
		if e := decodeBytes(body, &spec); e != nil {
			return
		}
		src, e := spec.validate("", true)
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
