package main

import (
	"strconv"
	"testing"
	"time"
)

// TestUsageRefusedInTheBrowser: after the receiver refused events
// for the account's monthly limit, the dashboard's Usage pages say "Refusing since …" in
// red with what to do, the refused count by reason and that a request is refused whole,
// and every other project page, for the owner and for a member, shows a banner linking to
// Usage (controlplane/web/e2e/usage-refused.mjs). Screenshots go to
// controlplane/web/test-output/usage-refused.
func TestUsageRefusedInTheBrowser(t *testing.T) {
	node, chromium, webDir := browserTestNeeds(t)
	rs := startRefusingStack(t)
	runBrowserScript(t, node, chromium, webDir, "usage-refused", 3*time.Minute,
		"DASHBOARD_URL="+rs.cp.URL, "OWNER_EMAIL="+rs.ownerMail, "MEMBER_EMAIL="+rs.memberMail,
		"SHOP_ID="+rs.shop, "BLOG_ID="+rs.blog, "REFUSED="+strconv.Itoa(rs.refusedRecords))
}
