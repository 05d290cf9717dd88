// Package containers tests what ops teams run: the OCI images `make images` builds
// (deploy/docker) and the compose files in deploy/compose, with the machine's Docker.
// Nothing is pulled: the images are built here FROM scratch, NATS from go.mod's
// nats-server, and PostgreSQL and Redis are the machine's own. Without Docker the tests
// skip, unless CI=true.
package containers

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

const maxImageBytes = 60 << 20

// The images under test: what `make images images-nats` (a step of make test, before go
// test) tagged with this tree's `git describe`. images builds those that are missing.
var (
	imageVersion      string
	collectorImage    string
	controlplaneImage string
	natsImage         string

	buildOnce sync.Once
	buildErr  error
	buildLog  string
)

// needDocker skips (fails under CI=true) without a Docker engine and docker-compose.
func needDocker(t *testing.T) {
	t.Helper()
	why := ""
	if out, err := exec.Command("docker", "info", "--format", "{{.ServerVersion}}").CombinedOutput(); err != nil {
		why = "docker info: " + strings.TrimSpace(string(out))
	} else if _, err := exec.LookPath("docker-compose"); err != nil {
		why = "docker-compose is not installed"
	}
	if why == "" {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s (CI=true: not skipped)", why)
	}
	t.Skip(why)
}

// images finds the collector, control plane and NATS images of this tree's version and
// builds, with the script `make images` runs, only those that are missing: make test
// builds them before go test, so that the build counts against no test timeout.
func images(t *testing.T) {
	t.Helper()
	needDocker(t)
	buildOnce.Do(func() {
		cmd := exec.Command("git", "describe", "--tags", "--always", "--dirty")
		cmd.Dir = testenv.RepoRoot()
		out, err := cmd.Output()
		if err != nil {
			buildErr, buildLog = err, "git describe"
			return
		}
		imageVersion = strings.TrimSpace(string(out))
		collectorImage = "otelcol-svc:" + imageVersion
		controlplaneImage = "otelcol-svc-controlplane:" + imageVersion
		natsImage = "otelcol-svc-nats:" + imageVersion
		var missing []string
		for what, image := range map[string]string{"collector": collectorImage, "controlplane": controlplaneImage, "nats": natsImage} {
			if exec.Command("docker", "image", "inspect", image).Run() != nil {
				missing = append(missing, what)
			}
		}
		if len(missing) == 0 {
			return
		}
		t.Logf("building %v: no image tagged %s (make test builds them before go test)", missing, imageVersion)
		began := time.Now()
		cmd = exec.Command(filepath.Join(testenv.RepoRoot(), "deploy/docker/build.sh"), missing...)
		cmd.Dir = testenv.RepoRoot()
		cmd.Env = append(os.Environ(), "VERSION="+imageVersion)
		out, err = cmd.CombinedOutput()
		buildErr, buildLog = err, string(out)
		t.Logf("images built in %s", time.Since(began).Round(time.Second))
	})
	require.NoError(t, buildErr, "deploy/docker/build.sh:\n%s", buildLog)
}

func docker(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("docker", args...).CombinedOutput()
	require.NoError(t, err, "docker %s: %s", strings.Join(args, " "), out)
	return strings.TrimSpace(string(out))
}

// compose is one docker-compose project started from a file in deploy/compose, taken
// down with its volumes when the test ends.
type compose struct {
	t       *testing.T
	project string
	file    string
	env     []string
}

func composeUp(t *testing.T, file string, env map[string]string, services ...string) *compose {
	t.Helper()
	var b [4]byte
	_, _ = rand.Read(b[:])
	c := &compose{t: t, project: "svctest" + hex.EncodeToString(b[:]), file: filepath.Join(testenv.RepoRoot(), "deploy/compose", file)}
	// The machine's settings must not leak into the compose file's variables.
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "SVC_") || strings.HasSuffix(k, "_URL") || strings.HasSuffix(k, "_IMAGE") || strings.HasSuffix(k, "_PORT") || k == "LISTEN_HOST" {
			continue
		}
		c.env = append(c.env, kv)
	}
	c.env = append(c.env, "OTELCOL_SVC_IMAGE="+collectorImage, "CONTROLPLANE_IMAGE="+controlplaneImage)
	for k, v := range env {
		c.env = append(c.env, k+"="+v)
	}
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := c.run("logs", "--no-color", "--tail", "60")
			t.Logf("docker-compose logs:\n%s", out)
		}
		if out, err := c.run("down", "-v", "--timeout", "5"); err != nil {
			t.Errorf("docker-compose down: %v: %s", err, out)
		}
	})
	out, err := c.run(append([]string{"up", "-d", "--no-build"}, services...)...)
	require.NoError(t, err, "docker-compose up: %s", out)
	return c
}

func (c *compose) run(args ...string) (string, error) {
	cmd := exec.Command("docker-compose", append([]string{"-p", c.project, "-f", c.file}, args...)...)
	cmd.Env = c.env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// container is the id of a service's container.
func (c *compose) container(service string) string {
	c.t.Helper()
	out, err := c.run("ps", "-q", service)
	require.NoError(c.t, err, out)
	id := strings.TrimSpace(out)
	require.NotEmpty(c.t, id, "no container for %s", service)
	return id
}

// kill sends SIGKILL to a service's container (a crash, not a stop) and starts it again.
func (c *compose) killAndStart(service string) {
	c.t.Helper()
	id := c.container(service)
	docker(c.t, "kill", id)
	docker(c.t, "start", id)
}

// waitOK waits for every URL to answer 200.
func waitOK(t *testing.T, within time.Duration, urls ...string) {
	t.Helper()
	client := &http.Client{Timeout: 2 * time.Second}
	for _, u := range urls {
		last := ""
		require.Eventually(t, func() bool {
			resp, err := client.Get(u)
			if err != nil {
				last = err.Error()
				return false
			}
			resp.Body.Close()
			last = resp.Status
			return resp.StatusCode == http.StatusOK
		}, within, 100*time.Millisecond, "%s never answered 200 (last: %s)", u, last)
	}
}

func secret() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
