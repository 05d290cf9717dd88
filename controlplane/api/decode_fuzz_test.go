package api

import (
	"net/http"
	"strings"
	"testing"

	"github.com/otelcol-svc/otelcol-svc/components/mirror"
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
