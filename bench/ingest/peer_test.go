package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// The stock collector is rebuilt when its pinned builder config changes, and only then:
// an edited config must not run the binary of the old one, and an unchanged one must not
// cost the minutes of another ocb build.
func TestPeerBuildIsKeptPerBuilderConfig(t *testing.T) {
	cfg, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), peerDir, "builder-config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	base := t.TempDir()
	dir := peerCacheDir(base, cfg)
	if filepath.Dir(dir) != base {
		t.Fatalf("cache dir %s is not under %s", dir, base)
	}
	if !isHex(filepath.Base(dir)) {
		t.Errorf("cache dir %s is not a hash (older builds are removed by that pattern)", dir)
	}
	if again := peerCacheDir(base, append([]byte(nil), cfg...)); again != dir {
		t.Errorf("the same config gave %s, then %s", dir, again)
	}
	changed := append(append([]byte(nil), cfg...), "\n# another component\n"...)
	if other := peerCacheDir(base, changed); other == dir {
		t.Errorf("a changed config reuses %s", dir)
	}
}
