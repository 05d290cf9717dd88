package console

import (
	"encoding/json"
	"fmt"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
)

func stats(recs ...string) ([]FieldStat, *fieldStats) {
	s := newFieldStats()
	for _, r := range recs {
		s.add([]byte(r))
	}
	return s.result(), s
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
	assert.Equal(t, []FieldStat{
		{Path: "_event_type", Count: 2, Types: []string{"string"}},
		{Path: "payload", Count: 2, Types: []string{"object"}},
		{Path: "payload.draft", Count: 1, Types: []string{"boolean"}},
		{Path: "payload.labels", Count: 2, Types: []string{"array"}},
		{Path: "payload.labels[]", Count: 1, Types: []string{"object"}},
		{Path: "payload.labels[].id", Count: 1, Types: []string{"number"}},
		{Path: "payload.labels[].name", Count: 1, Types: []string{"string"}},
		{Path: "payload.matrix", Count: 1, Types: []string{"array"}},
		{Path: "payload.matrix[]", Count: 1, Types: []string{"array"}},
		{Path: "payload.matrix[][]", Count: 1, Types: []string{"number"}},
		{Path: "payload.repo", Count: 2, Types: []string{"object"}},
		{Path: "payload.repo.name", Count: 2, Types: []string{"string"}},
		{Path: "payload.repo.stars", Count: 2, Types: []string{"string", "number"}},
		{Path: "payload.tags", Count: 1, Types: []string{"array"}},
		{Path: "payload.tags[]", Count: 1, Types: []string{"string", "number", "null"}},
	}, got)
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
	assert.Len(t, got, maxFieldDepth, "paths deeper than the limit are not listed")

	wide := map[string]int{}
	for i := 0; i < maxFieldPaths+10; i++ {
		wide[fmt.Sprintf("k%d", i)] = i
	}
	b, _ := json.Marshal(wide)
	got, s := stats(string(b))
	assert.Len(t, got, maxFieldPaths)
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
			if f.Count < 1 || f.Count > 2 || len(f.Types) == 0 {
				t.Fatalf("field %+v", f)
			}
			if i > 0 && got[i-1].Path == f.Path {
				t.Fatalf("path %q twice", f.Path)
			}
		}
		// Every top-level member of a valid object is listed.
		var m map[string]json.RawMessage
		if json.Unmarshal(a, &m) == nil && len(m) < maxFieldPaths/2 {
			for k := range m {
				i := sort.Search(len(got), func(i int) bool { return got[i].Path >= k })
				if i == len(got) || got[i].Path != k {
					t.Fatalf("member %q of %s not listed in %+v", k, a, got)
				}
			}
		}
	})
}
