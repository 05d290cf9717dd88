package benchkit

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
)

// PerfRecord samples the collector's stacks with Linux perf into dir/name.perf.data
// until the returned function is called (nothing when dir is empty). Go binaries keep
// frame pointers, so `perf report -i FILE --children --sort symbol` shows call graphs.
func PerfRecord(r *Runner, dir, name string, pid int) (stop func()) {
	if dir == "" {
		return func() {}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		r.Fatal(err)
	}
	cmd := exec.Command("perf", "record", "-F", "499", "-g", "-p", strconv.Itoa(pid), "-o", filepath.Join(dir, name+".perf.data"))
	cmd.Stdout, cmd.Stderr = io.Discard, os.Stderr
	if err := cmd.Start(); err != nil {
		r.Fatalf("perf record: %v (install linux-perf, or run without -perf)", err)
	}
	return func() {
		_ = cmd.Process.Signal(os.Interrupt) // perf writes its file on SIGINT
		_ = cmd.Wait()
	}
}
