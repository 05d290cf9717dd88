package main

import (
	"testing"
	"time"

	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// TestDashboardOAuthInTheBrowser drives an MCP client's OAuth sign-in through the
// dashboard in headless Chromium (controlplane/web/e2e/oauth.mjs, which also plays the
// client and runs its callback on 127.0.0.1): dynamic registration, the authorize URL with
// a PKCE S256 challenge, log in on the way back to the consent page, Allow, the code
// exchanged for a token that lists the tools at /mcp; the Access page lists the app and
// revokes it, after which the token gets 401 within a second; a personal access token
// created there is shown once with its MCP client configuration, listed by prefix, works
// and is revoked; "Not you? Log out" returns to the same request after logging in; Deny
// sends error=access_denied back; a used or unknown request says so with nothing to
// click; the log-in page never returns to another origin. Screenshots go to
// controlplane/web/test-output/oauth.
func TestDashboardOAuthInTheBrowser(t *testing.T) {
	node, chromium, webDir := browserTestNeeds(t)
	n := testenv.StartNATS(t)
	cp := testenv.StartControlPlane(t, map[string]string{"NATS_URL": n.URL(), "SVC_JWT_SECRET": testJWTSecret,
		"SVC_DATA_DIR": t.TempDir(), "SVC_PUBLIC_RECEIVER_URL": "http://127.0.0.1:4318"})

	runBrowserScript(t, node, chromium, webDir, "oauth", 3*time.Minute, "DASHBOARD_URL="+cp.URL)
}
