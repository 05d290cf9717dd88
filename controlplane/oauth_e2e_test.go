package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/controlplane/store"
	"github.com/otelcol-svc/otelcol-svc/internal/apikey"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// An MCP client given only the URL of /mcp signs its user in through the browser: the
// MCP Go SDK's own OAuth client follows the 401 to the metadata, registers itself,
// sends the "browser" to the authorization endpoint, where the user (signed in on the
// dashboard with its session cookie) approves; the client then lists and calls tools
// with the access token. Revoking the connected app stops the token on the next call.
func TestOAuthMCPClientSignsIn(t *testing.T) {
	databases(t, func(t *testing.T, db map[string]string) {
		s := startStack(t, db)
		cp := s.cp.URL
		b := newBrowser(t, cp)
		b.signup("oauth-user@example.com")
		pr := b.do("POST", "/api/v1/projects", map[string]string{"name": "via-oauth"}, true)
		require.Equal(t, http.StatusCreated, pr.Status, "%s", pr.Raw)

		redirect := fmt.Sprintf("http://127.0.0.1:%d/callback", testenv.FreePort(t))
		var signIns atomic.Int32
		var consent reply
		// The user's side: the browser opens the URL, the dashboard shows the consent
		// page for the request it was handed, the user approves, and the browser lands
		// on the client's redirect URI (read here instead of served).
		fetcher := func(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
			if signIns.Add(1) > 1 {
				return nil, errors.New("the user does not sign in again")
			}
			if !strings.HasPrefix(args.URL, cp+"/oauth/authorize?") {
				return nil, fmt.Errorf("authorization URL %q", args.URL)
			}
			r := b.do("GET", strings.TrimPrefix(args.URL, cp), nil, false)
			loc, err := url.Parse(r.Header.Get("Location"))
			if r.Status != http.StatusFound || err != nil || loc.Path != "/authorize" {
				return nil, fmt.Errorf("authorize answered %d %q: %s", r.Status, r.Header.Get("Location"), r.Raw)
			}
			id := loc.Query().Get("request")
			consent = b.do("GET", "/api/v1/oauth/requests/"+id, nil, false)
			ok := b.do("POST", "/api/v1/oauth/requests/"+id+"/approve", nil, true)
			if ok.Status != http.StatusOK {
				return nil, fmt.Errorf("approve answered %d: %s", ok.Status, ok.Raw)
			}
			to, err := url.Parse(ok.str("redirect_to"))
			if err != nil {
				return nil, err
			}
			q := to.Query()
			return &auth.AuthorizationResult{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss")}, nil
		}
		h, err := auth.NewAuthorizationCodeHandler(&auth.AuthorizationCodeHandlerConfig{
			DynamicClientRegistrationConfig: &auth.DynamicClientRegistrationConfig{Metadata: &oauthex.ClientRegistrationMetadata{
				RedirectURIs: []string{redirect}, ClientName: "otelcol-svc test client",
				GrantTypes: []string{"authorization_code", "refresh_token"}, ResponseTypes: []string{"code"}, TokenEndpointAuthMethod: "none",
			}},
			RedirectURL:              redirect,
			AuthorizationCodeFetcher: fetcher,
		})
		require.NoError(t, err)

		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		client := mcp.NewClient(&mcp.Implementation{Name: "oauth-test", Version: "1.0.0"}, nil)
		cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: cp + "/mcp", OAuthHandler: h,
			HTTPClient: &http.Client{Timeout: 10 * time.Second}, MaxRetries: -1}, nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = cs.Close() })
		assert.EqualValues(t, 1, signIns.Load())

		// The consent page saw who asks and where the browser goes next.
		require.Equal(t, http.StatusOK, consent.Status, "%s", consent.Raw)
		assert.Equal(t, "otelcol-svc test client", consent.str("client_name"))
		ru, _ := url.Parse(redirect)
		assert.Equal(t, ru.Host, consent.str("redirect_host"))
		assert.Equal(t, "mcp", consent.str("scope"))

		tools, err := cs.ListTools(ctx, nil)
		require.NoError(t, err)
		assert.NotEmpty(t, tools.Tools)
		out, errText := tool(t, cs, "list_projects", map[string]any{})
		require.Empty(t, errText)
		listed, _ := json.Marshal(out)
		assert.Contains(t, string(listed), pr.str("id"), "the token acts as its user")

		ts, err := h.TokenSource(ctx)
		require.NoError(t, err)
		tok, err := ts.Token()
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(tok.AccessToken, "oat_"), tok.AccessToken)
		require.True(t, strings.HasPrefix(tok.RefreshToken, "ort_"))

		// Issued for /mcp: the JSON API refuses it.
		api := call(t, cp, "GET", "/api/v1/me", tok.AccessToken, nil)
		assert.Equal(t, http.StatusUnauthorized, api.Status)
		assert.Equal(t, "invalid_token", api.code())
		assert.Contains(t, api.message(), "/mcp")

		// The connected app is listed for its user, and revoking it ends the token.
		grants := b.do("GET", "/api/v1/oauth/grants", nil, false)
		require.Equal(t, http.StatusOK, grants.Status, "%s", grants.Raw)
		list := grants.Body["grants"].([]any)
		require.Len(t, list, 1)
		g := list[0].(map[string]any)
		assert.Equal(t, "otelcol-svc test client", g["client_name"])
		assert.NotEmpty(t, g["last_used_at"])
		assert.NotContains(t, string(grants.Raw), tok.AccessToken)
		require.Equal(t, http.StatusNoContent, b.do("DELETE", "/api/v1/oauth/grants/"+g["id"].(string), nil, true).Status)

		status, challenge := mcpStatus(t, cp, tok.AccessToken)
		assert.Equal(t, http.StatusUnauthorized, status)
		assert.Contains(t, challenge, `error="invalid_token"`)
		assert.Contains(t, challenge, `resource_metadata="`+cp+`/.well-known/oauth-protected-resource/mcp"`)
		_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "list_projects", Arguments: map[string]any{}})
		assert.Error(t, err, "the revoked token's next call fails (and the user is asked to sign in again)")
		assert.EqualValues(t, 2, signIns.Load())
		assert.Empty(t, b.do("GET", "/api/v1/oauth/grants", nil, false).Body["grants"])
	})
}

// mcpStatus posts an initialize to /mcp with the token: the status and challenge a
// client sees.
func mcpStatus(t *testing.T, cp, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("POST", cp+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("WWW-Authenticate")
}

func pkce(t *testing.T) (verifier, challenge string) {
	var b [32]byte
	_, err := rand.Read(b[:])
	require.NoError(t, err)
	verifier = base64.RawURLEncoding.EncodeToString(b[:])
	sum := sha256.Sum256([]byte(verifier))
	return verifier, base64.RawURLEncoding.EncodeToString(sum[:])
}

func postForm(t *testing.T, cp, path string, form url.Values) reply {
	t.Helper()
	resp, err := http.Post(cp+path, "application/x-www-form-urlencoded", strings.NewReader(form.Encode()))
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	r := reply{Status: resp.StatusCode, Header: resp.Header, Raw: raw}
	_ = json.Unmarshal(raw, &r.Body)
	return r
}

func registerOAuthClient(t *testing.T, cp, redirect string) string {
	t.Helper()
	r := call(t, cp, "POST", "/oauth/register", "", map[string]any{"redirect_uris": []string{redirect}, "client_name": "refusals"})
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Raw)
	return r.str("client_id")
}

// oauthFlow is one client's authorization as a test drives it by hand.
type oauthFlow struct {
	t                          *testing.T
	cp, clientID, redirect     string
	verifier, challenge, state string
}

func (f *oauthFlow) params() url.Values {
	return url.Values{"response_type": {"code"}, "client_id": {f.clientID}, "redirect_uri": {f.redirect}, "code_challenge": {f.challenge},
		"code_challenge_method": {"S256"}, "state": {f.state}, "scope": {"mcp"}, "resource": {f.cp + "/mcp"}}
}

// start opens the authorization URL in b and returns the pending request's id.
func (f *oauthFlow) start(b *browser) string {
	f.t.Helper()
	f.verifier, f.challenge = pkce(f.t)
	r := b.do("GET", "/oauth/authorize?"+f.params().Encode(), nil, false)
	require.Equal(f.t, http.StatusFound, r.Status, "%s", r.Raw)
	loc, err := url.Parse(r.Header.Get("Location"))
	require.NoError(f.t, err)
	require.Equal(f.t, "/authorize", loc.Path)
	return loc.Query().Get("request")
}

// code approves a new request as b's user and returns the code from the redirect.
func (f *oauthFlow) code(b *browser) string {
	f.t.Helper()
	ok := b.do("POST", "/api/v1/oauth/requests/"+f.start(b)+"/approve", nil, true)
	require.Equal(f.t, http.StatusOK, ok.Status, "%s", ok.Raw)
	to, err := url.Parse(ok.str("redirect_to"))
	require.NoError(f.t, err)
	require.True(f.t, strings.HasPrefix(to.String(), f.redirect+"?"), to.String())
	assert.Equal(f.t, f.state, to.Query().Get("state"))
	assert.Equal(f.t, f.cp, to.Query().Get("iss"))
	return to.Query().Get("code")
}

func (f *oauthFlow) exchange(code, verifier string) reply {
	f.t.Helper()
	return postForm(f.t, f.cp, "/oauth/token", url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {f.redirect},
		"client_id": {f.clientID}, "code_verifier": {verifier}, "resource": {f.cp + "/mcp"}})
}

func (f *oauthFlow) refresh(token string) reply {
	f.t.Helper()
	return postForm(f.t, f.cp, "/oauth/token", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {token}, "client_id": {f.clientID}})
}

// tokens runs a whole authorization for b's user: access and refresh token.
func (f *oauthFlow) tokens(b *browser) (access, refresh string) {
	f.t.Helper()
	r := f.exchange(f.code(b), f.verifier)
	require.Equal(f.t, http.StatusOK, r.Status, "%s", r.Raw)
	return r.str("access_token"), r.str("refresh_token")
}

// rawDB opens the control plane's database beside it, to count what was stored.
func rawDB(t *testing.T, db map[string]string) *sql.DB {
	t.Helper()
	var d *sql.DB
	var err error
	if u := db["DATABASE_URL"]; u != "" {
		d, err = sql.Open("pgx", u)
	} else {
		d, err = sql.Open("sqlite", "file:"+filepath.Join(db["SVC_DATA_DIR"], "controlplane.db")+"?_pragma=busy_timeout(5000)")
	}
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	return d
}

func rows(t *testing.T, d *sql.DB, table string) int {
	t.Helper()
	var n int
	require.NoError(t, d.QueryRow("SELECT COUNT(*) FROM "+table).Scan(&n))
	return n
}

// expire moves a request's, code's or token's expiry into the past through the store, as
// time passing would.
func expire(t *testing.T, db map[string]string, key string) {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, db["SVC_DATA_DIR"], db["DATABASE_URL"])
	require.NoError(t, err)
	defer st.Close()
	require.NoError(t, st.InTx(ctx, func(tx *store.Tx) error { return tx.SetOAuthExpiry(ctx, key, time.Now().Add(-time.Second)) }))
}

// What a client or a person sees when something is wrong, and that nothing was stored or
// issued for it.
func TestOAuthRefusals(t *testing.T) {
	databases(t, func(t *testing.T, db map[string]string) {
		s := startStack(t, db)
		cp := s.cp.URL
		d := rawDB(t, db)
		b := newBrowser(t, cp)
		b.signup("consent@example.com")
		other := newBrowser(t, cp)
		other.signup("other@example.com")

		// Discovery, readable from a browser-based client's own origin.
		meta := call(t, cp, "GET", "/.well-known/oauth-authorization-server", "", nil)
		require.Equal(t, http.StatusOK, meta.Status)
		assert.Equal(t, cp, meta.str("issuer"))
		assert.Equal(t, cp+"/oauth/token", meta.str("token_endpoint"))
		assert.Equal(t, []any{"S256"}, meta.Body["code_challenge_methods_supported"])
		assert.Equal(t, true, meta.Body["authorization_response_iss_parameter_supported"])
		assert.Equal(t, "*", meta.Header.Get("Access-Control-Allow-Origin"))
		prm := call(t, cp, "GET", "/.well-known/oauth-protected-resource/mcp", "", nil)
		assert.Equal(t, []any{cp}, prm.Body["authorization_servers"])
		pre, err := http.NewRequest("OPTIONS", cp+"/oauth/token", nil)
		require.NoError(t, err)
		pre.Header.Set("Origin", "http://localhost:6274")
		pre.Header.Set("Access-Control-Request-Method", "POST")
		resp, err := http.DefaultClient.Do(pre)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusNoContent, resp.StatusCode)
		assert.Equal(t, "*", resp.Header.Get("Access-Control-Allow-Origin"))
		assert.Contains(t, resp.Header.Get("Access-Control-Allow-Methods"), "POST")

		// Registration: public clients with https or loopback redirect URIs only.
		redirect := "http://127.0.0.1:9/callback"
		f := &oauthFlow{t: t, cp: cp, clientID: registerOAuthClient(t, cp, redirect), redirect: redirect, state: "st-1"}
		for _, c := range []struct {
			body any
			code string
		}{
			{map[string]any{"redirect_uris": []string{"http://evil.example.com/cb"}}, "invalid_redirect_uri"},
			{map[string]any{"redirect_uris": []string{"https://x.example.com/cb#frag"}}, "invalid_redirect_uri"},
			{map[string]any{}, "invalid_redirect_uri"},
			{map[string]any{"redirect_uris": []string{"https://x.example.com/cb"}, "token_endpoint_auth_method": "client_secret_basic"}, "invalid_client_metadata"},
			{map[string]any{"redirect_uris": []string{"https://x.example.com/cb"}, "client_name": strings.Repeat("n", 101)}, "invalid_client_metadata"},
		} {
			r := call(t, cp, "POST", "/oauth/register", "", c.body)
			assert.Equal(t, http.StatusBadRequest, r.Status, "%v: %s", c.body, r.Raw)
			assert.Equal(t, c.code, r.str("error"), "%v", c.body)
			assert.NotEmpty(t, r.str("error_description"))
		}
		big := call(t, cp, "POST", "/oauth/register", "", map[string]any{"redirect_uris": []string{"https://x.example.com/" + strings.Repeat("a", 17<<10)}})
		assert.Equal(t, http.StatusRequestEntityTooLarge, big.Status)
		assert.Equal(t, 1, rows(t, d, "oauth_clients"), "refused registrations store nothing")

		// An unregistered redirect URI or an unknown client is answered here, never by a
		// redirect to it (an open redirect), and nothing waits for consent.
		f.verifier, f.challenge = pkce(t)
		q := f.params()
		q.Set("redirect_uri", "http://127.0.0.1:9/elsewhere")
		r := b.do("GET", "/oauth/authorize?"+q.Encode(), nil, false)
		assert.Equal(t, http.StatusBadRequest, r.Status, "%s", r.Raw)
		assert.Empty(t, r.Header.Get("Location"))
		assert.Equal(t, "invalid_request", r.str("error"))
		q = f.params()
		q.Set("client_id", "ocl_unknown")
		r = b.do("GET", "/oauth/authorize?"+q.Encode(), nil, false)
		assert.Equal(t, http.StatusBadRequest, r.Status)
		assert.Empty(t, r.Header.Get("Location"))
		assert.Equal(t, "invalid_client", r.str("error"))

		// Other errors go back to the client with state and iss: plain PKCE, a foreign
		// resource, another scope.
		for _, c := range []struct{ key, value, code string }{
			{"code_challenge_method", "plain", "invalid_request"},
			{"resource", "https://elsewhere.example.com/mcp", "invalid_target"},
			{"scope", "admin", "invalid_scope"},
			{"response_type", "token", "unsupported_response_type"},
		} {
			q := f.params()
			q.Set(c.key, c.value)
			r := b.do("GET", "/oauth/authorize?"+q.Encode(), nil, false)
			require.Equal(t, http.StatusFound, r.Status, "%s=%s: %s", c.key, c.value, r.Raw)
			loc, err := url.Parse(r.Header.Get("Location"))
			require.NoError(t, err)
			assert.True(t, strings.HasPrefix(loc.String(), redirect+"?"), loc.String())
			assert.Equal(t, c.code, loc.Query().Get("error"), "%s=%s", c.key, c.value)
			assert.Equal(t, "st-1", loc.Query().Get("state"))
			assert.Equal(t, cp, loc.Query().Get("iss"))
		}
		assert.Equal(t, 0, rows(t, d, "oauth_requests"), "refused requests store nothing")

		// A wrong code_verifier gets nothing; the right one, once, gets the tokens.
		code := f.code(b)
		wrongVerifier, _ := pkce(t)
		wrong := f.exchange(code, wrongVerifier)
		assert.Equal(t, http.StatusBadRequest, wrong.Status, "%s", wrong.Raw)
		assert.Equal(t, "invalid_grant", wrong.str("error"))
		assert.Equal(t, "no-store", wrong.Header.Get("Cache-Control"))
		assert.Equal(t, 0, rows(t, d, "oauth_tokens"))
		first := f.exchange(code, f.verifier)
		require.Equal(t, http.StatusOK, first.Status, "%s", first.Raw)
		assert.Equal(t, "Bearer", first.str("token_type"))
		assert.EqualValues(t, 3600, first.Body["expires_in"])
		assert.Equal(t, "mcp", first.str("scope"))
		assert.Equal(t, "no-store", first.Header.Get("Cache-Control"))
		access := first.str("access_token")
		status, _ := mcpStatus(t, cp, access)
		require.Equal(t, http.StatusOK, status)

		// A second use of the code is refused and revokes what the first use issued.
		again := f.exchange(code, f.verifier)
		assert.Equal(t, http.StatusBadRequest, again.Status)
		assert.Equal(t, "invalid_grant", again.str("error"))
		status, _ = mcpStatus(t, cp, access)
		assert.Equal(t, http.StatusUnauthorized, status, "the code's first tokens are revoked")
		assert.Equal(t, "invalid_grant", f.refresh(first.str("refresh_token")).str("error"))
		assert.Empty(t, b.do("GET", "/api/v1/oauth/grants", nil, false).Body["grants"])

		// Refresh rotates: the new pair works, the old refresh token does not, and its
		// reuse revokes the whole grant.
		a1, r1 := f.tokens(b)
		rot := f.refresh(r1)
		require.Equal(t, http.StatusOK, rot.Status, "%s", rot.Raw)
		a2, r2 := rot.str("access_token"), rot.str("refresh_token")
		assert.NotEqual(t, r1, r2)
		status, _ = mcpStatus(t, cp, a2)
		assert.Equal(t, http.StatusOK, status)
		reuse := f.refresh(r1)
		assert.Equal(t, http.StatusBadRequest, reuse.Status)
		assert.Equal(t, "invalid_grant", reuse.str("error"))
		for _, a := range []string{a1, a2} {
			status, _ = mcpStatus(t, cp, a)
			assert.Equal(t, http.StatusUnauthorized, status)
		}
		assert.Equal(t, "invalid_grant", f.refresh(r2).str("error"))
		assert.Empty(t, b.do("GET", "/api/v1/oauth/grants", nil, false).Body["grants"])

		// Another user's grant is not found, and stays.
		a3, r3 := f.tokens(b)
		gs := b.do("GET", "/api/v1/oauth/grants", nil, false).Body["grants"].([]any)
		require.Len(t, gs, 1)
		gid := gs[0].(map[string]any)["id"].(string)
		assert.Equal(t, http.StatusNotFound, other.do("DELETE", "/api/v1/oauth/grants/"+gid, nil, true).Status)
		assert.Empty(t, other.do("GET", "/api/v1/oauth/grants", nil, false).Body["grants"])
		status, _ = mcpStatus(t, cp, a3)
		assert.Equal(t, http.StatusOK, status)

		// OAuth access tokens are for /mcp only.
		for _, p := range []string{"/api/v1/me", "/api/v1/oauth/grants", "/api/v1/projects"} {
			r := call(t, cp, "GET", p, a3, nil)
			assert.Equal(t, http.StatusUnauthorized, r.Status, p)
			assert.Equal(t, "invalid_token", r.code(), p)
			assert.Contains(t, r.message(), "personal access token", p)
		}

		// A personal access token (or an OAuth token) cannot approve, nor read the
		// request; a cookie write without the CSRF token cannot either. The request
		// still waits for its user.
		pat := b.do("POST", "/api/v1/tokens", map[string]string{"name": "script"}, true).str("token")
		require.NotEmpty(t, pat)
		id := f.start(b)
		assert.Equal(t, http.StatusForbidden, call(t, cp, "POST", "/api/v1/oauth/requests/"+id+"/approve", pat, nil).Status)
		assert.Equal(t, http.StatusForbidden, call(t, cp, "GET", "/api/v1/oauth/requests/"+id, pat, nil).Status)
		assert.Equal(t, http.StatusUnauthorized, call(t, cp, "POST", "/api/v1/oauth/requests/"+id+"/approve", a3, nil).Status)
		assert.Equal(t, http.StatusForbidden, b.do("POST", "/api/v1/oauth/requests/"+id+"/approve", nil, false).Status)
		assert.Equal(t, http.StatusOK, b.do("GET", "/api/v1/oauth/requests/"+id, nil, false).Status)
		assert.Equal(t, 1, rows(t, d, "oauth_grants"), "no grant minted by the refused approvals")

		// Deny sends the browser back with access_denied; the request is used up.
		deny := b.do("POST", "/api/v1/oauth/requests/"+id+"/deny", nil, true)
		require.Equal(t, http.StatusOK, deny.Status, "%s", deny.Raw)
		to, err := url.Parse(deny.str("redirect_to"))
		require.NoError(t, err)
		assert.Equal(t, "access_denied", to.Query().Get("error"))
		assert.Equal(t, "st-1", to.Query().Get("state"))
		assert.Equal(t, http.StatusNotFound, b.do("POST", "/api/v1/oauth/requests/"+id+"/approve", nil, true).Status)

		// An expired request is gone; a login token (not only the cookie) may approve.
		id = f.start(b)
		expire(t, db, id)
		gone := b.do("GET", "/api/v1/oauth/requests/"+id, nil, false)
		assert.Equal(t, http.StatusNotFound, gone.Status)
		assert.Equal(t, "not_found", gone.code())
		assert.Equal(t, http.StatusNotFound, b.do("POST", "/api/v1/oauth/requests/"+id+"/approve", nil, true).Status)
		assert.Equal(t, 0, rows(t, d, "oauth_requests"), "the expired request was deleted when read")
		login := call(t, cp, "POST", "/api/v1/auth/login", "", map[string]string{"email": "consent@example.com", "password": "correct horse battery"}).str("token")
		assert.Equal(t, http.StatusOK, call(t, cp, "POST", "/api/v1/oauth/requests/"+f.start(b)+"/approve", login, nil).Status)

		// An expired code and an expired access token are refused.
		code = f.code(b)
		expire(t, db, apikey.Hash(code))
		assert.Equal(t, "invalid_grant", f.exchange(code, f.verifier).str("error"))
		a4, _ := f.tokens(b)
		expire(t, db, apikey.Hash(a4))
		status, _ = mcpStatus(t, cp, a4)
		assert.Equal(t, http.StatusUnauthorized, status)

		// RFC 7009: revoking a refresh token revokes its grant; any token answers 200.
		assert.Equal(t, http.StatusOK, postForm(t, cp, "/oauth/revoke", url.Values{"token": {r3}, "client_id": {f.clientID}}).Status)
		status, _ = mcpStatus(t, cp, a3)
		assert.Equal(t, http.StatusUnauthorized, status)
		assert.Equal(t, http.StatusOK, postForm(t, cp, "/oauth/revoke", url.Values{"token": {"ort_nonsense"}}).Status)

		// Registration is rate limited per address.
		limited := false
		for i := 0; i < 40 && !limited; i++ {
			r := call(t, cp, "POST", "/oauth/register", "", map[string]any{"redirect_uris": []string{redirect}})
			if r.Status == http.StatusTooManyRequests {
				limited = true
				assert.NotEmpty(t, r.Header.Get("Retry-After"))
				continue
			}
			require.Equal(t, http.StatusCreated, r.Status, "%s", r.Raw)
		}
		assert.True(t, limited)
		assert.LessOrEqual(t, rows(t, d, "oauth_clients"), 30)
	})
}

// Behind a proxy the public URL is what clients see and check: the issuer, the
// endpoints, the resource and the challenge all name it, not the address the request
// reached.
func TestOAuthPublicURL(t *testing.T) {
	s := startStack(t, map[string]string{"SVC_DATA_DIR": t.TempDir(), "SVC_PUBLIC_URL": "https://cp.example.com/"})
	cp, pub := s.cp.URL, "https://cp.example.com"
	meta := call(t, cp, "GET", "/.well-known/oauth-authorization-server", "", nil)
	require.Equal(t, http.StatusOK, meta.Status)
	assert.Equal(t, pub, meta.str("issuer"))
	assert.Equal(t, pub+"/oauth/authorize", meta.str("authorization_endpoint"))
	assert.Equal(t, pub+"/oauth/register", meta.str("registration_endpoint"))
	prm := call(t, cp, "GET", "/.well-known/oauth-protected-resource/mcp", "", nil)
	assert.Equal(t, pub+"/mcp", prm.str("resource"))
	assert.Equal(t, []any{pub}, prm.Body["authorization_servers"])
	resp, err := http.Post(cp+"/mcp", "application/json", strings.NewReader(`{}`))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, `Bearer resource_metadata="`+pub+`/.well-known/oauth-protected-resource/mcp"`, resp.Header.Get("WWW-Authenticate"))

	b := newBrowser(t, cp)
	b.signup("proxied@example.com")
	redirect := "https://app.example.com/cb"
	f := &oauthFlow{t: t, cp: pub, clientID: registerOAuthClient(t, cp, redirect), redirect: redirect, state: "s"}
	f.verifier, f.challenge = pkce(t)
	q := f.params()
	q.Set("resource", cp+"/mcp")
	r := b.do("GET", "/oauth/authorize?"+q.Encode(), nil, false)
	require.Equal(t, http.StatusFound, r.Status)
	loc, err := url.Parse(r.Header.Get("Location"))
	require.NoError(t, err)
	assert.Equal(t, "invalid_target", loc.Query().Get("error"), "the resource is the public one")
	assert.Equal(t, pub, loc.Query().Get("iss"))
	r = b.do("GET", "/oauth/authorize?"+f.params().Encode(), nil, false)
	require.Equal(t, http.StatusFound, r.Status, "%s", r.Raw)
	assert.True(t, strings.HasPrefix(r.Header.Get("Location"), "/authorize?request=oar_"), r.Header.Get("Location"))
}
