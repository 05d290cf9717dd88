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
)

// profiler takes the profiles behind the report's memory and restart figures (-pprof DIR):
// the collector's and nats-server's heaps when idle, and both processes' CPU while they
// restart, so that what a project costs is read from a profile, not guessed.
type profiler struct {
	dir string
}

// collectorConfig is configs/embedded.yaml with the pprof extension on port, as the
// path relative to the repository that testenv wants.
func (p *profiler) collectorConfig(r *benchkit.Runner, port int) string {
	return benchkit.PprofConfig(r, "configs/embedded.yaml", "127.0.0.1:"+strconv.Itoa(port))
}

// save fetches one profile from a /debug/pprof endpoint into the profile directory.
func (p *profiler) save(base, path, name string) {
	if err := benchkit.FetchProfile(base+path, filepath.Join(p.dir, name), 2*time.Minute); err != nil {
		fmt.Fprintf(os.Stderr, "bench/tenants: profile %s: %v\n", name, err)
	}
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
			// A failed or cut profile leaves no file, and the next is tried under its number.
			if err := benchkit.FetchProfile(base+"/debug/pprof/profile?seconds=5", filepath.Join(p.dir, fmt.Sprintf("%s-%02d.cpu", name, i)), time.Minute); err != nil {
				time.Sleep(20 * time.Millisecond)
				continue
			}
			i++
		}
	}()
	return &wg
}
