package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// browser is a client with a cookie jar, as a browser tab is: it sends the session cookie
// by itself, and the CSRF token only when the page adds it.
type browser struct {
	t      *testing.T
	base   string
	client *http.Client
	csrf   string
	header http.Header // added to every request (e.g. Origin, Sec-Fetch-Site)
}

func newBrowser(t *testing.T, base string) *browser {
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	return &browser{t: t, base: base, client: &http.Client{Jar: jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}, header: http.Header{}}
}

func (b *browser) do(method, path string, body any, csrf bool) reply {
	b.t.Helper()
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		require.NoError(b.t, err)
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, b.base+path, rd)
	require.NoError(b.t, err)
	for k, v := range b.header {
		req.Header[k] = v
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if csrf && b.csrf != "" {
		req.Header.Set("X-CSRF-Token", b.csrf)
	}
	resp, err := b.client.Do(req)
	require.NoError(b.t, err)
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	r := reply{Status: resp.StatusCode, Header: resp.Header, Raw: raw}
	if len(raw) > 0 && strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		_ = json.Unmarshal(raw, &r.Body)
	}
	return r
}

func (b *browser) signup(email string) reply {
	b.t.Helper()
	r := b.do("POST", "/api/v1/auth/session/signup", map[string]string{"email": email, "password": "correct horse battery"}, false)
	require.Equal(b.t, http.StatusCreated, r.Status, "%s", r.Raw)
	b.csrf = r.str("csrf_token")
	return r
}

func sessionCookie(t *testing.T, r reply) *http.Cookie {
	t.Helper()
	for _, c := range (&http.Response{Header: r.Header}).Cookies() {
		if strings.HasSuffix(c.Name, "svc_session") {
			return c
		}
	}
	t.Fatalf("no session cookie in %v", r.Header)
	return nil
}

// The dashboard's login is a cookie the page script cannot read; the answer holds no
// token. Writes need the CSRF token (a page on another port of the same host is the same
// site, so SameSite alone would let it write); logging out ends the session on the next
// request; Bearer clients are unchanged and sessions are not access tokens.
func TestBrowserSession(t *testing.T) {
	databases(t, func(t *testing.T, db map[string]string) {
		s := startStack(t, db)
		cp := s.cp.URL
		b := newBrowser(t, cp)

		r := b.signup("Browser@Example.com")
		c := sessionCookie(t, r)
		assert.True(t, c.HttpOnly, "the page script must not read the session")
		assert.Equal(t, http.SameSiteStrictMode, c.SameSite)
		assert.False(t, c.Secure, "plain http: a Secure cookie would not be stored")
		assert.Equal(t, "/", c.Path)
		assert.NotContains(t, string(r.Raw), c.Value, "the session secret is only in the cookie")
		assert.Nil(t, r.Body["token"], "no login token for the page")
		assert.Equal(t, "browser@example.com", r.Body["user"].(map[string]any)["email"])
		assert.NotEmpty(t, r.str("receiver_url"))

		me := b.do("GET", "/api/v1/me", nil, false)
		require.Equal(t, http.StatusOK, me.Status, "%s", me.Raw)
		assert.Equal(t, "browser@example.com", me.str("email"))
		info := b.do("GET", "/api/v1/auth/session", nil, false)
		require.Equal(t, http.StatusOK, info.Status)
		assert.Equal(t, b.csrf, info.str("csrf_token"), "a reloaded page gets its CSRF token back")

		// Writes: the token is required, and a browser's word that the request came from
		// elsewhere is believed.
		noToken := b.do("POST", "/api/v1/projects", map[string]string{"name": "x"}, false)
		assert.Equal(t, http.StatusForbidden, noToken.Status, "%s", noToken.Raw)
		assert.Equal(t, "forbidden", noToken.code())
		assert.Contains(t, noToken.message(), "X-CSRF-Token")
		b.header.Set("Origin", "http://localhost:4318")
		crossOrigin := b.do("POST", "/api/v1/projects", map[string]string{"name": "x"}, true)
		assert.Equal(t, http.StatusForbidden, crossOrigin.Status, "%s", crossOrigin.Raw)
		b.header.Del("Origin")
		b.header.Set("Sec-Fetch-Site", "same-site")
		assert.Equal(t, http.StatusForbidden, b.do("POST", "/api/v1/projects", map[string]string{"name": "x"}, true).Status)
		b.header.Set("Sec-Fetch-Site", "same-origin")
		b.header.Set("Origin", cp)
		p := b.do("POST", "/api/v1/projects", map[string]string{"name": "from-the-browser"}, true)
		require.Equal(t, http.StatusCreated, p.Status, "%s", p.Raw)
		list := b.do("GET", "/api/v1/projects", nil, false)
		assert.Len(t, list.Body["projects"], 1, "only the write with the token happened")

		// The cookie is for the JSON API, not MCP.
		assert.Equal(t, http.StatusUnauthorized, b.do("POST", "/mcp", map[string]any{}, true).Status)

		// A login from another origin is refused: no page elsewhere signs a visitor in.
		other := newBrowser(t, cp)
		other.header.Set("Origin", "http://evil.example")
		r = other.do("POST", "/api/v1/auth/session", map[string]string{"email": "browser@example.com", "password": "correct horse battery"}, false)
		assert.Equal(t, http.StatusForbidden, r.Status, "%s", r.Raw)

		// Bearer clients are unchanged, and the session is not listed as an access token.
		login := call(t, cp, "POST", "/api/v1/auth/login", "", map[string]string{"email": "browser@example.com", "password": "correct horse battery"})
		require.Equal(t, http.StatusOK, login.Status)
		assert.NotEmpty(t, login.str("token"))
		tokens := call(t, cp, "GET", "/api/v1/tokens", login.str("token"), nil)
		require.Equal(t, http.StatusOK, tokens.Status)
		assert.Empty(t, tokens.Body["tokens"])

		// A wrong password is 401 in words; the page shows the message.
		wrong := newBrowser(t, cp).do("POST", "/api/v1/auth/session", map[string]string{"email": "browser@example.com", "password": "not the password"}, false)
		assert.Equal(t, http.StatusUnauthorized, wrong.Status)
		assert.Equal(t, "invalid_credentials", wrong.code(), "the contract's code for a failed login")
		assert.Equal(t, "wrong email or password", wrong.message())

		// Log out: the cookie is cleared, and a copy of it kept elsewhere stops at once.
		stolen := &http.Cookie{Name: c.Name, Value: c.Value}
		out := b.do("DELETE", "/api/v1/auth/session", nil, true)
		require.Equal(t, http.StatusNoContent, out.Status, "%s", out.Raw)
		cleared := sessionCookie(t, out)
		assert.True(t, cleared.MaxAge < 0, "the browser forgets the cookie")
		assert.Equal(t, http.StatusUnauthorized, b.do("GET", "/api/v1/me", nil, false).Status)
		req, _ := http.NewRequest("GET", cp+"/api/v1/me", nil)
		req.AddCookie(stolen)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "a logged-out session is refused on the next request")
	})
}

// Over HTTPS (here: a TLS-terminating proxy saying so) the cookie is Secure and
// __Host-prefixed, and a plain-http cookie is not taken in its place.
func TestBrowserSessionOverHTTPS(t *testing.T) {
	s := startStack(t, map[string]string{"SVC_DATA_DIR": t.TempDir()})
	b := newBrowser(t, s.cp.URL)
	b.header.Set("X-Forwarded-Proto", "https")
	c := sessionCookie(t, b.signup("tls@example.com"))
	assert.True(t, c.Secure)
	assert.Equal(t, "__Host-svc_session", c.Name)
	assert.True(t, c.HttpOnly)

	req, _ := http.NewRequest("GET", s.cp.URL+"/api/v1/me", nil)
	req.Header.Set("X-Forwarded-Proto", "https")
	req.AddCookie(&http.Cookie{Name: "svc_session", Value: c.Value})
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "over https only the __Host- cookie counts")
}

// The dashboard is served at / from the API's origin, with a CSP that allows no inline
// script; any page path answers the page (the page routes), the API's paths keep their
// JSON answers.
func TestDashboardIsServedBesideTheAPI(t *testing.T) {
	s := startStack(t, map[string]string{"SVC_DATA_DIR": t.TempDir(), "SVC_PUBLIC_RECEIVER_URL": "https://ingest.example.com"})
	cp := s.cp.URL
	get := func(path string) (*http.Response, string) {
		req, _ := http.NewRequest("GET", cp+path, nil)
		resp, err := http.DefaultClient.Do(req) // Go's client asks for and undoes gzip itself
		require.NoError(t, err)
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp, string(body)
	}
	for _, path := range []string{"/", "/login", "/projects/p_123/keys"} {
		resp, body := get(path)
		require.Equal(t, http.StatusOK, resp.StatusCode, path)
		assert.Contains(t, resp.Header.Get("Content-Type"), "text/html", path)
		assert.Contains(t, body, "<html", path)
		csp := resp.Header.Get("Content-Security-Policy")
		assert.Contains(t, csp, "default-src 'self'")
		assert.Contains(t, csp, "script-src 'self';", "no inline scripts")
		assert.Contains(t, csp, "connect-src 'self' https://ingest.example.com;", "console reads go to the receiver")
		assert.Contains(t, csp, "frame-ancestors 'none'")
		assert.NotContains(t, csp, "unsafe-inline")
	}
	for _, path := range []string{"/api/v1/nothing", "/api/", "/mcp/extra", "/healthz/x", "/.well-known/nothing"} {
		resp, body := get(path)
		assert.Equal(t, http.StatusNotFound, resp.StatusCode, path)
		assert.Contains(t, resp.Header.Get("Content-Type"), "application/json", path)
		assert.Contains(t, body, `"not_found"`, path)
	}
	resp, _ := get("/healthz")
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	resp, _ = get("/assets/nothing.js")
	assert.Equal(t, http.StatusNotFound, resp.StatusCode, "a missing asset is not the page")
	r := call(t, cp, "POST", "/somewhere", "", map[string]string{})
	assert.Equal(t, http.StatusMethodNotAllowed, r.Status)
	assert.Equal(t, "method_not_allowed", r.code())
}

// Logins leave at most 20 sessions per account: the oldest ends when a new one starts,
// so repeated logins cannot grow the table without bound.
func TestBrowserSessionsPerAccountAreBounded(t *testing.T) {
	s := startStack(t, map[string]string{"SVC_DATA_DIR": t.TempDir()})
	first := newBrowser(t, s.cp.URL)
	first.signup("many@example.com")
	latest := []*browser{first}
	for i := 0; i < 20; i++ {
		b := newBrowser(t, s.cp.URL)
		r := b.do("POST", "/api/v1/auth/session", map[string]string{"email": "many@example.com", "password": "correct horse battery"}, false)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Raw)
		latest = append(latest, b)
	}
	assert.Equal(t, http.StatusUnauthorized, first.do("GET", "/api/v1/me", nil, false).Status, "the oldest session made room")
	for _, b := range latest[1:] {
		assert.Equal(t, http.StatusOK, b.do("GET", "/api/v1/me", nil, false).Status)
	}
}
