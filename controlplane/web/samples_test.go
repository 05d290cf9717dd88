package web

import (
	"os"
	"path/filepath"
	"testing"
)

// The dashboard's Test offers each provider's sample payload from src/sources/samples,
// copies of the payloads internal/sourcepreset is tested with. A copy that drifts would
// show people a sample the preset was never tested on, so any difference fails here.
func TestProviderSamplesMatchPresetTestdata(t *testing.T) {
	copies, err := filepath.Glob(filepath.Join("src", "sources", "samples", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(copies) == 0 {
		t.Fatal("no samples in src/sources/samples")
	}
	for _, c := range copies {
		orig := filepath.Join("..", "..", "internal", "sourcepreset", "testdata", filepath.Base(c))
		want, err := os.ReadFile(orig)
		if err != nil {
			t.Errorf("%s has no original: %v", c, err)
			continue
		}
		got, err := os.ReadFile(c)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("%s differs from %s: copy it again (cp %s %s)", c, orig, orig, c)
		}
	}
}
