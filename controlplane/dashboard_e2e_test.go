package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/controlplane/web"
	"github.com/otelcol-svc/otelcol-svc/internal/webhooksig"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// browserTestNeeds skips a browser test on a machine without what it needs (Node, the
// npm packages, Chromium, the built dashboard), and fails it in CI, where .ci/run
// installs them all.
func browserTestNeeds(t *testing.T) (node, chromium, webDir string) {
	t.Helper()
	webDir = filepath.Join(testenv.RepoRoot(), "controlplane", "web")
	chromium = os.Getenv("CHROMIUM")
	if chromium == "" {
		chromium = "/usr/bin/chromium"
	}
	var missing []string
	node, err := exec.LookPath("node")
	if err != nil {
		missing = append(missing, "node (apt-get install nodejs npm)")
	}
	if _, err := os.Stat(chromium); err != nil {
		missing = append(missing, chromium+" (apt-get install chromium)")
	}
	if _, err := os.Stat(filepath.Join(webDir, "node_modules", "playwright-core")); err != nil {
		missing = append(missing, "controlplane/web/node_modules (cd controlplane/web && npm ci)")
	}
	if !web.Built() {
		missing = append(missing, "the built dashboard (make web)")
	}
	if len(missing) > 0 {
		if os.Getenv("CI") != "" {
			t.Fatalf("the browser tests need: %v", missing)
		}
		t.Skipf("skipping the browser test; missing: %v", missing)
	}
	return node, chromium, webDir
}

// runBrowserScript runs controlplane/web/e2e/<name>.mjs in Chromium against what the test
// started (env: its URLs), with its screenshots in controlplane/web/test-output/<name>,
// emptied first so that a run never shows an older run's pages. The script's assertions
// are the test's: its failure fails the test, with its output.
func runBrowserScript(t *testing.T, node, chromium, webDir, name string, timeout time.Duration, env ...string) {
	t.Helper()
	shots := filepath.Join(webDir, "test-output", name)
	require.NoError(t, os.RemoveAll(shots))
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join("e2e", name+".mjs"))
	cmd.Dir = webDir
	cmd.Env = append(append(os.Environ(), env...), "SCREENSHOT_DIR="+shots, "CHROMIUM="+chromium)
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	require.NoError(t, err, "the browser test failed (screenshots so far in %s)", shots)
}

// TestDashboardInTheBrowser drives the dashboard in headless Chromium against a real
// control plane and receiver (controlplane/web/e2e/dashboard.mjs): sign up, the errors
// in words, a project and a key shown once (and it sends an event), revoke, usage with
// its 80% and 100% banners, another tenant sees not found, members (invite, what a
// member sees and cannot change, change role, remove), rename, delete with the name
// typed, log out. Screenshots go to
// controlplane/web/test-output/dashboard.
func TestDashboardInTheBrowser(t *testing.T) {
	node, chromium, webDir := browserTestNeeds(t)
	// A small monthly limit, so that the usage page's 80% and 100% banners show after a
	// few events.
	const freeTier = "10"
	n := testenv.StartNATS(t)
	startValidator(t, n.URL())
	// The project pages read the console (the Deliveries badge) from the control plane's
	// page: the receiver allows that origin, as a deployment's SVC_DASHBOARD_ORIGIN does.
	cpListen := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	col := testenv.StartCollector(t, testenv.CollectorOptions{Config: "configs/receiver.yaml",
		Env: map[string]string{"NATS_URL": n.URL(), "SVC_STREAM_REPLICAS": "1", "SVC_FREE_TIER_EVENTS": freeTier,
			"SVC_DASHBOARD_ORIGIN": "http://" + cpListen}})
	cp := testenv.StartControlPlane(t, map[string]string{"NATS_URL": n.URL(), "SVC_JWT_SECRET": testJWTSecret,
		"SVC_DATA_DIR": t.TempDir(), "SVC_PUBLIC_RECEIVER_URL": col.HTTP, "SVC_FREE_TIER_EVENTS": freeTier,
		"SVC_CONTROLPLANE_LISTEN": cpListen})

	runBrowserScript(t, node, chromium, webDir, "dashboard", 3*time.Minute,
		"DASHBOARD_URL="+cp.URL, "RECEIVER_URL="+col.HTTP)
}

// hookServer is the destination of the browser test's test messages: it records what it
// receives and says how many calls it took at GET /received.
type hookServer struct {
	mu    sync.Mutex
	calls []hookCall
}

type hookCall struct {
	path   string
	method string
	header http.Header
	body   []byte
}

func (h *hookServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && r.URL.Path == "/received" {
		h.mu.Lock()
		n := len(h.calls)
		h.mu.Unlock()
		_ = json.NewEncoder(w).Encode(map[string]int{"count": n})
		return
	}
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	h.mu.Lock()
	h.calls = append(h.calls, hookCall{r.URL.Path, r.Method, r.Header.Clone(), body})
	h.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if r.URL.Path == "/down" {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, `{"error": "maintenance"}`)
		return
	}
	_, _ = io.WriteString(w, `{"received": true}`)
}

// TestDashboardPipelineInTheBrowser drives the Pipeline, Destinations and Push sources
// pages (controlplane/web/e2e/pages.mjs): an invalid trigger shows its error at its
// position and is fixed, the pipeline is saved, the signing secret revealed and rotated;
// a webhook destination gets a test message that this test's server receives, signed
// with that secret; a push source is created, tested and deleted; a member sees it all
// read-only. Screenshots go to controlplane/web/test-output/pages.
func TestDashboardPipelineInTheBrowser(t *testing.T) {
	node, chromium, webDir := browserTestNeeds(t)
	hook := &hookServer{}
	srv := httptest.NewServer(hook)
	t.Cleanup(srv.Close)
	n := testenv.StartNATS(t)
	startValidator(t, n.URL())
	// The test's destinations listen on loopback, which only an allow list lets the
	// control plane reach.
	cp := testenv.StartControlPlane(t, map[string]string{"NATS_URL": n.URL(), "SVC_JWT_SECRET": testJWTSecret,
		"SVC_DATA_DIR": t.TempDir(), "SVC_OUTBOUND_ALLOW": "127.0.0.1/32", "SVC_PUBLIC_RECEIVER_URL": "http://127.0.0.1:4318"})

	secretFile := filepath.Join(t.TempDir(), "secret")
	runBrowserScript(t, node, chromium, webDir, "pages", 3*time.Minute,
		"DASHBOARD_URL="+cp.URL, "HOOK_URL="+srv.URL, "SECRET_FILE="+secretFile)

	secret, err := os.ReadFile(secretFile)
	require.NoError(t, err)
	hook.mu.Lock()
	defer hook.mu.Unlock()
	require.Len(t, hook.calls, 3, "one test message to the webhook, one to the chat, one to the one that is down")
	wh := hook.calls[0]
	assert.Equal(t, "/hook", wh.path)
	assert.Equal(t, "payments", wh.header.Get("X-Team"))
	require.NoError(t, webhooksig.Verify(string(secret), wh.header, wh.body, time.Now(), webhooksig.DefaultTolerance),
		"the test message is signed with the project's (rotated) secret")
	var body map[string]any
	require.NoError(t, json.Unmarshal(wh.body, &body))
	assert.Equal(t, true, body["test"])
	assert.Equal(t, "Test message from otelcol-svc", body["text"])
	chat := hook.calls[2]
	assert.Equal(t, "/slack", chat.path)
	assert.JSONEq(t, `{"text": ":rotating_light: Test message from otelcol-svc"}`, string(chat.body))
}
