package ottlevent

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
)

func TestPathsLocatedAndCompared(t *testing.T) {
	set := componenttest.NewNopTelemetrySettings()
	got, err := Paths(KindCondition, "severty_number >= 17 and\n  severity_number >= \"high\" and attributes[\"http.method\"] == \"GET\" and signal == \"log\" and event[\"_event_type\"] != nil and 3 < durationMs and body != nil", set)
	require.NoError(t, err)
	type short struct {
		Field, Alt string
		Keys       []PathKey
		Line, Col  int
		Compared   string
	}
	var s []short
	for _, p := range got {
		s = append(s, short{p.Field, p.Alt, p.Keys, p.Line, p.Column, p.Compared})
	}
	assert.ElementsMatch(t, []short{
		{"severty_number", "", nil, 1, 1, "number"},
		{"severityNumber", "severity_number", nil, 2, 3, "string"},
		{"attributes", "", []PathKey{{S: "http.method"}}, 2, 33, "string"},
		{"_event_type", "", nil, 2, 92, ""},
		{"durationMs", "", nil, 2, 128, "number"},
		{"body", "", nil, 2, 143, ""},
	}, s)
	assert.Equal(t, []string{"severityNumber", "severity_number"}, got[1].FieldsPaths())

	st, err := Paths(KindStatement, `set(event["service"], resource_attributes["service.name"]) where items[0]["sku"] == 3`, set)
	require.NoError(t, err)
	require.Len(t, st, 3)
	targets := map[string]bool{}
	for _, p := range st {
		targets[p.FieldsPaths()[0]] = p.Target
	}
	assert.Equal(t, map[string]bool{"service": true, "resourceAttributes.service.name": false, "items[].sku": false}, targets)

	_, err = Paths(KindCondition, `severity_number >=`, set)
	var ce *CompileError
	require.ErrorAs(t, err, &ce)
}

// The hand-written token scan of locatePaths reads any text a user saves.
func FuzzPaths(f *testing.F) {
	for _, s := range []string{`severity_number >= 17`, `event["a"][0]["b"] == "x"`, `-1 < x`, `set(event["a"], b["c"][d])`, `"unterminated`, `a[[[`, `event.traceId != nil`} {
		f.Add(s)
	}
	set := componenttest.NewNopTelemetrySettings()
	f.Fuzz(func(t *testing.T, expr string) {
		toks := tokenize(expr)
		for _, tk := range toks {
			if tk.off < 0 || tk.off+len(tk.text) > len(expr) || expr[tk.off:tk.off+len(tk.text)] != tk.text {
				t.Fatalf("token %+v not in %q", tk, expr)
			}
		}
		for _, kind := range []string{KindCondition, KindStatement} {
			refs, err := Paths(kind, expr, set)
			if err != nil {
				continue
			}
			for _, r := range refs {
				if r.Line < 0 || r.Column < 0 || (r.Line == 0) != (r.Column == 0) {
					t.Fatalf("%q: %+v", expr, r)
				}
			}
		}
	})
}
