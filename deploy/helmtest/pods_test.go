package helmtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// The binaries the images run as their entrypoint, by container name.
var entrypoints = map[string]string{
	"receiver": "otelcol-svc", "pipeline": "otelcol-svc", "sink": "otelcol-svc", "controlplane": "controlplane",
}

// What the chart renders runs: each Deployment's container is started as a process the
// way its pod would start it (the image's binary, the rendered args and environment,
// Secret values resolved, ConfigMaps written where they are mounted), against a real
// nats-server, and must answer its readiness and liveness probes with 200, serve the
// ports its Services target, and exit within its terminationGracePeriodSeconds of
// SIGTERM. A wrong env var name, config path, probe path or port fails here although
// the manifests are valid. The pods' ports are the host's here, so the roles run one
// at a time.
func TestRenderedPodsStartAndAnswerTheirProbes(t *testing.T) {
	helm(t)
	goBin, err := exec.LookPath("go")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("go not on PATH")
		}
		t.Skip("go not on PATH: cannot build the binaries")
	}
	bin := t.TempDir()
	for out, pkg := range map[string]string{
		"otelcol-svc": "./cmd/otelcol-svc", "controlplane": "./controlplane",
		// nats-server at the version of the collector's go.mod, as the cluster tests use.
		"nats-server": "github.com/nats-io/nats-server/v2",
	} {
		cmd := exec.Command(goBin, "build", "-o", filepath.Join(bin, out), pkg)
		cmd.Dir = "../.."
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, b)
		}
	}

	natsPort := freePort(t)
	nats := exec.Command(filepath.Join(bin, "nats-server"), "-js", "-a", "127.0.0.1", "-p", fmt.Sprint(natsPort), "-sd", t.TempDir())
	if err := nats.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nats.Process.Kill(); _ = nats.Wait() })
	waitFor(t, 10*time.Second, "nats-server to listen", func() bool { return dials(fmt.Sprintf("127.0.0.1:%d", natsPort)) })

	// One NATS server: streams and mirror buckets of one replica. The data dir is the
	// pods' emptyDir, here a directory of the test's.
	common := []string{
		"--set", fmt.Sprintf("nats.url=nats://127.0.0.1:%d", natsPort),
		"--set", "streams.replicas=1", "--set", "nats.mirrorReplicas=1",
	}
	for _, variant := range []struct {
		name string
		set  func(t *testing.T) []string
	}{
		// The defaults: the control plane on SQLite in its data dir, windows in memory.
		{"defaults", func(*testing.T) []string { return nil }},
		// PostgreSQL and Redis, and the JWT secret and ingest token, through the chart's
		// Secret: every key it holds is read by the process it is meant for.
		{"postgresql-redis", func(t *testing.T) []string {
			return []string{
				"--set", "postgresql.url=" + postgresDatabase(t),
				"--set", "redis.url=redis://127.0.0.1:6379/0",
				"--set", "controlplane.jwtSecret=" + strings.Repeat("j", 40),
				"--set", "receiver.ingestToken=" + strings.Repeat("i", 20),
			}
		}},
	} {
		t.Run(variant.name, func(t *testing.T) {
			args := append(append(slices.Clone(common), "--set", "dataDir="+t.TempDir()), variant.set(t)...)
			r := decodeAll(t, template(t, args...))
			// The control plane first: it publishes the configuration mirror the others read.
			for _, role := range []string{"controlplane", "receiver", "pipeline", "sink"} {
				t.Run(role, func(t *testing.T) {
					d := r.deployments[release+"-"+role]
					if d == nil {
						t.Fatalf("no Deployment for %s", role)
					}
					runPod(t, r, d, bin)
				})
			}
		})
	}
}

// postgresDatabase creates a database of its own on the machine's PostgreSQL (as the
// collector's tests do, POSTGRES_URL or the local superuser) with psql, and returns its
// URL. Without PostgreSQL or psql the test skips, except under CI=true.
func postgresDatabase(t *testing.T) string {
	t.Helper()
	admin := os.Getenv("POSTGRES_URL")
	if admin == "" {
		admin = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
	}
	psql, err := exec.LookPath("psql")
	if err != nil || !dials("127.0.0.1:6379") {
		if os.Getenv("CI") == "true" {
			t.Fatalf("psql (%v) and Redis at 127.0.0.1:6379 are needed (.ci/run installs and starts them)", err)
		}
		t.Skip("needs psql and Redis at 127.0.0.1:6379")
	}
	name := fmt.Sprintf("svc_helmtest_%d", time.Now().UnixNano())
	if b, err := exec.Command(psql, admin, "-v", "ON_ERROR_STOP=1", "-c", "CREATE DATABASE "+name).CombinedOutput(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("creating a database: %v\n%s", err, b)
		}
		t.Skipf("no PostgreSQL to create a database in: %v\n%s", err, b)
	}
	t.Cleanup(func() {
		_ = exec.Command(psql, admin, "-c", "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)").Run()
	})
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}

func runPod(t *testing.T, r *rendered, d *appsv1.Deployment, bin string) {
	spec := d.Spec.Template.Spec
	c := spec.Containers[0]
	root := t.TempDir() // stands for the container's file system, for mounted files

	// ConfigMaps are written where they are mounted; paths in args follow them.
	args := append([]string{}, c.Args...)
	for _, m := range c.VolumeMounts {
		var vol *corev1.Volume
		for i := range spec.Volumes {
			if spec.Volumes[i].Name == m.Name {
				vol = &spec.Volumes[i]
			}
		}
		if vol == nil || vol.ConfigMap == nil {
			continue
		}
		cm := r.configMaps[vol.ConfigMap.Name]
		if cm == nil {
			t.Fatalf("volume %s mounts ConfigMap %s, which is not rendered", m.Name, vol.ConfigMap.Name)
		}
		dir := filepath.Join(root, m.MountPath)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, data := range cm.Data {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		for i, a := range args {
			if strings.HasPrefix(a, m.MountPath+"/") {
				args[i] = filepath.Join(dir, strings.TrimPrefix(a, m.MountPath+"/"))
			}
		}
	}
	for _, a := range args {
		if strings.HasPrefix(a, "/") {
			if _, err := os.Stat(a); err != nil {
				t.Fatalf("argument %s names a file the pod does not have: %v", a, err)
			}
		}
	}

	// The environment is what the pod is given, no more: values and Secret keys.
	procEnv := []string{"HOME=" + root}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			procEnv = append(procEnv, e.Name+"="+e.Value)
		case e.ValueFrom.SecretKeyRef != nil:
			s := r.secrets[e.ValueFrom.SecretKeyRef.Name]
			if s == nil {
				t.Fatalf("%s reads Secret %s, which is not rendered", e.Name, e.ValueFrom.SecretKeyRef.Name)
			}
			v, ok := s.Data[e.ValueFrom.SecretKeyRef.Key]
			if !ok {
				t.Fatalf("%s reads key %s, which Secret %s does not hold", e.Name, e.ValueFrom.SecretKeyRef.Key, s.Name)
			}
			procEnv = append(procEnv, e.Name+"="+string(v))
		default:
			t.Fatalf("%s: a valueFrom this test cannot resolve: %+v", e.Name, e.ValueFrom)
		}
	}

	for _, p := range c.Ports {
		if !waitFree(fmt.Sprintf("127.0.0.1:%d", p.ContainerPort), 10*time.Second) {
			t.Fatalf("port %d (%s) is taken by another process on this machine", p.ContainerPort, p.Name)
		}
	}
	exe := filepath.Join(bin, entrypoints[c.Name])
	if len(c.Command) > 0 {
		t.Fatalf("the chart overrides the image's entrypoint with %v by default", c.Command)
	}
	logs, err := os.Create(filepath.Join(root, "log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, args...)
	cmd.Env, cmd.Stdout, cmd.Stderr = procEnv, logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			b, _ := os.ReadFile(logs.Name())
			t.Logf("%s's output:\n%s", c.Name, tail(string(b), 40))
		}
	})

	probe := func(p *corev1.Probe) int {
		port := containerPort(c, p.HTTPGet.Port.String())
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(p.TimeoutSeconds)*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d%s", port, p.HTTPGet.Path), nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	start := time.Now()
	waitFor(t, 60*time.Second, c.Name+"'s readiness probe to answer 200", func() bool {
		select {
		case err := <-exited:
			stopped = true
			t.Fatalf("%s exited before it was ready: %v", c.Name, err)
		default:
		}
		return probe(c.ReadinessProbe) == http.StatusOK
	})
	t.Logf("%s ready in %v", c.Name, time.Since(start).Round(10*time.Millisecond))
	if code := probe(c.LivenessProbe); code != http.StatusOK {
		t.Errorf("liveness probe answered %d, want 200", code)
	}
	// The control plane runs on the database the values give: PostgreSQL when the chart
	// hands it DATABASE_URL, else SQLite in the data dir.
	if c.Name == "controlplane" {
		want := "sqlite"
		if env(c, "DATABASE_URL") != nil {
			want = "postgresql"
		}
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", containerPort(c, "http")))
		if err != nil {
			t.Fatal(err)
		}
		var health struct{ Database string }
		err = json.NewDecoder(resp.Body).Decode(&health)
		resp.Body.Close()
		if err != nil || health.Database != want {
			t.Errorf("control plane database %q (%v), want %s", health.Database, err, want)
		}
	}
	// The receiver's OTLP/HTTP port is the ingest receiver, behind its authentication: a
	// request without a key is refused 401 once the configuration mirror has loaded (503
	// before).
	if c.Name == "receiver" {
		addr := fmt.Sprintf("http://127.0.0.1:%d/v1/logs", containerPort(c, "otlp-http"))
		waitFor(t, 10*time.Second, "the receiver to refuse a request without a key", func() bool {
			resp, err := http.Post(addr, "application/json", strings.NewReader(`{"resourceLogs":[]}`))
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusUnauthorized
		})
	}
	// What the role's Service targets is served.
	for _, s := range r.services {
		if s.Spec.Selector["app.kubernetes.io/component"] != c.Name {
			continue
		}
		for _, sp := range s.Spec.Ports {
			if addr := fmt.Sprintf("127.0.0.1:%d", containerPort(c, sp.TargetPort.String())); !dials(addr) {
				t.Errorf("Service %s port %s: nothing listens at %s", s.Name, sp.Name, addr)
			}
		}
	}

	grace := time.Duration(*spec.TerminationGracePeriodSeconds) * time.Second
	_ = cmd.Process.Signal(syscall.SIGTERM)
	sent := time.Now()
	select {
	case err := <-exited:
		stopped = true
		t.Logf("%s exited %v after SIGTERM (grace %v): %v", c.Name, time.Since(sent).Round(10*time.Millisecond), grace, err)
		if err != nil {
			t.Errorf("%s exited with %v after SIGTERM, want 0", c.Name, err)
		}
	case <-time.After(grace):
		t.Errorf("%s still running %v after SIGTERM: Kubernetes would kill it", c.Name, grace)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func dials(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// waitFree waits until nothing listens at addr (a role run before may still be closing).
func waitFree(addr string, within time.Duration) bool {
	deadline := time.Now().Add(within)
	for {
		l, err := net.Listen("tcp", addr)
		if err == nil {
			l.Close()
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func waitFor(t *testing.T, within time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", within, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
