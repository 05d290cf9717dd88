package service

import (
	"slices"
	"strings"
	"testing"
)

// FuzzValidKeyScopes: whatever list a request names, the scopes accepted are a non-empty,
// duplicate-free subset of the three in their order, and a refusal is a 400 with a
// message of bounded length.
func FuzzValidKeyScopes(f *testing.F) {
	for _, s := range []string{"ingest,results", "read", "", "read,read", "write", "ingest,results,read", "RESULTS", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, list string) {
		var in []string
		if list != "" {
			in = strings.Split(list, ",")
		}
		out, e := ValidKeyScopes(in)
		if e != nil {
			if e.Status != 400 || len(e.Message) > 200 {
				t.Fatalf("refusal %d %q", e.Status, e.Message)
			}
			return
		}
		if len(out) == 0 || len(out) != len(in) {
			t.Fatalf("accepted %q as %q", in, out)
		}
		order := []string{"ingest", "results", "read"}
		last := -1
		for _, s := range out {
			i := slices.Index(order, s)
			if i <= last {
				t.Fatalf("not a canonical subset: %q", out)
			}
			last = i
		}
	})
}
