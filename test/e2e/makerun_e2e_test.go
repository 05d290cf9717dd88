package e2e

import (
	"bufio"
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// `make run` is what the README starts with, and it ignored SVC_DATA_DIR and every moved
// port: this runs the real target, as a person would, with the
// state and every listen address moved.
func TestMakeRunHonoursDataDirAndPorts(t *testing.T) {
	needMakeRunTools(t)
	repoData := filepath.Join(testenv.RepoRoot(), "data")
	_, err := os.Stat(repoData)
	repoDataBefore := err == nil

	dataDir := filepath.Join(t.TempDir(), "state")
	port := func() string { return strconv.Itoa(testenv.FreePort(t)) }
	cp, recv, grpc, health, natsPort, metrics := port(), port(), port(), port(), port(), port()
	m := startMakeRun(t, map[string]string{
		"SVC_DATA_DIR":             dataDir,
		"SVC_CONTROLPLANE_LISTEN":  "0.0.0.0:" + cp, // a wildcard: probed on 127.0.0.1
		"SVC_RECEIVER_LISTEN":      "127.0.0.1:" + recv,
		"SVC_OTLP_GRPC_LISTEN":     "127.0.0.1:" + grpc,
		"SVC_HEALTH_LISTEN":        "127.0.0.1:" + health,
		"SVC_EMBEDDED_NATS_LISTEN": "127.0.0.1:" + natsPort,
		"SVC_METRICS_PORT":         metrics,
	})

	ready := m.waitLine(t, "ready:", 4*time.Minute)
	for _, want := range []string{
		"control plane API http://localhost:" + cp + " ",
		"ingest (OTLP/HTTP, events) http://127.0.0.1:" + recv + " ",
		"OTLP/gRPC 127.0.0.1:" + grpc + " ",
		"NATS nats://127.0.0.1:" + natsPort + " ",
		"health http://127.0.0.1:" + health + " ",
		"metrics http://localhost:" + metrics + "/metrics",
	} {
		assert.Contains(t, ready, want)
	}
	// The line was true: both answer where it says.
	for _, u := range []string{"http://127.0.0.1:" + health + "/", "http://127.0.0.1:" + cp + "/readyz"} {
		resp, err := http.Get(u)
		if assert.NoError(t, err, u) {
			resp.Body.Close()
			assert.Equal(t, http.StatusOK, resp.StatusCode, u)
		}
	}
	// The receiver answers the dashboard where the control plane serves it, not at 8080.
	req, err := http.NewRequest(http.MethodOptions, "http://127.0.0.1:"+recv+"/console/v1/projects/p/events", nil)
	require.NoError(t, err)
	req.Header.Set("Origin", "http://localhost:"+cp)
	req.Header.Set("Access-Control-Request-Method", "GET")
	if resp, err := http.DefaultClient.Do(req); assert.NoError(t, err) {
		resp.Body.Close()
		assert.Equal(t, "http://localhost:"+cp, resp.Header.Get("Access-Control-Allow-Origin"), "the dashboard's origin follows SVC_CONTROLPLANE_LISTEN")
	}
	// The state is under SVC_DATA_DIR: JetStream's store and the control plane's SQLite.
	assert.DirExists(t, filepath.Join(dataDir, "nats", "jetstream"))
	assert.FileExists(t, filepath.Join(dataDir, "controlplane.db"))
	if !repoDataBefore {
		assert.NoDirExists(t, repoData, "make run must not create ./data when SVC_DATA_DIR is set")
	}

	// Ctrl-C (SIGINT to the process group, as a terminal sends it) stops both processes.
	m.interrupt(t, 30*time.Second)
	for _, addr := range []string{"127.0.0.1:" + health, "127.0.0.1:" + cp, "127.0.0.1:" + natsPort} {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			t.Errorf("%s still answers after Ctrl-C", addr)
		}
	}
}

// Something else answering at the health check address made the readiness loop print a
// false "ready": make run now stops before starting anything, naming the address and
// the setting that moves it. NATS_URL with SVC_EMBEDDED_NATS_LISTEN contradict each
// other (the first turns the second off) and are refused before a build.
func TestMakeRunRefusesBusyAddressAndContradictoryNATS(t *testing.T) {
	needMakeRunTools(t)
	t.Run("health address taken", func(t *testing.T) {
		other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
		defer other.Close()
		addr := strings.TrimPrefix(other.URL, "http://")
		m := startMakeRun(t, map[string]string{
			"SVC_DATA_DIR":            t.TempDir(),
			"SVC_HEALTH_LISTEN":       addr,
			"SVC_CONTROLPLANE_LISTEN": "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t)),
		})
		err := m.wait(4 * time.Minute)
		out := m.output()
		require.Error(t, err, out)
		assert.Contains(t, out, "something already answers at "+addr)
		assert.Contains(t, out, "SVC_HEALTH_LISTEN")
		assert.NotContains(t, out, "ready:")
	})
	t.Run("NATS_URL and SVC_EMBEDDED_NATS_LISTEN", func(t *testing.T) {
		m := startMakeRun(t, map[string]string{
			"SVC_DATA_DIR":             t.TempDir(),
			"NATS_URL":                 "nats://user:secret@127.0.0.1:1",
			"SVC_EMBEDDED_NATS_LISTEN": "127.0.0.1:1",
		})
		err := m.wait(30 * time.Second)
		out := m.output()
		require.Error(t, err, out)
		assert.Contains(t, out, "NATS_URL and SVC_EMBEDDED_NATS_LISTEN are both set")
		assert.NotContains(t, out, "secret")
		assert.NotContains(t, out, "go build", "refused before building")
	})
}

func needMakeRunTools(t *testing.T) {
	for _, tool := range []string{"make", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is needed for the make run test (CI is set: not skipped)", tool)
			}
			t.Skipf("%s is not installed", tool)
		}
	}
}

type makeRun struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	out    bytes.Buffer
	lines  chan string
	exited chan struct{}
	err    error
}

// startMakeRun runs `make run` in the repository with env on top of the test's
// environment, less every setting make run reads (so the machine's own do not leak in).
// The binaries go to a directory kept between runs, where go build leaves them alone
// when they are up to date; DASHBOARD=no skips the npm build of the dashboard.
func startMakeRun(t *testing.T, env map[string]string) *makeRun {
	t.Helper()
	bin := filepath.Join(os.TempDir(), "otelcol-svc-makerun-bin")
	cmd := exec.Command("make", "--no-print-directory", "run", "DASHBOARD=no", "BIN="+bin)
	cmd.Dir = testenv.RepoRoot()
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "SVC_") || k == "NATS_URL" || k == "DATA_DIR" || k == "BIN" ||
			k == "MAKEFLAGS" || k == "MFLAGS" || k == "MAKELEVEL" || k == "DATABASE_URL" || k == "REDIS_URL" {
			continue
		}
		cmd.Env = append(cmd.Env, kv)
	}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	// Its own process group, so that Ctrl-C can be sent to make and its children alike.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	m := &makeRun{cmd: cmd, lines: make(chan string, 1024), exited: make(chan struct{})}
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = &lockedBuffer{mu: &m.mu, b: &m.out}
	require.NoError(t, cmd.Start())
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			m.mu.Lock()
			m.out.WriteString(sc.Text() + "\n")
			m.mu.Unlock()
			select {
			case m.lines <- sc.Text():
			default:
			}
		}
		m.err = cmd.Wait()
		close(m.exited)
	}()
	t.Cleanup(func() {
		// Whatever the test did, nothing of make run outlives it.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-m.exited
		if t.Failed() {
			t.Logf("make run output:\n%s", m.output())
		}
	})
	return m
}

// waitLine returns the first stdout line starting with prefix.
func (m *makeRun) waitLine(t *testing.T, prefix string, within time.Duration) string {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case l := <-m.lines:
			if strings.HasPrefix(l, prefix) {
				return l
			}
		case <-m.exited:
			// Lines read before the exit may still be queued.
			for {
				select {
				case l := <-m.lines:
					if strings.HasPrefix(l, prefix) {
						return l
					}
				default:
					t.Fatalf("make run exited (%v) before a %q line", m.err, prefix)
				}
			}
		case <-deadline:
			t.Fatalf("no %q line from make run within %s", prefix, within)
		}
	}
}

// interrupt sends SIGINT to make's process group and waits for make to exit.
func (m *makeRun) interrupt(t *testing.T, within time.Duration) {
	t.Helper()
	require.NoError(t, syscall.Kill(-m.cmd.Process.Pid, syscall.SIGINT))
	select {
	case <-m.exited:
	case <-time.After(within):
		t.Fatalf("make run still running %s after SIGINT", within)
	}
}

func (m *makeRun) wait(within time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	select {
	case <-m.exited:
		return m.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (m *makeRun) output() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.out.String()
}

type lockedBuffer struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w *lockedBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}
