package main

import (
	"fmt"
	"os"
	"sync"
)

// runner implements testenv.T for a program, so the benchmark starts NATS and the
// collector exactly as the end-to-end tests do (the same as bench/ingest's runner).
// Fatal prints, runs the cleanups (which stop the collector and print its log, since the
// run has then failed) and exits non-zero.
type runner struct {
	mu       sync.Mutex
	cleanups []func() // what a phase started; cleanup runs them
	exits    []func() // what outlives the phases (the built binary); exit runs them
	failed   bool
}

func (r *runner) Helper() {}

func (r *runner) Logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
}

func (r *runner) Fatal(args ...any) {
	fmt.Fprintln(os.Stderr, append([]any{"bench/pipeline: error:"}, args...)...)
	r.fail()
}

func (r *runner) Fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench/pipeline: error: "+format+"\n", args...)
	r.fail()
}

// fail may be called from any goroutine; only the first caller cleans up, the others
// wait for the exit.
func (r *runner) fail() {
	r.mu.Lock()
	if r.failed {
		r.mu.Unlock()
		select {} // the first failure is exiting the process
	}
	r.failed = true
	r.mu.Unlock()
	r.exit()
	os.Exit(1)
}

func (r *runner) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}

func (r *runner) TempDir() string {
	dir, err := os.MkdirTemp("", "bench-pipeline-")
	if err != nil {
		r.Fatal(err)
	}
	r.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

func (r *runner) Cleanup(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cleanups = append(r.cleanups, f)
}

// atExit registers f to run when the program ends, on success or failure, after the
// cleanups.
func (r *runner) atExit(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.exits = append(r.exits, f)
}

// exit runs the cleanups, then the atExit functions.
func (r *runner) exit() {
	r.cleanup()
	r.mu.Lock()
	exits := r.exits
	r.exits = nil
	r.mu.Unlock()
	for _, f := range exits {
		f()
	}
}

// cleanup runs the registered functions last-in first-out, as testing does: at the end
// of each phase.
func (r *runner) cleanup() {
	for {
		r.mu.Lock()
		n := len(r.cleanups)
		if n == 0 {
			r.mu.Unlock()
			return
		}
		f := r.cleanups[n-1]
		r.cleanups = r.cleanups[:n-1]
		r.mu.Unlock()
		f()
	}
}
