package validationresponder

import (
	"encoding/json"
	"testing"

	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
)

// FuzzCheck feeds the responder's input (a pipeline sent by a control plane, whose
// expressions are a user's text) through decoding and compiling: whatever it is, the
// answer is a result, never a panic.
func FuzzCheck(f *testing.F) {
	f.Add([]byte(`{"trigger":"severity_number >= 17","group_key":"traceId","cooldown_seconds":60,"dedup_key":"resource_attributes[\"k8s.pod.name\"]"}`))
	f.Add([]byte(`{"dedup_key":"Concat([body, \"x\"], \"-\")","window_max_bytes":8192,"window_max_events":1}`))
	f.Add([]byte(`{"dedup_key":"event[\"a\"][","cooldown_seconds":-1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var p mirror.Pipeline
		if json.Unmarshal(data, &p) != nil {
			return
		}
		res := Check(p)
		if !res.OK && res.Field == "" {
			t.Fatalf("a refusal names no field: %+v", res)
		}
	})
}
