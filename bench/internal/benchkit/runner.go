// Package benchkit is what the benchmark programs share: a testenv.T for a program, so
// they start NATS and the collector exactly as the end-to-end tests do, and perf
// recording of the collector.
package benchkit

import (
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// Runner implements testenv.T for a program. Fatal prints, runs the cleanups (which stop
// the collector and print its log, since the run has then failed) and exits non-zero.
// NewRunner returns a runner whose errors are prefixed with name.
func NewRunner(name string) *Runner { return &Runner{name: name} }

type Runner struct {
	name     string
	mu       sync.Mutex
	cleanups []func() // what a phase started; cleanup runs them
	exits    []func() // what outlives the phases (the built binary); exit runs them
	failed   bool
}

func (r *Runner) Helper() {}

func (r *Runner) Logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
}

func (r *Runner) Fatal(args ...any) {
	fmt.Fprintln(os.Stderr, append([]any{r.name + ": error:"}, args...)...)
	r.fail()
}

func (r *Runner) Fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, r.name+": error: "+format+"\n", args...)
	r.fail()
}

// fail may be called from any goroutine; only the first caller cleans up, the others
// wait for the exit.
func (r *Runner) fail() {
	r.mu.Lock()
	if r.failed {
		r.mu.Unlock()
		select {} // the first failure is exiting the process
	}
	r.failed = true
	r.mu.Unlock()
	r.Exit()
	os.Exit(1)
}

func (r *Runner) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}

func (r *Runner) TempDir() string {
	dir, err := os.MkdirTemp("", "bench-")
	if err != nil {
		r.Fatal(err)
	}
	r.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

func (r *Runner) Cleanup(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cleanups = append(r.cleanups, f)
}

// AtExit registers f to run when the program ends, on success or failure, after the
// cleanups.
func (r *Runner) AtExit(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.exits = append(r.exits, f)
}

// WriteReport writes a benchmark's figures as indented JSON to path (its -json flag);
// nothing when path is empty.
func WriteReport(name, path string, v any) {
	if path == "" {
		return
	}
	b, _ := json.MarshalIndent(v, "", "  ")
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, name+": error:", err)
		os.Exit(1)
	}
}

// ExitOnInterrupt makes Ctrl-C (or SIGTERM) end the run as Exit does, so the processes
// a benchmark started are stopped and its temporary directories removed, then exits 130.
func (r *Runner) ExitOnInterrupt() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() { <-sig; r.Exit(); os.Exit(130) }()
}

// Exit runs the cleanups, then the AtExit functions.
func (r *Runner) Exit() {
	r.Cleanups()
	r.mu.Lock()
	exits := r.exits
	r.exits = nil
	r.mu.Unlock()
	for _, f := range exits {
		f()
	}
}

// Cleanups runs the registered functions last-in first-out, as testing does: at the end
// of each phase.
func (r *Runner) Cleanups() {
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
