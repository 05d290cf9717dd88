package main

import (
	"testing"
	"time"
)

// TestDashboardSSOInTheBrowser drives single sign-on in headless Chromium
// (controlplane/web/e2e/sso.mjs) against a real control plane and a real OpenID provider
// (the zitadel/oidc example server): "Log in with Example SSO" on the login page, the
// provider's form, the dashboard showing the person; the provider in a project's
// Settings, where the owner names example.com and carol's first SSO login finds her a
// member of the project; a person outside the allowed domains refused on the login page with the
// reason. Screenshots go to controlplane/web/test-output/sso.
func TestDashboardSSOInTheBrowser(t *testing.T) {
	node, chromium, webDir := browserTestNeeds(t)
	s := startSSOStack(t, nil)
	runBrowserScript(t, node, chromium, webDir, "sso", 3*time.Minute, "DASHBOARD_URL="+s.cp.URL)
}
