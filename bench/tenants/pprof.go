package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/otelcol-svc/otelcol-svc/bench/internal/benchkit"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// profiler takes the profiles behind the report's memory and restart figures (-pprof DIR):
// the collector's and nats-server's heaps when idle, and both processes' CPU while they
// restart, so that what a project costs is read from a profile, not guessed.
type profiler struct {
	dir string
}

// collectorConfig writes configs/embedded.yaml with the pprof extension on port and
// returns it as the path relative to the repository that testenv wants.
func (p *profiler) collectorConfig(r *benchkit.Runner, port int) string {
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "configs/embedded.yaml"))
	if err != nil {
		r.Fatal(err)
	}
	s, err := withPprof(string(b), port)
	if err != nil {
		r.Fatal("configs/embedded.yaml: ", err)
	}
	path := filepath.Join(r.TempDir(), "embedded-pprof.yaml")
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		r.Fatal(err)
	}
	rel, err := filepath.Rel(testenv.RepoRoot(), path)
	if err != nil {
		r.Fatal(err)
	}
	return rel
}

// withPprof adds contrib's pprof extension (which the distribution carries, off unless
// configured) on 127.0.0.1:port to a collector configuration: declared first among the
// top-level extensions and first in service.extensions. A text edit rather than a YAML
// round trip, which would reorder the file and drop its comments for nothing.
func withPprof(cfg string, port int) (string, error) {
	for _, edit := range [][2]string{
		{"\nextensions:\n", "\nextensions:\n  pprof:\n    endpoint: 127.0.0.1:" + strconv.Itoa(port) + "\n"},
		{"\n  extensions: [", "\n  extensions: [pprof, "},
	} {
		if !strings.Contains(cfg, edit[0]) {
			return "", fmt.Errorf("no %q to add the pprof extension at", strings.TrimSpace(edit[0]))
		}
		cfg = strings.Replace(cfg, edit[0], edit[1], 1)
	}
	return cfg, nil
}

// save fetches one profile from a /debug/pprof endpoint into the profile directory.
func (p *profiler) save(base, path, name string) {
	resp, err := (&http.Client{Timeout: 2 * time.Minute}).Get(base + path)
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench/tenants: profile %s: %v\n", name, err)
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintf(os.Stderr, "bench/tenants: profile %s: %s\n", name, resp.Status)
		return
	}
	f, err := os.Create(filepath.Join(p.dir, name))
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench/tenants:", err)
		return
	}
	defer f.Close()
	_, _ = io.Copy(f, resp.Body)
}

// heapAfterGC is a process's live heap in MiB: HeapAlloc right after the garbage
// collection that the heap endpoint runs with gc=1 (its debug=1 text ends with the
// runtime's MemStats). Unlike a heap metric scraped at any moment, it holds no garbage
// waiting for the next cycle, and unlike RSS none of what the runtime keeps after a burst.
func (p *profiler) heapAfterGC(base string) (float64, error) {
	resp, err := (&http.Client{Timeout: time.Minute}).Get(base + "/debug/pprof/heap?gc=1&debug=1")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	return parseHeapAlloc(string(b))
}

func parseHeapAlloc(text string) (float64, error) {
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, "# HeapAlloc = "); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("HeapAlloc %q: %w", v, err)
			}
			return float64(n) / (1 << 20), nil
		}
	}
	return 0, fmt.Errorf("no HeapAlloc in the heap profile's text")
}

// cpuUntil takes 5-second CPU profiles of base (name-00.cpu, name-01.cpu, ...) until stop
// is closed; `go tool pprof` merges the files it is given. The endpoint may not answer
// yet when it starts (the process is starting): those attempts are retried.
func (p *profiler) cpuUntil(base, name string, stop <-chan struct{}) *sync.WaitGroup {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; {
			select {
			case <-stop:
				return
			default:
			}
			resp, err := (&http.Client{Timeout: time.Minute}).Get(base + "/debug/pprof/profile?seconds=5")
			if err != nil {
				time.Sleep(20 * time.Millisecond)
				continue
			}
			if f, err := os.Create(filepath.Join(p.dir, fmt.Sprintf("%s-%02d.cpu", name, i))); err == nil {
				_, _ = io.Copy(f, resp.Body)
				f.Close()
			}
			resp.Body.Close()
			i++
		}
	}()
	return &wg
}
