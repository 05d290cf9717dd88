package benchkit

import (
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// -pprof must profile the configurations the benchmarks run: the role's config with the
// extension declared and started, nothing else changed.
func TestWithPprofOnTheShippedConfigs(t *testing.T) {
	for _, name := range []string{"embedded.yaml", "pipeline.yaml"} {
		b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "configs", name))
		if err != nil {
			t.Fatal(err)
		}
		got, err := WithPprof(string(b), "127.0.0.1:41777")
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !strings.Contains(got, "\nextensions:\n  pprof:\n    endpoint: 127.0.0.1:41777\n") {
			t.Errorf("%s: pprof not declared among the top-level extensions:\n%s", name, got[:min(len(got), 400)])
		}
		if !strings.Contains(got, "\nservice:\n  extensions: [pprof, ") {
			t.Errorf("%s: pprof not started with the service's extensions", name)
		}
		if n := strings.Count(got, "pprof"); n != strings.Count(string(b), "pprof")+2 {
			t.Errorf("%s: pprof named %d times, want 2 more than before (declared and started, no other edit)", name, n)
		}
	}
	if _, err := WithPprof("receivers: {}\n", "127.0.0.1:1"); err == nil {
		t.Error("a configuration without extensions was edited silently")
	}
}

// A profile cut short (the server going away mid-body) leaves no file: a truncated one
// would break merging the profiles later.
func TestFetchProfileLeavesNoTruncatedFile(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/whole" {
			_, _ = w.Write([]byte("profile"))
			return
		}
		// Promise more than is sent, then drop the connection.
		w.Header().Set("Content-Length", "1000")
		_, _ = w.Write([]byte("half a profile"))
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	dir := t.TempDir()
	base := "http://" + ln.Addr().String()

	cut := filepath.Join(dir, "cut.pb.gz")
	if err := FetchProfile(base+"/cut", cut, time.Minute); err == nil {
		t.Error("a profile cut short was taken as whole")
	}
	if _, err := os.Stat(cut); !os.IsNotExist(err) {
		t.Errorf("a truncated profile was left at %s (stat: %v)", cut, err)
	}
	whole := filepath.Join(dir, "whole.pb.gz")
	if err := FetchProfile(base+"/whole", whole, time.Minute); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(whole); string(b) != "profile" {
		t.Errorf("saved %q, want the profile", b)
	}
}
