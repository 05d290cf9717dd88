package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// busyHook stands in for a webhook destination that is down for maintenance: every call
// is answered 503 with Retry-After: 120, so its deliveries wait two minutes for their
// next try. It keeps the Authorization headers it was sent.
type busyHook struct {
	mu    sync.Mutex
	auths []string
}

func (h *busyHook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20))
	h.mu.Lock()
	h.auths = append(h.auths, r.Header.Get("Authorization"))
	h.mu.Unlock()
	w.Header().Set("Retry-After", "120")
	w.WriteHeader(http.StatusServiceUnavailable)
}

// TestDashboardDeliveriesLayoutInTheBrowser drives controlplane/web/e2e/deliveries-layout.mjs:
// the Deliveries page, with replay badges and a webhook delivery
// waiting for its retry, has no horizontal scroll at 1280 and 1024 px and every Details
// button inside the table; times show seconds and the time zone; the waiting delivery
// shows "Next retry at" and each attempt's request headers with the destination's
// credential [redacted]; ?delivery=<id> opens that delivery, also after logging in; and
// Recent events opened at http://localhost:<port>, an origin the receiver does not allow
// (it allows http://127.0.0.1:<port>), says so and shows "Not live". Screenshots go to
// controlplane/web/test-output/deliveries-layout.
func TestDashboardDeliveriesLayoutInTheBrowser(t *testing.T) {
	node, chromium, webDir := browserTestNeeds(t)
	agent := &agentServer{}
	agentSrv := httptest.NewServer(agent)
	t.Cleanup(agentSrv.Close)
	hook := &busyHook{}
	hookSrv := httptest.NewServer(hook)
	t.Cleanup(hookSrv.Close)
	n := testenv.StartNATS(t)
	startValidator(t, n.URL())
	port := strconv.Itoa(testenv.FreePort(t))
	cpListen := "127.0.0.1:" + port
	col := testenv.StartCollector(t, testenv.CollectorOptions{Config: "configs/embedded.yaml",
		Env: map[string]string{"NATS_URL": n.URL(), "SVC_STREAM_REPLICAS": "1", "SVC_OUTBOUND_ALLOW": "127.0.0.1/32",
			"SVC_DASHBOARD_ORIGIN": "http://" + cpListen}})
	cp := testenv.StartControlPlane(t, map[string]string{"NATS_URL": n.URL(), "SVC_JWT_SECRET": testJWTSecret,
		"SVC_DATA_DIR": t.TempDir(), "SVC_OUTBOUND_ALLOW": "127.0.0.1/32", "SVC_PUBLIC_RECEIVER_URL": col.HTTP,
		"SVC_CONTROLPLANE_LISTEN": cpListen})

	runBrowserScript(t, node, chromium, webDir, "deliveries-layout", 4*time.Minute,
		"DASHBOARD_URL="+cp.URL, "OTHER_URL=http://localhost:"+port, "RECEIVER_URL="+col.HTTP,
		"AGENT_URL="+agentSrv.URL, "HOOK_URL="+hookSrv.URL)

	hook.mu.Lock()
	defer hook.mu.Unlock()
	require.NotEmpty(t, hook.auths, "the webhook was called")
	for _, a := range hook.auths {
		if strings.HasPrefix(a, "Bearer ") {
			assert.Equal(t, "Bearer hook-secret-77", a, "the webhook gets its credential whole: only the log redacts it")
		}
	}
}
