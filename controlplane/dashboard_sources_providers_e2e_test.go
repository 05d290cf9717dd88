package main

import (
	"strconv"
	"testing"
	"time"

	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// TestDashboardSourcesProviders drives controlplane/web/e2e/sources-providers.mjs: push
// sources set up from their sender. A GitHub source's secret is shown once with GitHub's
// settings filled in and is gone after a reload; an Alertmanager source's receiver YAML
// holds its URL and Basic credentials, which the receiver takes (the sample's 2 alerts
// accepted as 2 records) and refuses with another password; Testing the Alertmanager
// sample shows 2 events; a signature over the GitHub sample checks out with the secret and
// not without; rotating shows a new secret once and the old one stops signing; a Stripe
// source is created without its secret (Stripe shows it only once it has the URL), refuses
// Stripe-signed calls until the secret is pasted back, then stores them. Screenshots go to
// controlplane/web/test-output/sources-providers.
func TestDashboardSourcesProviders(t *testing.T) {
	node, chromium, webDir := browserTestNeeds(t)
	n := testenv.StartNATS(t)
	// The project pages read the console (the Deliveries badge) from the control plane's
	// page: the receiver allows that origin.
	cpListen := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	col := testenv.StartCollector(t, testenv.CollectorOptions{Config: "configs/receiver.yaml",
		Env: map[string]string{"NATS_URL": n.URL(), "SVC_STREAM_REPLICAS": "1", "SVC_DASHBOARD_ORIGIN": "http://" + cpListen}})
	cp := testenv.StartControlPlane(t, map[string]string{"NATS_URL": n.URL(), "SVC_JWT_SECRET": testJWTSecret,
		"SVC_DATA_DIR": t.TempDir(), "SVC_PUBLIC_RECEIVER_URL": col.HTTP, "SVC_CONTROLPLANE_LISTEN": cpListen})

	runBrowserScript(t, node, chromium, webDir, "sources-providers", 3*time.Minute, "DASHBOARD_URL="+cp.URL)
}
