package main

import (
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// TestDashboardBacklogInTheBrowser drives Process stored records
// (controlplane/web/e2e/backlog.mjs): 25 events stored, the agent URL saved on Pipeline,
// the page's preview says 25 events, 25 matching, 3 calls; the owner confirms and the run
// reads done; a member previews and is offered no send. The agent gets exactly the 3
// calls announced. Screenshots go to controlplane/web/test-output/backlog.
func TestDashboardBacklogInTheBrowser(t *testing.T) {
	node, chromium, webDir := browserTestNeeds(t)
	agent := &backlogAgent{}
	srv := httptest.NewServer(agent)
	t.Cleanup(srv.Close)
	n := testenv.StartNATS(t)
	// The collector's own responder checks pipelines and previews backlogs.
	// The control plane's address is chosen first: the receiver lets its pages read (the
	// navigation's count of failed deliveries).
	cpListen := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	col := testenv.StartCollector(t, testenv.CollectorOptions{Config: "configs/embedded.yaml",
		Env: map[string]string{"NATS_URL": n.URL(), "SVC_STREAM_REPLICAS": "1", "SVC_OUTBOUND_ALLOW": "127.0.0.1/32",
			"SVC_DASHBOARD_ORIGIN": "http://" + cpListen}})
	cp := testenv.StartControlPlane(t, map[string]string{"NATS_URL": n.URL(), "SVC_JWT_SECRET": testJWTSecret,
		"SVC_DATA_DIR": t.TempDir(), "SVC_OUTBOUND_ALLOW": "127.0.0.1/32", "SVC_PUBLIC_RECEIVER_URL": col.HTTP,
		"SVC_CONTROLPLANE_LISTEN": cpListen})

	runBrowserScript(t, node, chromium, webDir, "backlog", 3*time.Minute,
		"DASHBOARD_URL="+cp.URL, "RECEIVER_URL="+col.HTTP, "AGENT_URL="+srv.URL)
	assert.ElementsMatch(t, []int{10, 10, 5}, agent.received(), "the 3 calls announced, nothing before them")
}
