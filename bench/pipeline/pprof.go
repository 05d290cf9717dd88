package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/otelcol-svc/otelcol-svc/bench/internal/benchkit"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// withPprof writes a copy of the role's configuration (a path relative to the repo root)
// with contrib's pprof extension listening on endpoint, and returns the copy's path in the
// form testenv.CollectorOptions takes (relative to the repo root). The distribution
// carries the extension; the shipped configs leave it off.
func withPprof(r *benchkit.Runner, config, endpoint string) string {
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), config))
	if err != nil {
		r.Fatal(err)
	}
	s := string(b)
	// The configs are hand-written YAML with one top-level extensions map and one
	// service.extensions list; a config of another shape fails here rather than running
	// without the profile.
	const top, list = "\nextensions:\n", "\n  extensions: ["
	if strings.Count(s, top) != 1 || strings.Count(s, list) != 1 {
		r.Fatalf("-pprof: %s has not exactly one top-level extensions map and one service extensions list", config)
	}
	s = strings.Replace(s, top, top+"  pprof:\n    endpoint: "+endpoint+"\n", 1)
	s = strings.Replace(s, list, list+"pprof, ", 1)
	out := filepath.Join(r.TempDir(), filepath.Base(config))
	if err := os.WriteFile(out, []byte(s), 0o644); err != nil {
		r.Fatal(err)
	}
	rel, err := filepath.Rel(testenv.RepoRoot(), out)
	if err != nil {
		r.Fatal(err)
	}
	return rel
}

// cpuProfile profiles the collector's CPU through its pprof endpoint until the returned
// function is called, then writes the profile to file (nothing when file is empty).
// net/http/pprof profiles for a fixed number of seconds and cannot be stopped early, so
// it takes 1 s pieces back to back and merges them with `go tool pprof -proto`; the last
// piece runs up to a second past stop, when the collector is idle.
func cpuProfile(r *benchkit.Runner, endpoint, file string) (stop func()) {
	if file == "" {
		return func() {}
	}
	dir := r.TempDir()
	done := make(chan struct{})
	result := make(chan error, 1)
	var pieces []string
	go func() {
		for i := 0; ; i++ {
			select {
			case <-done:
				result <- nil
				return
			default:
			}
			piece := filepath.Join(dir, fmt.Sprintf("cpu-%03d.pb.gz", i))
			if err := fetchProfile("http://"+endpoint+"/debug/pprof/profile?seconds=1", piece); err != nil {
				result <- err
				return
			}
			pieces = append(pieces, piece)
		}
	}()
	return func() {
		close(done)
		if err := <-result; err != nil {
			r.Fatalf("-pprof: %v", err)
		}
		if len(pieces) == 0 {
			r.Fatal("-pprof: no profile taken")
		}
		f, err := os.Create(file)
		if err != nil {
			r.Fatal(err)
		}
		cmd := exec.Command("go", append([]string{"tool", "pprof", "-proto"}, pieces...)...)
		cmd.Stdout, cmd.Stderr = f, os.Stderr
		err = cmd.Run()
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			r.Fatalf("-pprof: merging %d pieces: %v", len(pieces), err)
		}
		fmt.Fprintf(os.Stderr, "CPU profile of the collector: %s (go tool pprof -top %s)\n", file, file)
	}
}

func fetchProfile(url, path string) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("%s: %s %s", url, resp.Status, b)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// incidentProfile is where the incident-mode drain's profile goes: file with
// ".incident" before its extension.
func incidentProfile(file string) string {
	if file == "" {
		return ""
	}
	ext := filepath.Ext(file)
	if strings.HasSuffix(file, ".pb.gz") {
		ext = ".pb.gz"
	}
	return strings.TrimSuffix(file, ext) + ".incident" + ext
}
