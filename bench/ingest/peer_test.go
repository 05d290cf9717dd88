package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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

// Side B's rounds last until the second collector has accepted what the first did, read
// from the stock collector's own metrics (testdata: its /metrics after 3 requests of 2
// records). A miss would end the wait at once (0 >= 0) and credit B with its queue's burst.
func TestAcceptedReadsTheStockCollectorsCounter(t *testing.T) {
	text, err := os.ReadFile("testdata/peer-metrics.txt")
	if err != nil {
		t.Fatal(err)
	}
	if n, err := acceptedIn(bytes.NewReader(text)); err != nil || n != 6 {
		t.Errorf("accepted = %v, %v; want 6", n, err)
	}
	// A second series (a gRPC transport) counts too, and large counts come as exponents.
	more := append(append([]byte(nil), text...), `otelcol_receiver_accepted_log_records{receiver="otlp",transport="grpc"} 1.2345678e+07`+"\n"...)
	if n, err := acceptedIn(bytes.NewReader(more)); err != nil || n != 12345684 {
		t.Errorf("accepted with two series = %v, %v; want 12345684", n, err)
	}
	// The refused and failed counters are not accepted records.
	if n, _ := acceptedIn(strings.NewReader("otelcol_receiver_refused_log_records{receiver=\"otlp\"} 5\n")); n != 0 {
		t.Errorf("refused records were counted as accepted: %v", n)
	}
	if _, err := acceptedIn(strings.NewReader("otelcol_receiver_accepted_log_records{receiver=\"otlp\"} many\n")); err == nil {
		t.Error("a value that is no number was taken")
	}
}

func FuzzAcceptedIn(f *testing.F) {
	text, err := os.ReadFile("testdata/peer-metrics.txt")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(text)
	f.Add([]byte("otelcol_receiver_accepted_log_records 3\notelcol_receiver_accepted_log_records_total{a=\"b c\"} 4\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := acceptedIn(bytes.NewReader(b))
		if err != nil && n != 0 {
			t.Errorf("an error with a count: %v, %v", n, err)
		}
	})
}

// A side that answered some requests 503 or 429 is measured on its successes only: its
// records/s says nothing about the load it was given, so no goal is met or missed.
func TestPeerGoalsAreNotJudgedWhenASideFailed(t *testing.T) {
	rep := &peerReport{RateA: 1, CPUA: 1, RateB: 3, Sides: []peerSideReport{
		{Name: "otelcol-svc", phase: phase{Failures: map[string]int{}}},
		{Name: "A", phase: phase{Failures: map[string]int{"503": 4}}},
		{Name: "B"},
	}}
	rep.judge()
	if rep.Comparable || rep.Goals != (peerGoals{}) {
		t.Errorf("with A failing: comparable %v, goals %+v; want not comparable, none met", rep.Comparable, rep.Goals)
	}
	var out bytes.Buffer
	rep.print(&out)
	if !strings.Contains(out.String(), "not comparable") || strings.Contains(out.String(), " met") {
		t.Errorf("the report judges goals of a run with failures:\n%s", out.String())
	}
	rep.Sides[1].Failures = nil
	rep.judge()
	if !rep.Comparable || rep.Goals != (peerGoals{RateA: true, CPUA: true, RateB: true}) {
		t.Errorf("without failures: comparable %v, goals %+v; want all met", rep.Comparable, rep.Goals)
	}
}

// Builds of other configs are removed only once unused for a day (another run may be
// using one), and interrupted builds only once long untouched (another run may be
// building right now).
func TestPeerBuildSweepSparesWhatAnotherRunMayUse(t *testing.T) {
	base := t.TempDir()
	mk := func(name string, age time.Duration) string {
		p := filepath.Join(base, name)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		at := time.Now().Add(-age)
		if err := os.Chtimes(p, at, at); err != nil {
			t.Fatal(err)
		}
		return p
	}
	current := mk("00000000000000aa", 48*time.Hour)
	recent := mk("00000000000000bb", time.Hour)
	stale := mk("00000000000000cc", 48*time.Hour)
	building := mk("building-123", time.Minute)
	killed := mk("building-456", 3*time.Hour)
	other := mk("ocb-v0", 48*time.Hour)
	sweepPeerBuilds(base, current)
	for p, want := range map[string]bool{current: true, recent: true, stale: false, building: true, killed: false, other: true} {
		_, err := os.Stat(p)
		if got := err == nil; got != want {
			t.Errorf("%s kept = %v, want %v", filepath.Base(p), got, want)
		}
	}
}
