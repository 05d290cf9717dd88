package main

import (
	"strconv"
	"testing"
	"time"

	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// TestDashboardPipelineHistoryInTheBrowser drives the Pipeline page in headless Chromium
// (controlplane/web/e2e/pipeline-history.mjs) against a real control plane and a receiver
// collector, whose pipeline checks read the project's records: a misspelt trigger field
// is warned about in amber at its place and saving still works,
// leaving with unsaved edits asks, Stay keeps them, and History compares a
// version with the current pipeline and restores it as a new version.
// Screenshots go to controlplane/web/test-output/pipeline-history.
func TestDashboardPipelineHistoryInTheBrowser(t *testing.T) {
	node, chromium, webDir := browserTestNeeds(t)
	n := testenv.StartNATS(t)
	// The control plane's address first: the receiver lets its pages read (Fields, the
	// navigation's count of failed deliveries).
	cpListen := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	col := testenv.StartCollector(t, testenv.CollectorOptions{Config: "configs/receiver.yaml",
		Env: map[string]string{"NATS_URL": n.URL(), "SVC_STREAM_REPLICAS": "1", "SVC_DASHBOARD_ORIGIN": "http://" + cpListen}})
	cp := testenv.StartControlPlane(t, map[string]string{"NATS_URL": n.URL(), "SVC_JWT_SECRET": testJWTSecret,
		"SVC_DATA_DIR": t.TempDir(), "SVC_PUBLIC_RECEIVER_URL": col.HTTP, "SVC_CONTROLPLANE_LISTEN": cpListen})
	runBrowserScript(t, node, chromium, webDir, "pipeline-history", 3*time.Minute,
		"DASHBOARD_URL="+cp.URL, "RECEIVER_URL="+col.HTTP)
}
