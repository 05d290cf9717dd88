package main

import (
	"testing"
	"time"

	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// TestDashboardSourcesProviders drives controlplane/web/e2e/sources-providers.mjs: push
// sources set up from their sender. A GitHub source's secret is shown once with GitHub's
// settings filled in and is gone after a reload; an Alertmanager source's receiver YAML
// holds its URL and Basic credentials; Testing the Alertmanager sample shows its 2 alerts as
// 2 events; a signature over the GitHub sample checks out with the secret and not without;
// rotating shows a new secret once and the old one stops signing. Only the control plane
// takes part: creating, rotating and testing never reach the data plane. Screenshots go to
// controlplane/web/test-output/sources-providers.
func TestDashboardSourcesProviders(t *testing.T) {
	node, chromium, webDir := browserTestNeeds(t)
	n := testenv.StartNATS(t)
	cp := testenv.StartControlPlane(t, map[string]string{"NATS_URL": n.URL(), "SVC_JWT_SECRET": testJWTSecret,
		"SVC_DATA_DIR": t.TempDir(), "SVC_PUBLIC_RECEIVER_URL": "https://ingest.example.com"})

	runBrowserScript(t, node, chromium, webDir, "sources-providers", 3*time.Minute, "DASHBOARD_URL="+cp.URL)
}
