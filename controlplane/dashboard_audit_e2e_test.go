package main

import (
	"testing"
	"time"
)

// TestDashboardAuditLogInTheBrowser drives the Audit log page in headless Chromium
// (controlplane/web/e2e/audit.mjs) against a real control plane: the owner's and an
// admin's changes show with who, which credential, from where and when, the pipeline's
// and a destination's fields before and after with no secret on the page, the Action
// filter narrows the list, and a member is neither offered the page nor shown the log.
// Screenshots go to controlplane/web/test-output/audit.
func TestDashboardAuditLogInTheBrowser(t *testing.T) {
	node, chromium, webDir := browserTestNeeds(t)
	s := startStack(t, map[string]string{"SVC_DATA_DIR": t.TempDir()})
	runBrowserScript(t, node, chromium, webDir, "audit", 3*time.Minute, "DASHBOARD_URL="+s.cp.URL)
}
