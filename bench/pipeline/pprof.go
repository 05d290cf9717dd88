package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/otelcol-svc/otelcol-svc/bench/internal/benchkit"
)

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
			if err := benchkit.FetchProfile("http://"+endpoint+"/debug/pprof/profile?seconds=1", piece, time.Minute); err != nil {
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
