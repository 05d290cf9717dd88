package api

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/otelcol-svc/otelcol-svc/controlplane/service"
	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/validationresponder"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/validation"
)

// Request bodies come from anyone with a token: decoding and validating them must never
// panic, and whatever passes validation must compile in the data plane. The data plane's
// check runs in this process (the responder's own code), as a collector would run it.
func FuzzPipelineBody(f *testing.F) {
	svc := &service.Service{CheckPipeline: func(_ context.Context, p mirror.Pipeline) (validation.Result, error) {
		return validationresponder.Check(p), nil
	}}
	for _, s := range []string{
		`{"trigger":"severity_number >= 17","transforms":["set(event[\"a\"], 1)"],"batch_size":5}`,
		`{"window_enabled":true,"group_key":"traceId","context_filter":"severity_number >= 9","window_duration_seconds":60}`,
		`{"agent_endpoint_url":"https://agent.example.com/x"}`, `{"trigger":1}`,
		`{"cooldown_seconds":60,"dedup_key":"resource_attributes[\"k8s.pod.name\"]","max_calls_per_minute":5,"max_calls_per_day":100}`,
		`{"window_enabled":true,"window_max_bytes":8192,"window_max_events":50000,"cooldown_seconds":86401}`, `{"nope":true}`, `[]`, `{`, `"x"`, `{"transforms":"x"}`, `{"batch_size":1.5}`, `{"window_enabled":"yes"}`,
		`{"mode":"incident","fingerprint":"event[\"labels\"][\"alertname\"]","resolve_when":"event[\"status\"] == \"resolved\"","group_wait":"30s","group_interval":"5m","resolve_after":"30m","reopen_within":"0s"}`,
		`{"mode":"incident","group_wait":"2h","reopen_within":""}`, `{"mode":"incident","resolve_after":"7d"}`, `{"mode":"incident","group_interval":"-1s"}`,
		`{"mode":"legacy","window_enabled":true}`, `{"mode":"window"}`, `{"mode":"incident","window_enabled":true}`, `{"mode":"Incident"}`, `{"mode":7}`,
		`{"group_wait":"1s"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var b mirror.Pipeline
		if e := decodeBytes(body, &b); e != nil {
			if e.Status != http.StatusBadRequest || e.Message == "" {
				t.Fatalf("decode error %+v", e)
			}
			// Said in JSON's words, never a Go type (mirror.Pipeline, map[string]string).
			if strings.Contains(e.Message, "mirror.") || strings.Contains(e.Message, "map[") || strings.Contains(e.Message, "[]") {
				t.Fatalf("decode error names a Go type: %q", e.Message)
			}
			return
		}
		var e *apierror.Error
		if e := service.NormalizeMode(&b); e != nil {
			if e.Code != "invalid_pipeline" || !strings.HasPrefix(e.Message, "mode: ") {
				t.Fatalf("mode error without its field: %+v", e)
			}
			return
		}
		pl := service.WithDefaults(b)
		if pl.Mode != "" && pl.Mode != mirror.ModeIncident || pl.Mode == mirror.ModeIncident && pl.WindowEnabled {
			t.Fatalf("a pipeline of two modes would be stored: %+v", pl)
		}
		if err := svc.ValidatePipeline(context.Background(), pl); errors.As(err, &e) {
			if e.Code != "invalid_pipeline" || !strings.Contains(e.Message, ":") {
				t.Fatalf("validation error without a field: %+v", e)
			}
		} else if err != nil {
			t.Fatalf("validation failed: %v", err)
		}
	})
}
