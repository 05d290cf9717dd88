package main

import (
	"strconv"
	"testing"
	"time"

	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// TestScopedKeysAndLogOutEverywhereInTheBrowser drives controlplane/web/e2e/access-scopes.mjs:
// the key form's scopes (read unchecked), a key without read refused console reads, one-click
// narrowing, a read-only personal access token, and "Log out everywhere". Screenshots go to
// controlplane/web/test-output/access-scopes.
func TestScopedKeysAndLogOutEverywhereInTheBrowser(t *testing.T) {
	node, chromium, webDir := browserTestNeeds(t)
	n := testenv.StartNATS(t)
	startValidator(t, n.URL())
	cpListen := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	col := testenv.StartCollector(t, testenv.CollectorOptions{Config: "configs/receiver.yaml",
		Env: map[string]string{"NATS_URL": n.URL(), "SVC_STREAM_REPLICAS": "1", "SVC_DASHBOARD_ORIGIN": "http://" + cpListen}})
	cp := testenv.StartControlPlane(t, map[string]string{"NATS_URL": n.URL(), "SVC_JWT_SECRET": testJWTSecret,
		"SVC_DATA_DIR": t.TempDir(), "SVC_PUBLIC_RECEIVER_URL": col.HTTP, "SVC_CONTROLPLANE_LISTEN": cpListen})

	runBrowserScript(t, node, chromium, webDir, "access-scopes", 3*time.Minute,
		"DASHBOARD_URL="+cp.URL, "RECEIVER_URL="+col.HTTP)
}
