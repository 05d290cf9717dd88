package main

import (
	"strconv"
	"testing"
	"time"

	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// TestDashboardEmailInTheBrowser drives the email pages in headless Chromium
// (controlplane/web/e2e/email.mjs) against a real control plane sending to mailpit, whose
// API the script reads the links from: the banner and the link confirming an address,
// an invitation pending on Members (one revoked), accepting one into the project, a
// forgotten password reset by link (logging out the other browser), and a password
// change. Screenshots go to controlplane/web/test-output/email.
func TestDashboardEmailInTheBrowser(t *testing.T) {
	node, chromium, webDir := browserTestNeeds(t)
	mp := testenv.StartMailpit(t, testenv.MailpitOptions{})
	n := testenv.StartNATS(t)
	startValidator(t, n.URL())
	listen := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	cp := testenv.StartControlPlane(t, map[string]string{"NATS_URL": n.URL(), "SVC_JWT_SECRET": testJWTSecret,
		"SVC_DATA_DIR": t.TempDir(), "SVC_CONTROLPLANE_LISTEN": listen, "SVC_PUBLIC_URL": "http://" + listen,
		"SVC_SMTP_URL": mp.SMTPURL(), "SVC_SMTP_FROM": "otelcol-svc <noreply@example.com>"})
	runBrowserScript(t, node, chromium, webDir, "email", 3*time.Minute, "DASHBOARD_URL="+cp.URL, "MAILPIT_URL="+mp.API)
}
