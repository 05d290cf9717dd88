package fieldstats

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/ottlevent"
)

func stats(recs ...string) ([]Field, *Stats) {
	s := New()
	for _, r := range recs {
		s.Add([]byte(r))
	}
	return s.Result(), s
}

func TestFieldStats(t *testing.T) {
	got, s := stats(
		`{"_event_type":"opened","payload":{"repo":{"name":"a/b","stars":3},"labels":[{"name":"bug"},{"name":"p1","id":7}],"tags":["x",1,null],"matrix":[[1]]}}`,
		`{"_event_type":"closed","payload":{"repo":{"name":"a/c","stars":"many"},"labels":[],"draft":false}}`,
		`not json`,
		`{"payload":{"repo":null}} trailing`,
	)
	assert.Equal(t, 4, s.sampled)
	assert.False(t, s.truncated)
	assert.Equal(t, []Field{
		{Path: "_event_type", OTTL: `event["_event_type"]`, Count: 2, Types: []string{"string"}},
		{Path: "payload", OTTL: `payload`, Count: 2, Types: []string{"object"}},
		{Path: "payload.draft", OTTL: `payload["draft"]`, Count: 1, Types: []string{"boolean"}},
		{Path: "payload.labels", OTTL: `payload["labels"]`, Count: 2, Types: []string{"array"}},
		{Path: "payload.labels[]", OTTL: `payload["labels"][0]`, Count: 1, Types: []string{"object"}},
		{Path: "payload.labels[].id", OTTL: `payload["labels"][1]["id"]`, Count: 1, Types: []string{"number"}},
		{Path: "payload.labels[].name", OTTL: `payload["labels"][0]["name"]`, Count: 1, Types: []string{"string"}},
		{Path: "payload.matrix", OTTL: `payload["matrix"]`, Count: 1, Types: []string{"array"}},
		{Path: "payload.matrix[]", OTTL: `payload["matrix"][0]`, Count: 1, Types: []string{"array"}},
		{Path: "payload.matrix[][]", OTTL: `payload["matrix"][0][0]`, Count: 1, Types: []string{"number"}},
		{Path: "payload.repo", OTTL: `payload["repo"]`, Count: 2, Types: []string{"object"}},
		{Path: "payload.repo.name", OTTL: `payload["repo"]["name"]`, Count: 2, Types: []string{"string"}},
		{Path: "payload.repo.stars", OTTL: `payload["repo"]["stars"]`, Count: 2, Types: []string{"string", "number"}},
		{Path: "payload.tags", OTTL: `payload["tags"]`, Count: 1, Types: []string{"array"}},
		{Path: "payload.tags[]", OTTL: `payload["tags"][0]`, Count: 1, Types: []string{"string", "number", "null"}},
	}, got)
}

// An agent (MCP console_fields) or the Fields page writes a trigger from each field's
// ottl: it must name the record's real keys, however they are spelt, and read a value.
func TestFieldsOTTL(t *testing.T) {
	log := `{"resourceAttributes":{"service.name":"checkout","k8s.pod.name":"web-1"},"severityNumber":17,"traceId":"ab",` +
		`"attributes":{"http.method":"POST","say \"hi\"":1,"back\\slash":2,"nested":{"a.b":{"c":true}}},` +
		`"_event_type":"x","signal":"mine","trace_id":"own","Status":"up","a.b":"dotted key","a":{"b":"nested"},` +
		`"items":[{"id":1},{"sku":"k","tags":["t"]}],"event":{"x":1},"ünï":"u","":{"":3}}`
	got, _ := stats(log)
	ottl := map[string]string{}
	for _, f := range got {
		ottl[f.Path] = f.OTTL
	}
	for path, want := range map[string]string{
		"resourceAttributes.service.name": `resource_attributes["service.name"]`,
		"resourceAttributes.k8s.pod.name": `resource_attributes["k8s.pod.name"]`,
		"severityNumber":                  `severity_number`,
		"traceId":                         `trace_id`,
		"trace_id":                        `event["trace_id"]`,
		"attributes.http.method":          `attributes["http.method"]`,
		`attributes.say "hi"`:             `attributes["say \"hi\""]`,
		`attributes.back\slash`:           `attributes["back\\slash"]`,
		"attributes.nested.a.b.c":         `attributes["nested"]["a.b"]["c"]`,
		"_event_type":                     `event["_event_type"]`,
		"signal":                          `event["signal"]`,
		"Status":                          `event["Status"]`,
		"event":                           `event["event"]`,
		"event.x":                         `event["event"]["x"]`,
		"items[].id":                      `items[0]["id"]`,
		"items[].sku":                     `items[1]["sku"]`,
		"items[].tags[]":                  `items[1]["tags"][0]`,
		"ünï":                             `event["ünï"]`,
		".":                               `event[""][""]`,
	} {
		assert.Equal(t, want, ottl[path], path)
	}
	// "a.b" is both a dotted key and a nested member; the first the record holds wins,
	// and the ottl says which one it is.
	assert.Equal(t, `event["a.b"]`, ottl["a.b"])

	// Each one compiles in the trigger's language and reads the value it names.
	rec, err := ottlevent.DecodeRecord([]byte(log), "log")
	require.NoError(t, err)
	for _, f := range got {
		c, err := ottlevent.CompileCondition(f.OTTL+" != nil", componenttest.NewNopTelemetrySettings())
		require.NoError(t, err, "%s: %s", f.Path, f.OTTL)
		ok, err := c.Match(context.Background(), rec)
		require.NoError(t, err)
		assert.True(t, ok, "%s: %s reads nothing", f.Path, f.OTTL)
	}
	v, err := ottlevent.CompileValue(ottl[`attributes.say "hi"`], componenttest.NewNopTelemetrySettings())
	require.NoError(t, err)
	s, err := v.String(context.Background(), rec)
	require.NoError(t, err)
	assert.Equal(t, "1", s)
}

func TestFieldStatsBounds(t *testing.T) {
	deep := `{"a":`
	for i := 0; i < 40; i++ {
		deep += `{"a":`
	}
	deep += `1`
	for i := 0; i < 41; i++ {
		deep += `}`
	}
	got, _ := stats(deep)
	assert.Len(t, got, MaxDepth, "paths deeper than the limit are not listed")

	wide := map[string]int{}
	for i := 0; i < MaxPaths+10; i++ {
		wide[fmt.Sprintf("k%d", i)] = i
	}
	b, _ := json.Marshal(wide)
	got, s := stats(string(b))
	assert.Len(t, got, MaxPaths)
	assert.True(t, s.truncated)
}

func FuzzFieldStats(f *testing.F) {
	for _, s := range []string{`{"a":{"b":[1,{"c":null}]}}`, `[]`, `{"a.b":"x","":{"":1}}`, `{"a":1}{"b":2}`, `"x"`, `{"a":[[[]]]}`} {
		f.Add([]byte(s), []byte(`{"a":2}`))
	}
	f.Fuzz(func(t *testing.T, a, b []byte) {
		got, s := stats(string(a), string(b))
		if s.sampled != 2 {
			t.Fatalf("sampled %d", s.sampled)
		}
		if !sort.SliceIsSorted(got, func(i, j int) bool { return got[i].Path < got[j].Path }) {
			t.Fatal("paths not sorted")
		}
		for i, f := range got {
			if f.Count < 1 || f.Count > 2 || len(f.Types) == 0 || (f.OTTL == "" && !strings.HasPrefix(f.Path, "[]")) {
				t.Fatalf("field %+v", f)
			}
			if i > 0 && got[i-1].Path == f.Path {
				t.Fatalf("path %q twice", f.Path)
			}
			// Whatever the keys, the OTTL given is one the trigger's compiler takes.
			if i < 20 && f.OTTL != "" {
				if _, err := ottlevent.CompileCondition(f.OTTL+" != nil", componenttest.NewNopTelemetrySettings()); err != nil {
					t.Fatalf("%s: %s does not compile: %v", f.Path, f.OTTL, err)
				}
			}
		}
		// Every top-level member of a valid object is listed.
		var m map[string]json.RawMessage
		if json.Unmarshal(a, &m) == nil && len(m) < MaxPaths/2 {
			for k := range m {
				i := sort.Search(len(got), func(i int) bool { return got[i].Path >= k })
				if i == len(got) || got[i].Path != k {
					t.Fatalf("member %q of %s not listed in %+v", k, a, got)
				}
			}
		}
	})
}
