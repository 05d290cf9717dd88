package main

import (
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// TestDashboardIncidentLiveInTheBrowser drives controlplane/web/e2e/incidents-live.mjs
// against every data-plane role (configs/embedded.yaml): an owner sets incident mode
// in the dashboard, error events of one service open one incident on the Incidents page,
// the pipeline calls the agent once for them, the incident's page shows the call
// delivered and the agent's result once posted, its delivery link opens that call on
// the Deliveries page, and the ledger there counts the incident and its events per call.
// Screenshots go to controlplane/web/test-output/incidents-live.
func TestDashboardIncidentLiveInTheBrowser(t *testing.T) {
	node, chromium, webDir := browserTestNeeds(t)
	agent := &agentServer{}
	agent.fixed.Store(true)
	agentSrv := httptest.NewServer(agent)
	t.Cleanup(agentSrv.Close)
	n := testenv.StartNATS(t)
	startValidator(t, n.URL())
	cpListen := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	col := testenv.StartCollector(t, testenv.CollectorOptions{Config: "configs/embedded.yaml",
		Env: map[string]string{"NATS_URL": n.URL(), "SVC_STREAM_REPLICAS": "1", "SVC_OUTBOUND_ALLOW": "127.0.0.1/32",
			"SVC_DASHBOARD_ORIGIN": "http://" + cpListen}})
	cp := testenv.StartControlPlane(t, map[string]string{"NATS_URL": n.URL(), "SVC_JWT_SECRET": testJWTSecret,
		"SVC_DATA_DIR": t.TempDir(), "SVC_OUTBOUND_ALLOW": "127.0.0.1/32", "SVC_PUBLIC_RECEIVER_URL": col.HTTP,
		"SVC_CONTROLPLANE_LISTEN": cpListen})

	runBrowserScript(t, node, chromium, webDir, "incidents-live", 3*time.Minute,
		"DASHBOARD_URL="+cp.URL, "RECEIVER_URL="+col.HTTP, "AGENT_URL="+agentSrv.URL)
	assert.Equal(t, int64(1), agent.calls.Load(), "one service's events: one opening call; an update waits for group_interval (5m)")
}
