package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// agentServer stands in for a project's agent: it answers 404 (a wrong URL, as a
// misconfigured agent would) until GET /fix, then 200; GET /calls says how many calls it
// took.
type agentServer struct {
	fixed atomic.Bool
	calls atomic.Int64
}

func (a *agentServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/fix":
		a.fixed.Store(true)
		_, _ = io.WriteString(w, "fixed")
		return
	case r.Method == http.MethodGet && r.URL.Path == "/calls":
		_, _ = io.WriteString(w, strconv.FormatInt(a.calls.Load(), 10))
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20))
	a.calls.Add(1)
	w.Header().Set("Content-Type", "application/json")
	if !a.fixed.Load() {
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"error": "no such route: /agent"}`)
		return
	}
	_, _ = io.WriteString(w, `{"ok": true}`)
}

// TestDashboardConsoleInTheBrowser drives the pages that read the data plane from the
// browser with a console token (controlplane/web/e2e/console.mjs): events sent with a
// key show in Recent events within a second (filtered, expanded, paused, and 5,000 rows
// kept virtualised), their fields in Fields, a field becomes valid OTTL in the trigger,
// Try it runs the unsaved pipeline; an agent answering 404 leaves a dead letter in
// Deliveries that the owner replays once the agent is fixed, while a member is offered no
// replay; another user's session gets no console token for the project. The collector
// runs every data-plane role (configs/embedded.yaml) with its console CORS open to this
// control plane's origin only. Screenshots go to controlplane/web/test-output/console.
func TestDashboardConsoleInTheBrowser(t *testing.T) {
	node, chromium, webDir := browserTestNeeds(t)
	agent := &agentServer{}
	srv := httptest.NewServer(agent)
	t.Cleanup(srv.Close)
	n := testenv.StartNATS(t)
	startValidator(t, n.URL())
	// The control plane's address is chosen first: the receiver lets only its pages read.
	cpListen := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	col := testenv.StartCollector(t, testenv.CollectorOptions{Config: "configs/embedded.yaml",
		Env: map[string]string{"NATS_URL": n.URL(), "SVC_STREAM_REPLICAS": "1", "SVC_OUTBOUND_ALLOW": "127.0.0.1/32",
			"SVC_DASHBOARD_ORIGIN": "http://" + cpListen}})
	cp := testenv.StartControlPlane(t, map[string]string{"NATS_URL": n.URL(), "SVC_JWT_SECRET": testJWTSecret,
		"SVC_DATA_DIR": t.TempDir(), "SVC_OUTBOUND_ALLOW": "127.0.0.1/32", "SVC_PUBLIC_RECEIVER_URL": col.HTTP,
		"SVC_CONTROLPLANE_LISTEN": cpListen})

	runBrowserScript(t, node, chromium, webDir, "console", 4*time.Minute,
		"DASHBOARD_URL="+cp.URL, "RECEIVER_URL="+col.HTTP, "AGENT_URL="+srv.URL)
	require.GreaterOrEqual(t, agent.calls.Load(), int64(2), "the agent took the failed call and its replay")
}
