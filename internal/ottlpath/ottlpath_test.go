package ottlpath

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The dashboard writes paths by the committed JSON: it must be what these rules say.
func TestDashboardRulesAreGeneratedFromThese(t *testing.T) {
	committed, err := os.ReadFile(filepath.Join("..", "..", "controlplane", "web", "src", "generated", "ottlpaths.json"))
	require.NoError(t, err)
	assert.Equal(t, string(Rules()), string(committed),
		"controlplane/web/src/generated/ottlpaths.json is stale: run `go generate ./internal/ottlpath` and commit it")
}

func TestPath(t *testing.T) {
	k := func(names ...any) []Key {
		var out []Key
		for _, n := range names {
			if i, ok := n.(int); ok {
				out = append(out, Key{Index: i, IsIdx: true})
			} else {
				out = append(out, Key{Name: n.(string)})
			}
		}
		return out
	}
	for want, keys := range map[string][]Key{
		`event`:                               nil,
		`status`:                              k("status"),
		`attributes["http.method"]`:           k("attributes", "http.method"),
		`resource_attributes["k8s.pod.name"]`: k("resourceAttributes", "k8s.pod.name"),
		`event["_event_type"]`:                k("_event_type"),
		`event["durationMs"]`:                 k("durationMs"),
		`event["trace_id"]`:                   k("trace_id"),
		`event["signal"]`:                     k("signal"),
		`event["nil"]`:                        k("nil"),
		`payload["labels"][0]["name"]`:        k("payload", "labels", 0, "name"),
		`event["say \"hi\""]`:                 k(`say "hi"`),
		``:                                    k(0, "a"),
	} {
		assert.Equal(t, want, Path(keys), "%v", keys)
	}
}
