package benchkit

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// WithPprof adds contrib's pprof extension (which the distribution carries, off unless
// configured) listening on endpoint to a collector configuration: declared first among
// the top-level extensions and first in service.extensions. A text edit rather than a
// YAML round trip, which would reorder the file and drop its comments for nothing. The
// configs are hand-written with one top-level extensions map and one service.extensions
// list; a config of another shape is an error rather than a run without the profile.
func WithPprof(cfg, endpoint string) (string, error) {
	for _, edit := range [][2]string{
		{"\nextensions:\n", "\nextensions:\n  pprof:\n    endpoint: " + endpoint + "\n"},
		{"\n  extensions: [", "\n  extensions: [pprof, "},
	} {
		if n := strings.Count(cfg, edit[0]); n != 1 {
			return "", fmt.Errorf("%d times %q, want once, to add the pprof extension at", n, strings.TrimSpace(edit[0]))
		}
		cfg = strings.Replace(cfg, edit[0], edit[1], 1)
	}
	return cfg, nil
}

// PprofConfig writes a copy of config (a path relative to the repo root) with the pprof
// extension on endpoint, and returns the copy's path in the form testenv.CollectorOptions
// takes (relative to the repo root).
func PprofConfig(r *Runner, config, endpoint string) string {
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), config))
	if err != nil {
		r.Fatal(err)
	}
	s, err := WithPprof(string(b), endpoint)
	if err != nil {
		r.Fatalf("-pprof: %s: %v", config, err)
	}
	out := filepath.Join(r.TempDir(), "pprof-"+filepath.Base(config))
	if err := os.WriteFile(out, []byte(s), 0o644); err != nil {
		r.Fatal(err)
	}
	rel, err := filepath.Rel(testenv.RepoRoot(), out)
	if err != nil {
		r.Fatal(err)
	}
	return rel
}

// FetchProfile saves what a /debug/pprof URL answers to path. On any failure, a cut
// connection mid-body included (the process restarting), no file is left behind: a
// truncated profile would break `go tool pprof` merging it with the others later.
func FetchProfile(url, path string, timeout time.Duration) (err error) {
	resp, err := (&http.Client{Timeout: timeout}).Get(url)
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
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			_ = os.Remove(path)
		}
	}()
	if _, err := io.Copy(f, resp.Body); err != nil {
		return fmt.Errorf("%s: %w", url, err)
	}
	return nil
}
