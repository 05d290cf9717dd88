package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/otelcol-svc/otelcol-svc/bench/internal/benchkit"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// natsServer is nats-server as a process of its own (built from the module in go.mod),
// so that its CPU and memory are measured apart from the collector's, and so that it can
// be stopped and started again on the same store like a deployed server. testenv.NATS
// runs in-process, which would mix its costs into this program's.
type natsServer struct {
	bin, storeDir, logPath string
	port, monPort          int
	profPort               int    // with -pprof
	conf                   string // a configuration file (accounts), for the server-only phase
	cmd                    *exec.Cmd
	exited                 chan struct{}
}

// buildNATS builds the nats-server binary of the version this module requires.
func buildNATS(r *benchkit.Runner) string {
	dir, err := os.MkdirTemp("", "nats-server-bin")
	if err != nil {
		r.Fatal(err)
	}
	r.AtExit(func() { _ = os.RemoveAll(dir) })
	bin := filepath.Join(dir, "nats-server")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/nats-io/nats-server/v2")
	cmd.Dir = testenv.RepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		r.Fatalf("go build nats-server: %v\n%s", err, out)
	}
	return bin
}

// startNATS starts a server with JetStream on a fresh store; it is killed with the phase.
func startNATS(r *benchkit.Runner, bin string) *natsServer {
	n := &natsServer{bin: bin}
	n.init(r)
	n.start(r)
	return n
}

// init picks the ports, store and log of a server not started yet; it is killed with
// the phase.
func (n *natsServer) init(r *benchkit.Runner) {
	n.storeDir, n.logPath = r.TempDir(), filepath.Join(r.TempDir(), "nats.log")
	n.port, n.monPort = testenv.FreePort(r), testenv.FreePort(r)
	if prof != nil {
		n.profPort = testenv.FreePort(r)
	}
	r.Cleanup(n.kill)
}

// start (re)starts the process on the same ports and store and waits until its /healthz
// says JetStream is up, which after a restart includes having recovered every stream.
func (n *natsServer) start(r *benchkit.Runner) {
	logf, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		r.Fatal(err)
	}
	defer logf.Close()
	var args []string
	if n.conf != "" {
		args = append(args, "-c", n.conf)
	}
	args = append(args, "-a", "127.0.0.1", "-p", strconv.Itoa(n.port), "-m", strconv.Itoa(n.monPort), "-js", "-sd", n.storeDir)
	if n.profPort != 0 {
		args = append(args, "--profile", strconv.Itoa(n.profPort))
	}
	cmd := exec.Command(n.bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		r.Fatal(err)
	}
	n.cmd, n.exited = cmd, make(chan struct{})
	go func(c *exec.Cmd, done chan struct{}) { _ = c.Wait(); close(done) }(cmd, n.exited)
	// Recovering 10,000 projects' streams and consumers can take minutes before the fix
	// this benchmark is for; the deadline only catches a server that never comes up.
	for deadline := time.Now().Add(10 * time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		select {
		case <-n.exited:
			log, _ := os.ReadFile(n.logPath)
			r.Fatalf("nats-server exited during start:\n%s", tail(log, 4000))
		default:
		}
		if resp, err := http.Get(n.monitorURL("/healthz")); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
	}
	r.Fatal("nats-server not healthy within 10 minutes")
}

// stop ends the server gracefully (SIGTERM flushes and closes the stores), as an operator
// restarting it would.
func (n *natsServer) stop() {
	if n.cmd == nil {
		return
	}
	_ = n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.exited:
	case <-time.After(2 * time.Minute):
		_ = n.cmd.Process.Kill()
		<-n.exited
	}
	n.cmd = nil
}

func (n *natsServer) kill() {
	if n.cmd == nil {
		return
	}
	_ = n.cmd.Process.Kill()
	<-n.exited
	n.cmd = nil
}

func (n *natsServer) pid() int {
	if n.cmd == nil {
		return 0
	}
	return n.cmd.Process.Pid
}

func (n *natsServer) profileURL() string { return "http://127.0.0.1:" + strconv.Itoa(n.profPort) }

func (n *natsServer) url() string { return "nats://127.0.0.1:" + strconv.Itoa(n.port) }

func (n *natsServer) monitorURL(path string) string {
	return "http://127.0.0.1:" + strconv.Itoa(n.monPort) + path
}

// varz and jsz are the parts of the monitoring endpoints' answers the report uses.
type varz struct {
	Connections   int    `json:"connections"`
	Subscriptions uint32 `json:"subscriptions"`
	InMsgs        int64  `json:"in_msgs"`
	OutMsgs       int64  `json:"out_msgs"`
}

type jsz struct {
	Streams   int    `json:"streams"`
	Consumers int    `json:"consumers"`
	Messages  uint64 `json:"messages"`
	Store     uint64 `json:"storage"`
	Reserved  uint64 `json:"reserved_storage"`
	API       struct {
		Total  uint64 `json:"total"`
		Errors uint64 `json:"errors"`
	} `json:"api"`
}

func (n *natsServer) monitor(path string, v any) error {
	resp, err := http.Get(n.monitorURL(path))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
