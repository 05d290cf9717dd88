package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// ssoStack is a control plane whose single sign-on goes to a real OpenID provider (the
// zitadel/oidc example server) allowing example.com.
type ssoStack struct {
	cp       *testenv.ControlPlane
	provider *testenv.OIDCProvider
}

var ssoUsers = []testenv.OIDCUser{
	{ID: "alice", Username: "alice", Password: "alice-password", Email: "alice@example.com", EmailVerified: true},
	{ID: "bob", Username: "bob", Password: "bob-password", Email: "Bob@Example.com", EmailVerified: true},
	{ID: "carol", Username: "carol", Password: "carol-password", Email: "carol@example.com", EmailVerified: true},
	{ID: "mallory", Username: "mallory", Password: "mallory-password", Email: "mallory@other.org", EmailVerified: true},
	{ID: "una", Username: "una", Password: "una-password", Email: "una@example.com", EmailVerified: false},
	// Another person at the provider given alice's address (a reassigned mailbox).
	{ID: "alice2", Username: "alice2", Password: "alice2-password", Email: "alice@example.com", EmailVerified: true},
}

func startSSOStack(t *testing.T, extra map[string]string) ssoStack {
	t.Helper()
	n := testenv.StartNATS(t)
	listen := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	base := "http://" + listen
	p := testenv.StartOIDCProvider(t, []string{base + "/api/v1/auth/sso/callback"}, ssoUsers)
	env := map[string]string{"NATS_URL": n.URL(), "SVC_JWT_SECRET": testJWTSecret, "SVC_DATA_DIR": t.TempDir(),
		"SVC_CONTROLPLANE_LISTEN": listen, "SVC_PUBLIC_URL": base,
		"SVC_OIDC_ISSUER": p.Issuer, "SVC_OIDC_CLIENT_ID": p.ClientID, "SVC_OIDC_CLIENT_SECRET": p.ClientSecret,
		"SVC_OIDC_ALLOWED_DOMAINS": "example.com", "SVC_OIDC_NAME": "Example SSO",
		// The provider is on loopback, which outbound calls refuse unless allowed.
		"SVC_OUTBOUND_ALLOW": "127.0.0.0/8,::1/128"}
	for k, v := range extra {
		env[k] = v
	}
	return ssoStack{cp: testenv.StartControlPlane(t, env), provider: p}
}

var authRequestID = regexp.MustCompile(`name="id" value="([^"]+)"`)

// ssoLogin logs in through the provider's own login form as a browser would (cookies
// kept, redirects followed) and returns the browser and the page it ends on.
func (s ssoStack) ssoLogin(t *testing.T, username, password string) (*http.Client, *url.URL) {
	t.Helper()
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	c := &http.Client{Jar: jar}
	resp, err := c.Get(s.cp.URL + "/api/v1/auth/sso/start")
	require.NoError(t, err)
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", page)
	require.True(t, strings.HasPrefix(resp.Request.URL.String(), strings.TrimSuffix(s.provider.Issuer, "/")+"/login/username"),
		"the start leads to the provider's login page, got %s", resp.Request.URL)
	m := authRequestID.FindSubmatch(page)
	require.NotNil(t, m, "the provider's login form names its request: %s", page)
	resp, err = c.PostForm(strings.TrimSuffix(s.provider.Issuer, "/")+"/login/username",
		url.Values{"id": {string(m[1])}, "username": {username}, "password": {password}})
	require.NoError(t, err)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return c, resp.Request.URL
}

func sessionOf(t *testing.T, c *http.Client, base string) reply {
	t.Helper()
	return callWith(t, c, base, "GET", "/api/v1/auth/session", "", nil)
}

// TestSSOLogin logs in through a real OpenID provider: a person of an allowed domain
// lands on the dashboard with a session (a new account, verified, with no password that
// logs in); one outside the allowed domains, and one whose address the provider does not
// call verified, land on the login page with the reason and no session; a callback
// arriving in a browser that did not start the login is refused.
func TestSSOLogin(t *testing.T) {
	s := startSSOStack(t, nil)

	info := call(t, s.cp.URL, "GET", "/api/v1/auth/sso", "", nil)
	require.Equal(t, http.StatusOK, info.Status)
	require.Equal(t, true, info.Body["enabled"])
	require.Equal(t, "Example SSO", info.Body["name"])

	c, landed := s.ssoLogin(t, "alice", "alice-password")
	require.Equal(t, "/", landed.Path, "a successful login lands on the dashboard: %s", landed)
	ses := sessionOf(t, c, s.cp.URL)
	require.Equal(t, http.StatusOK, ses.Status, "%s", ses.Raw)
	require.Equal(t, "alice@example.com", ses.Body["user"].(map[string]any)["email"])
	// The account has no password anyone could know.
	r := call(t, s.cp.URL, "POST", "/api/v1/auth/login", "", map[string]string{"email": "alice@example.com", "password": "correct horse battery"})
	require.Equal(t, http.StatusUnauthorized, r.Status, "%s", r.Raw)
	require.Equal(t, []string{"account.sso_create"}, auditActionsOf(t, c, s.cp.URL), "the new account is in its audit log")
	// Logging in again is the same account.
	c2, _ := s.ssoLogin(t, "alice", "alice-password")
	require.Equal(t, ses.Body["user"].(map[string]any)["id"], sessionOf(t, c2, s.cp.URL).Body["user"].(map[string]any)["id"])
	require.Equal(t, []string{"login.sso", "account.sso_create"}, auditActionsOf(t, c2, s.cp.URL),
		"a login that changed nothing is in the account's log too")
	// Another subject with alice's address does not get alice's account.
	c3, landed := s.ssoLogin(t, "alice2", "alice2-password")
	require.Equal(t, "/login", landed.Path, "%s", landed)
	require.Equal(t, "subject", landed.Query().Get("sso_error"))
	require.Equal(t, http.StatusUnauthorized, sessionOf(t, c3, s.cp.URL).Status)

	c, landed = s.ssoLogin(t, "mallory", "mallory-password")
	require.Equal(t, "/login", landed.Path, "%s", landed)
	require.Equal(t, "domain", landed.Query().Get("sso_error"))
	require.Equal(t, http.StatusUnauthorized, sessionOf(t, c, s.cp.URL).Status)
	r = call(t, s.cp.URL, "POST", "/api/v1/auth/signup", "", map[string]string{"email": "mallory@other.org", "password": "correct horse battery"})
	require.Equal(t, http.StatusCreated, r.Status, "no account was made for the refused person: %s", r.Raw)

	c, landed = s.ssoLogin(t, "una", "una-password")
	require.Equal(t, "/login", landed.Path, "%s", landed)
	require.Equal(t, "unverified", landed.Query().Get("sso_error"))
	require.Equal(t, http.StatusUnauthorized, sessionOf(t, c, s.cp.URL).Status)

	// A callback in a browser that never started a login (a login CSRF) is refused.
	jar, _ := cookiejar.New(nil)
	stranger := &http.Client{Jar: jar}
	resp, err := stranger.Get(s.cp.URL + "/api/v1/auth/sso/callback?code=abc&state=def")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, "/login", resp.Request.URL.Path)
	require.Equal(t, "expired", resp.Request.URL.Query().Get("sso_error"))
	require.Equal(t, http.StatusUnauthorized, sessionOf(t, stranger, s.cp.URL).Status)
}

// TestSSOLinksAccountByEmail: an account that exists with the provider's (verified)
// address is the one logged in. One whose address was never verified may have been made
// by someone else with this person's address: after the SSO login its password and its
// earlier credentials no longer work.
func TestSSOLinksAccountByEmail(t *testing.T) {
	s := startSSOStack(t, nil)
	r := call(t, s.cp.URL, "POST", "/api/v1/auth/signup", "", map[string]string{"email": "bob@example.com", "password": "correct horse battery"})
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Raw)
	squatterToken, bobID := r.str("token"), r.Body["user"].(map[string]any)["id"].(string)
	require.Equal(t, http.StatusOK, call(t, s.cp.URL, "GET", "/api/v1/me", squatterToken, nil).Status)
	// The squatter sets up a project and keeps a key to read what the rightful owner sends.
	pid := call(t, s.cp.URL, "POST", "/api/v1/projects", squatterToken, map[string]string{"name": "bob's"}).str("id")
	require.NotEmpty(t, pid)
	r = call(t, s.cp.URL, "POST", "/api/v1/projects/"+pid+"/keys", squatterToken, map[string]any{"name": "kept"})
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Raw)

	c, landed := s.ssoLogin(t, "bob", "bob-password")
	require.Equal(t, "/", landed.Path, "%s", landed)
	require.Equal(t, "claimed", landed.Query().Get("sso_notice"), "the dashboard is told the account was claimed, to say so")
	ses := sessionOf(t, c, s.cp.URL)
	require.Equal(t, http.StatusOK, ses.Status, "%s", ses.Raw)
	require.Equal(t, bobID, ses.Body["user"].(map[string]any)["id"], "the provider's address logs in to the account that has it")

	require.Equal(t, http.StatusUnauthorized, call(t, s.cp.URL, "GET", "/api/v1/me", squatterToken, nil).Status,
		"the unverified account's earlier login token ends")
	r = call(t, s.cp.URL, "POST", "/api/v1/auth/login", "", map[string]string{"email": "bob@example.com", "password": "correct horse battery"})
	require.Equal(t, http.StatusUnauthorized, r.Status, "the unverified account's password no longer logs in: %s", r.Raw)

	require.Contains(t, auditActionsOf(t, c, s.cp.URL), "account.sso_claim", "the claim is in the account's audit log")
	keys := callWith(t, c, s.cp.URL, "GET", "/api/v1/projects/"+pid+"/keys", "", nil)
	require.Equal(t, http.StatusOK, keys.Status, "%s", keys.Raw)
	require.Empty(t, keys.Body["keys"], "the project keys the account's earlier holder made end with the claim")

	// A second SSO login keeps the session the first made: the account is verified now.
	c2, _ := s.ssoLogin(t, "bob", "bob-password")
	require.Equal(t, http.StatusOK, sessionOf(t, c2, s.cp.URL).Status)
	require.Equal(t, http.StatusOK, sessionOf(t, c, s.cp.URL).Status)
}

// TestSSOOffWithoutProvider: without SVC_OIDC_ISSUER the login page offers no SSO and its
// endpoints are 404.
func TestSSOOffWithoutProvider(t *testing.T) {
	n := testenv.StartNATS(t)
	cp := testenv.StartControlPlane(t, map[string]string{"NATS_URL": n.URL(), "SVC_JWT_SECRET": testJWTSecret, "SVC_DATA_DIR": t.TempDir()})
	info := call(t, cp.URL, "GET", "/api/v1/auth/sso", "", nil)
	require.Equal(t, http.StatusOK, info.Status)
	require.Equal(t, false, info.Body["enabled"])
	require.Equal(t, http.StatusNotFound, call(t, cp.URL, "GET", "/api/v1/auth/sso/start", "", nil).Status)
}

// auditActionsOf lists the actions of the account's audit log, newest first.
func auditActionsOf(t *testing.T, c *http.Client, base string) []string {
	t.Helper()
	r := callWith(t, c, base, "GET", "/api/v1/audit", "", nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Raw)
	var out []string
	for _, e := range r.Body["events"].([]any) {
		out = append(out, e.(map[string]any)["action"].(string))
	}
	return out
}

// sessionCall calls the API with the session a browser holds, as the dashboard does
// (its CSRF token in the header).
func sessionCall(t *testing.T, c *http.Client, base, method, path string, body any) reply {
	t.Helper()
	csrf := sessionOf(t, c, base).str("csrf_token")
	require.NotEmpty(t, csrf)
	b, err := json.Marshal(body)
	require.NoError(t, err)
	req, err := http.NewRequest(method, base+path, bytes.NewReader(b))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-CSRF-Token", csrf)
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	r := reply{Status: resp.StatusCode, Header: resp.Header, Raw: raw}
	_ = json.Unmarshal(raw, &r.Body)
	return r
}

// TestSSOJoinsProjectsByDomain: a project whose owner named example.com gets people of
// that domain as members when they log in by single sign-on (recorded in its audit log).
// Only someone verified at exactly that domain may name it: an owner whose address is
// elsewhere (or unverified) cannot pull another company's people, and their addresses,
// into a project. A domain the instance does not let log in cannot be named; a project
// that did not name it gets nobody.
func TestSSOJoinsProjectsByDomain(t *testing.T) {
	s := startSSOStack(t, nil)
	r := call(t, s.cp.URL, "POST", "/api/v1/auth/signup", "", map[string]string{"email": "stranger@corp.test", "password": "correct horse battery"})
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Raw)
	stranger := r.str("token")
	trap := call(t, s.cp.URL, "POST", "/api/v1/projects", stranger, map[string]string{"name": "IT: required setup"}).str("id")
	require.NotEmpty(t, trap)
	r = call(t, s.cp.URL, "PUT", "/api/v1/projects/"+trap+"/sso-domains", stranger, map[string]any{"domains": []string{"example.com"}})
	require.Equal(t, http.StatusForbidden, r.Status, "a stranger cannot name example.com: %s", r.Raw)

	// The owner is verified at example.com by the provider.
	oc, _ := s.ssoLogin(t, "alice", "alice-password")
	pid := sessionCall(t, oc, s.cp.URL, "POST", "/api/v1/projects", map[string]string{"name": "joined"}).str("id")
	other := sessionCall(t, oc, s.cp.URL, "POST", "/api/v1/projects", map[string]string{"name": "closed"}).str("id")
	require.NotEmpty(t, pid)
	require.NotEmpty(t, other)
	owner := func(method, path string, body any) reply { return sessionCall(t, oc, s.cp.URL, method, path, body) }

	r = owner("PUT", "/api/v1/projects/"+pid+"/sso-domains", map[string]any{"domains": []string{"other.org"}})
	require.Equal(t, http.StatusBadRequest, r.Status, "a domain the instance refuses cannot be named: %s", r.Raw)
	r = owner("PUT", "/api/v1/projects/"+pid+"/sso-domains", map[string]any{"domains": []string{" Example.COM ", "example.com"}})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Raw)
	require.Equal(t, []any{"example.com"}, r.Body["domains"])
	require.Equal(t, []any{"example.com"}, callWith(t, oc, s.cp.URL, "GET", "/api/v1/projects/"+pid+"/sso-domains", "", nil).Body["domains"])

	c, landed := s.ssoLogin(t, "carol", "carol-password")
	require.Equal(t, "/", landed.Path, "%s", landed)
	require.Equal(t, http.StatusOK, sessionOf(t, c, s.cp.URL).Status)

	members := callWith(t, oc, s.cp.URL, "GET", "/api/v1/projects/"+pid+"/members", "", nil)
	require.Equal(t, http.StatusOK, members.Status)
	roles := map[string]string{}
	for _, m := range members.Body["members"].([]any) {
		roles[m.(map[string]any)["email"].(string)] = m.(map[string]any)["role"].(string)
	}
	require.Equal(t, "member", roles["carol@example.com"], "carol joined as member: %v", roles)
	require.Equal(t, http.StatusNotFound, callWith(t, c, s.cp.URL, "GET", "/api/v1/projects/"+other+"/members", "", nil).Status,
		"a project that named no domain got nobody")
	// carol sees the project with her session.
	require.Equal(t, http.StatusOK, callWith(t, c, s.cp.URL, "GET", "/api/v1/projects/"+pid, "", nil).Status)

	// Removed by the owner, carol does not join again at her next login.
	carolID := sessionOf(t, c, s.cp.URL).Body["user"].(map[string]any)["id"].(string)
	r = owner("DELETE", "/api/v1/projects/"+pid+"/members/"+carolID, nil)
	require.Contains(t, []int{http.StatusOK, http.StatusNoContent}, r.Status, "%s", r.Raw)
	c, landed = s.ssoLogin(t, "carol", "carol-password")
	require.Equal(t, "/", landed.Path, "%s", landed)
	require.Equal(t, http.StatusNotFound, callWith(t, c, s.cp.URL, "GET", "/api/v1/projects/"+pid, "", nil).Status,
		"a removed member does not join again by SSO")

	require.Equal(t, http.StatusNotFound, callWith(t, c, s.cp.URL, "GET", "/api/v1/projects/"+trap+"/members", "", nil).Status,
		"the stranger's project got nobody")
	audit := callWith(t, oc, s.cp.URL, "GET", "/api/v1/projects/"+pid+"/audit", "", nil)
	require.Equal(t, http.StatusOK, audit.Status, "%s", audit.Raw)
	var actions []string
	for _, e := range audit.Body["events"].([]any) {
		actions = append(actions, e.(map[string]any)["action"].(string))
	}
	require.Contains(t, actions, "member.join_sso")
	require.Contains(t, actions, "project.sso_domains")
}
