package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// process is one child process of a test: the collector, the control plane or a NATS
// node. Hand-written because os/exec stops at starting and waiting; what every one of
// them needs on top (its output kept for the failure log, a signal when it exits while
// the test waits for it to become ready, SIGKILL as a crash, and telling a port taken by
// a parallel test from a real failure) is the same for all three.
type process struct {
	mu     sync.Mutex
	log    bytes.Buffer
	cmd    *exec.Cmd
	exited chan struct{}
}

// errPortTaken is a start that failed because a port picked as free was taken meanwhile
// (by a test running in parallel): the caller then retries with other ports.
var errPortTaken = errors.New("address already in use")

// start runs bin with args, the test's environment plus env, and its output captured.
func (p *process) start(bin string, args []string, env map[string]string) error {
	cmd := exec.Command(bin, args...)
	cmd.Env = os.Environ()
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	w := &lockedWriter{mu: &p.mu, b: &p.log}
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	p.mu.Lock()
	p.cmd, p.exited = cmd, exited
	p.mu.Unlock()
	return nil
}

// waitReady polls ready every interval until it answers true. It fails when the process
// exits first (with errPortTaken when it could not listen) or within passes.
func (p *process) waitReady(name string, within, interval time.Duration, ready func() bool) error {
	deadline := time.Now().Add(within)
	for {
		select {
		case <-p.exited:
			p.mu.Lock()
			p.cmd = nil
			p.mu.Unlock()
			if strings.Contains(p.Log(), errPortTaken.Error()) {
				return errPortTaken
			}
			return fmt.Errorf("%s exited during start:\n%s", name, tail(p.Log(), 16<<10))
		default:
		}
		if ready() {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready within %s:\n%s", name, within, tail(p.Log(), 16<<10))
		}
		time.Sleep(interval)
	}
}

// pid is the process id, 0 when it is not running.
func (p *process) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// kill ends the process with SIGKILL, as a crash would, and waits for it to be gone.
func (p *process) kill() {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.cmd = nil
	p.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-exited
}

// stop ends the process with SIGTERM, and with SIGKILL if it is still there when ctx ends.
func (p *process) stop(ctx context.Context) {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
		p.mu.Lock()
		p.cmd = nil
		p.mu.Unlock()
	case <-ctx.Done():
		p.kill()
	}
}

// Log returns what the process printed (over all its starts).
func (p *process) Log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

// resetLog forgets what a failed start printed, before the next attempt.
func (p *process) resetLog() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.log.Reset()
}

// retryPorts calls start, which picks its free ports afresh each time, again when a port
// picked as free was taken meanwhile by a test running in parallel.
func retryPorts(t T, start func() error) {
	t.Helper()
	for attempt := 0; ; attempt++ {
		err := start()
		if err == nil {
			return
		}
		if !errors.Is(err, errPortTaken) || attempt == 4 {
			t.Fatal(err)
		}
	}
}

// answers200 reports whether a GET of url answers 200 OK.
func answers200(url string) bool {
	resp, err := http.Get(url)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func tail(s string, max int) string {
	if len(s) <= max {
		return s
	}
	return "…" + s[len(s)-max:]
}

// signal sends sig to the process without waiting for it, as an orchestrator does at the
// start of a stop; false when it is not running.
func (p *process) signal(sig os.Signal) bool {
	p.mu.Lock()
	cmd := p.cmd
	p.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return false
	}
	return cmd.Process.Signal(sig) == nil
}

// exitedChan is closed when the process last started has exited.
func (p *process) exitedChan() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exited
}
