// Package testenv runs the real things tests depend on: an in-process nats-server with
// JetStream, and the otelcol-svc binary built from this module, started with a shipped
// config the way an operator would. It is imported by tests and by the load generator
// under bench/, which is why its functions take the small interface T instead of
// testing.TB (a program cannot implement testing.TB: it has an unexported method).
package testenv

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	_ "github.com/jackc/pgx/v5/stdlib" // registers "pgx"
)

// T is the part of testing.TB that testenv uses. *testing.T, *testing.B and testing.TB
// satisfy it; a program implements it to drive the same environment (see bench/).
type T interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Logf(format string, args ...any)
	TempDir() string
	Cleanup(func())
	Failed() bool
}

// FreePort returns a TCP port that was free a moment ago.
func FreePort(t T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// NATS is an in-process nats-server with JetStream on disk.
type NATS struct {
	Server   *server.Server
	Port     int
	StoreDir string
	// Tweak, when set, changes the server's options at every start (e.g. a small
	// JetStream store).
	Tweak func(*server.Options)
}

// StartNATS starts a server on a free port; it stops with the test.
func StartNATS(t T) *NATS { return StartNATSWith(t, nil) }

// StartNATSWith is StartNATS with tweak applied to the server's options.
func StartNATSWith(t T, tweak func(*server.Options)) *NATS {
	t.Helper()
	n := &NATS{Port: FreePort(t), StoreDir: t.TempDir(), Tweak: tweak}
	n.Start(t)
	t.Cleanup(n.Stop)
	return n
}

// Start (re)starts the server on the same port and store, as after an outage.
func (n *NATS) Start(t T) {
	t.Helper()
	opts := &server.Options{
		Host: "127.0.0.1", Port: n.Port, JetStream: true, StoreDir: n.StoreDir,
		NoLog: true, NoSigs: true,
	}
	if n.Tweak != nil {
		n.Tweak(opts)
	}
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server did not start")
	}
	n.Server = s
}

// Stop shuts the server down.
func (n *NATS) Stop() {
	if n.Server != nil {
		n.Server.Shutdown()
		n.Server.WaitForShutdown()
		n.Server = nil
	}
}

// URL is the client URL.
func (n *NATS) URL() string { return "nats://127.0.0.1:" + strconv.Itoa(n.Port) }

// Connect returns a client connection closed with the test.
func Connect(t T, url string) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(url, nats.Timeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

// RepoRoot is the module root, found from this file's location.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

var (
	buildOnce sync.Once
	buildBin  string
	buildErr  error
)

// Binary builds cmd/otelcol-svc once per test process and returns its path.
func Binary(t T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "otelcol-svc-bin")
		if err != nil {
			buildErr = err
			return
		}
		buildBin = filepath.Join(dir, "otelcol-svc")
		cmd := exec.Command("go", "build", "-o", buildBin, "./cmd/otelcol-svc")
		cmd.Dir = RepoRoot()
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildBin
}

// Collector is a running otelcol-svc process.
type Collector struct {
	t       T
	p       process
	Config  string
	Env     map[string]string
	HTTP    string // base URL of the ingest receiver
	GRPC    string // host:port of OTLP/gRPC
	Health  string // base URL of the health check
	Metrics string // base URL of the collector's own metrics
	// unhealthyOK: a start is complete once the health check answers at all.
	unhealthyOK bool
}

// CollectorOptions choose the config and extra environment.
type CollectorOptions struct {
	Config string            // path relative to the repo root, e.g. configs/embedded.yaml
	Env    map[string]string // added to the defaults (free ports, a temp data dir)
	// StartsUnhealthy is for a collector started while NATS is down: its health check
	// answers an error (truthfully), so the start waits only for it to answer.
	StartsUnhealthy bool
}

// StartCollector runs the binary and waits until it reports healthy. The process is
// killed at the end of the test; its log is printed if the test failed.
func StartCollector(t T, opts CollectorOptions) *Collector {
	t.Helper()
	c := &Collector{t: t, Config: opts.Config, unhealthyOK: opts.StartsUnhealthy}
	dataDir := t.TempDir()
	t.Cleanup(func() {
		c.Kill()
		if t.Failed() {
			t.Logf("collector log:\n%s", c.Log())
		}
	})
	retryPorts(t, func() error {
		env := map[string]string{
			"SVC_DATA_DIR":             dataDir,
			"SVC_RECEIVER_LISTEN":      "127.0.0.1:" + strconv.Itoa(FreePort(t)),
			"SVC_OTLP_GRPC_LISTEN":     "127.0.0.1:" + strconv.Itoa(FreePort(t)),
			"SVC_HEALTH_LISTEN":        "127.0.0.1:" + strconv.Itoa(FreePort(t)),
			"SVC_METRICS_PORT":         strconv.Itoa(FreePort(t)),
			"SVC_EMBEDDED_NATS_LISTEN": "127.0.0.1:" + strconv.Itoa(FreePort(t)),
			"NATS_URL":                 "",
		}
		for k, v := range opts.Env {
			env[k] = v
		}
		c.Env = env
		c.HTTP = "http://" + env["SVC_RECEIVER_LISTEN"]
		c.GRPC = env["SVC_OTLP_GRPC_LISTEN"]
		c.Health = "http://" + env["SVC_HEALTH_LISTEN"]
		c.Metrics = "http://127.0.0.1:" + env["SVC_METRICS_PORT"] + "/metrics"
		c.p.resetLog()
		return c.start()
	})
	return c
}

// Pid is the process id of the running collector, 0 when it is not running (the load
// generator under bench/ samples its memory and CPU time from /proc).
func (c *Collector) Pid() int { return c.p.pid() }

// EmbeddedNATSURL is the embedded server's client URL (embedded config only).
func (c *Collector) EmbeddedNATSURL() string { return "nats://" + c.Env["SVC_EMBEDDED_NATS_LISTEN"] }

// Start starts (or restarts) the process with the same settings and waits for health.
func (c *Collector) Start() {
	c.t.Helper()
	if err := c.start(); err != nil {
		c.t.Fatal(err)
	}
}

func (c *Collector) start() error {
	if err := c.p.start(Binary(c.t), []string{"--config", filepath.Join(RepoRoot(), c.Config)}, c.Env); err != nil {
		return err
	}
	return c.p.waitReady("collector", 60*time.Second, 50*time.Millisecond, func() bool {
		resp, err := http.Get(c.Health)
		if err != nil {
			return false
		}
		resp.Body.Close()
		// The health check starts before the receivers: an unhealthy collector has
		// started once its ingest port takes connections too.
		return resp.StatusCode == http.StatusOK ||
			c.unhealthyOK && listening(strings.TrimPrefix(c.HTTP, "http://"))
	})
}

// Kill ends the process with SIGKILL, as a crash would.
func (c *Collector) Kill() { c.p.kill() }

// Stop ends the process gracefully.
func (c *Collector) Stop(ctx context.Context) { c.p.stop(ctx) }

// Signal sends sig (SIGTERM: a graceful stop begins) without waiting for the exit.
func (c *Collector) Signal(sig os.Signal) bool { return c.p.signal(sig) }

// Exited is closed when the process has exited.
func (c *Collector) Exited() <-chan struct{} { return c.p.exitedChan() }

// Log returns what the process printed.
func (c *Collector) Log() string { return c.p.Log() }

var (
	buildMu   sync.Mutex
	buildDone = map[string]string{}
)

// BuildPackage builds a main package of this module (e.g. "./controlplane") once per
// test process and returns the binary's path.
func BuildPackage(t T, pkg string) string {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	if bin, ok := buildDone[pkg]; ok {
		return bin
	}
	dir, err := os.MkdirTemp("", "otelcol-svc-bin")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-o", bin, pkg)
	cmd.Dir = RepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	buildDone[pkg] = bin
	return bin
}

// ControlPlane is a running control plane process.
type ControlPlane struct {
	t   T
	bin string
	p   process
	Env map[string]string
	URL string
}

// StartControlPlane runs the control plane binary with env (plus a free port unless env
// sets SVC_CONTROLPLANE_LISTEN) and waits until /healthz answers 200. It is killed at the
// end of the test.
func StartControlPlane(t T, env map[string]string) *ControlPlane {
	t.Helper()
	c := &ControlPlane{t: t, bin: BuildPackage(t, "./controlplane")}
	t.Cleanup(func() {
		c.Kill()
		if t.Failed() {
			t.Logf("control plane log:\n%s", c.Log())
		}
	})
	retryPorts(t, func() error {
		c.Env = map[string]string{}
		for k, v := range env {
			c.Env[k] = v
		}
		if c.Env["SVC_CONTROLPLANE_LISTEN"] == "" {
			c.Env["SVC_CONTROLPLANE_LISTEN"] = "127.0.0.1:" + strconv.Itoa(FreePort(t))
		}
		c.URL = "http://" + c.Env["SVC_CONTROLPLANE_LISTEN"]
		c.p.resetLog()
		return c.start()
	})
	return c
}

// Start (re)starts the process with the same settings.
func (c *ControlPlane) Start() {
	c.t.Helper()
	if err := c.start(); err != nil {
		c.t.Fatal(err)
	}
}

func (c *ControlPlane) start() error {
	if err := c.p.start(c.bin, nil, c.Env); err != nil {
		return err
	}
	return c.p.waitReady("control plane", 30*time.Second, 25*time.Millisecond, func() bool { return answers200(c.URL + "/healthz") })
}

// Kill ends the process with SIGKILL.
func (c *ControlPlane) Kill() { c.p.kill() }

// Log returns what the process printed.
func (c *ControlPlane) Log() string { return c.p.Log() }

// Stop ends the process with SIGTERM, and with SIGKILL if it is still there when ctx ends.
func (c *ControlPlane) Stop(ctx context.Context) { c.p.stop(ctx) }

// Signal sends sig (SIGTERM: a graceful stop begins) without waiting for the exit.
func (c *ControlPlane) Signal(sig os.Signal) bool { return c.p.signal(sig) }

// Exited is closed when the process has exited.
func (c *ControlPlane) Exited() <-chan struct{} { return c.p.exitedChan() }

// PostgresURL creates a fresh database on the machine's PostgreSQL (POSTGRES_URL, default
// postgres://postgres@127.0.0.1:5432/postgres) and drops it after the test.
func PostgresURL(t T) string {
	t.Helper()
	admin := os.Getenv("POSTGRES_URL")
	if admin == "" {
		admin = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
	}
	db, err := sql.Open("pgx", admin)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "svc_test_" + hex.EncodeToString(b[:])
	if _, err := db.Exec("CREATE DATABASE " + name); err != nil {
		t.Fatalf("PostgreSQL must run for this test (.ci/run starts it): %v", err)
	}
	t.Cleanup(func() {
		db, err := sql.Open("pgx", admin)
		if err == nil {
			_, _ = db.Exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)")
			db.Close()
		}
	})
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}

func listening(addr string) bool {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	conn.Close()
	return true
}
