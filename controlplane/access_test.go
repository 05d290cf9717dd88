package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// withKey sends body to the receiver with an API key in X-API-Key.
func withKey(t *testing.T, method, url, key, body string) reply {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("X-API-Key", key)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	r := reply{Status: resp.StatusCode, Header: resp.Header, Raw: raw}
	_ = json.Unmarshal(raw, &r.Body)
	return r
}

// TestLogOutEverywhere: POST /api/v1/auth/logout-all ends every credential of the caller
// at once (login tokens, personal access tokens, dashboard sessions, OAuth grants), and
// the console tokens each of them minted stop at the receiver within a second. Another
// user's credentials are untouched, and logging in again works at once.
func TestLogOutEverywhere(t *testing.T) {
	databases(t, func(t *testing.T, db map[string]string) {
		s := startStack(t, db)
		col := s.receiver(t)
		cp := s.cp.URL
		login, _ := s.signup(t, "owner@example.com")
		other, _ := s.signup(t, "other@example.com")
		pid := call(t, cp, "POST", "/api/v1/projects", login, map[string]string{"name": "everywhere"}).str("id")
		otherPid := call(t, cp, "POST", "/api/v1/projects", other, map[string]string{"name": "theirs"}).str("id")
		p := "/api/v1/projects/" + pid

		pat := call(t, cp, "POST", "/api/v1/tokens", login, map[string]any{"name": "script"})
		require.Equal(t, http.StatusCreated, pat.Status, "%s", pat.Raw)
		b := newBrowser(t, cp)
		r := b.do("POST", "/api/v1/auth/session", map[string]string{"email": "owner@example.com", "password": "correct horse battery"}, false)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Raw)
		b.csrf = r.str("csrf_token")
		redirect := "http://127.0.0.1:9/callback"
		f := &oauthFlow{t: t, cp: cp, clientID: registerOAuthClient(t, cp, redirect), redirect: redirect, state: "st"}
		access, _ := f.tokens(b)

		mint := func(r reply) string {
			t.Helper()
			require.Equal(t, http.StatusOK, r.Status, "%s", r.Raw)
			return r.str("token")
		}
		byLogin := mint(call(t, cp, "POST", p+"/console-token", login, nil))
		byPAT := mint(call(t, cp, "POST", p+"/console-token", pat.str("token"), nil))
		bySession := mint(b.do("POST", p+"/console-token", nil, true))
		cs, err := mcpSession(t, cp, access)
		require.NoError(t, err)
		out, errText := tool(t, cs, "get_console_token", map[string]any{"project_id": pid})
		require.Empty(t, errText)
		byApp, _ := out["token"].(string)
		theirs := mint(call(t, cp, "POST", "/api/v1/projects/"+otherPid+"/console-token", other, nil))
		minted := map[string]string{"login token": byLogin, "personal access token": byPAT, "dashboard session": bySession, "OAuth grant": byApp}
		for what, tok := range minted {
			require.Eventually(t, func() bool { st, _ := consoleRead(t, col.HTTP, pid, tok); return st == http.StatusOK },
				10*time.Second, 20*time.Millisecond, "the console token minted by the %s reads the project", what)
		}

		r = call(t, cp, "POST", "/api/v1/auth/logout-all", login, nil)
		require.Equal(t, http.StatusNoContent, r.Status, "%s", r.Raw)
		answered := time.Now()

		// At the control plane every credential ends at once.
		for what, tok := range map[string]string{"login token": login, "personal access token": pat.str("token")} {
			r := call(t, cp, "GET", "/api/v1/me", tok, nil)
			assert.Equal(t, http.StatusUnauthorized, r.Status, "the %s after logging out everywhere: %s", what, r.Raw)
			assert.Equal(t, "invalid_token", r.code(), what)
		}
		r = b.do("GET", "/api/v1/me", nil, false)
		assert.Equal(t, http.StatusUnauthorized, r.Status, "the dashboard session: %s", r.Raw)
		_, err = mcpSession(t, cp, access)
		assert.Error(t, err, "the MCP client's OAuth access token")

		// At the receiver the console tokens they minted stop within a second.
		for what, tok := range minted {
			for {
				st, code := consoleRead(t, col.HTTP, pid, tok)
				if st == http.StatusUnauthorized {
					assert.Equal(t, "invalid_token", code, what)
					break
				}
				require.Equal(t, http.StatusOK, st, what)
				require.Less(t, time.Since(answered), time.Second, "the console token minted by the %s still reads the project", what)
				time.Sleep(5 * time.Millisecond)
			}
		}
		t.Logf("every console token refused %s after the answer", time.Since(answered).Round(time.Millisecond))

		// Someone else's are untouched.
		assert.Equal(t, http.StatusOK, call(t, cp, "GET", "/api/v1/me", other, nil).Status)
		st, _ := consoleRead(t, col.HTTP, otherPid, theirs)
		assert.Equal(t, http.StatusOK, st, "another user's console token")

		// Logging in again gives a token that works, and mints console tokens that read.
		r = call(t, cp, "POST", "/api/v1/auth/login", "", map[string]string{"email": "owner@example.com", "password": "correct horse battery"})
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Raw)
		again := r.str("token")
		assert.Equal(t, http.StatusOK, call(t, cp, "GET", "/api/v1/me", again, nil).Status)
		fresh := mint(call(t, cp, "POST", p+"/console-token", again, nil))
		st, _ = consoleRead(t, col.HTTP, pid, fresh)
		assert.Equal(t, http.StatusOK, st, "a console token minted after logging in again")

		// Logging out everywhere from the dashboard ends that session too and clears its cookie.
		b2 := newBrowser(t, cp)
		r = b2.do("POST", "/api/v1/auth/session", map[string]string{"email": "owner@example.com", "password": "correct horse battery"}, false)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Raw)
		b2.csrf = r.str("csrf_token")
		r = b2.do("POST", "/api/v1/auth/logout-all", nil, false)
		assert.Equal(t, http.StatusForbidden, r.Status, "without the CSRF token: %s", r.Raw)
		r = b2.do("POST", "/api/v1/auth/logout-all", nil, true)
		require.Equal(t, http.StatusNoContent, r.Status, "%s", r.Raw)
		assert.Contains(t, r.Header.Get("Set-Cookie"), "Max-Age=0", "the cookie is cleared")
		assert.Equal(t, http.StatusUnauthorized, b2.do("GET", "/api/v1/auth/session", nil, false).Status)
		assert.Equal(t, http.StatusUnauthorized, call(t, cp, "GET", "/api/v1/me", again, nil).Status, "and the login token from before")
	})
}

// TestKeyScopes: a new key sends and posts agent results but does not read (403
// insufficient_scope naming read); read is given when asked for; a key without results
// is refused agent results; narrowing a key takes effect at the receiver without a new
// key; scopes outside the three are refused.
func TestKeyScopes(t *testing.T) {
	databases(t, func(t *testing.T, db map[string]string) {
		s := startStack(t, db)
		col := s.receiver(t)
		cp := s.cp.URL
		login, _ := s.signup(t, "owner@example.com")
		pid := call(t, cp, "POST", "/api/v1/projects", login, map[string]string{"name": "scoped"}).str("id")
		keys := "/api/v1/projects/" + pid + "/keys"
		key := func(body map[string]any) reply {
			t.Helper()
			r := call(t, cp, "POST", keys, login, body)
			require.Equal(t, http.StatusCreated, r.Status, "%s", r.Raw)
			return r
		}
		sender := key(map[string]any{"name": "app"})
		assert.Equal(t, []any{"ingest", "results"}, sender.Body["scopes"], "a new key sends and posts results")
		agent := key(map[string]any{"name": "agent", "scopes": []string{"results"}})
		everything := key(map[string]any{"name": "all", "scopes": []string{"read", "ingest", "results"}})
		assert.Equal(t, []any{"ingest", "results", "read"}, everything.Body["scopes"])

		events := col.HTTP + "/v1/events"
		results := col.HTTP + "/internal/agent-output"
		console := col.HTTP + "/console/v1/projects/" + pid + "/events"
		result := `{"request_id": "req_scoped", "payload": {"summary": "ok"}}`
		require.Eventually(t, func() bool {
			return withKey(t, "POST", events, sender.str("key"), `{"a": 1}`).Status == http.StatusAccepted
		},
			10*time.Second, 20*time.Millisecond, "the new key sends")
		assert.Equal(t, http.StatusAccepted, withKey(t, "POST", results, sender.str("key"), result).Status)
		refused := func(r reply, scope string) {
			t.Helper()
			assert.Equal(t, http.StatusForbidden, r.Status, "%s", r.Raw)
			assert.Equal(t, "insufficient_scope", r.code())
			assert.Contains(t, r.message(), "needs the "+scope+" scope")
		}
		refused(withKey(t, "GET", console, sender.str("key"), ""), "read")
		require.Eventually(t, func() bool { return withKey(t, "GET", console, agent.str("key"), "").Status == http.StatusForbidden },
			10*time.Second, 20*time.Millisecond)
		refused(withKey(t, "POST", events, agent.str("key"), `{"a": 1}`), "ingest")
		assert.Equal(t, http.StatusAccepted, withKey(t, "POST", results, agent.str("key"), result).Status)
		require.Eventually(t, func() bool { return withKey(t, "GET", console, everything.str("key"), "").Status == http.StatusOK },
			10*time.Second, 20*time.Millisecond, "a key given read reads")

		// Narrowing: the key stays, its reading stops.
		r := call(t, cp, "PATCH", keys+"/"+everything.str("id"), login, map[string]any{"scopes": []string{"ingest"}})
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Raw)
		assert.Equal(t, []any{"ingest"}, r.Body["scopes"])
		require.Eventually(t, func() bool {
			return withKey(t, "GET", console, everything.str("key"), "").Status == http.StatusForbidden
		},
			10*time.Second, 5*time.Millisecond, "a narrowed key stops reading")
		refused(withKey(t, "POST", results, everything.str("key"), result), "results")
		assert.Equal(t, http.StatusAccepted, withKey(t, "POST", events, everything.str("key"), `{"a": 1}`).Status)
		list := call(t, cp, "GET", keys, login, nil)
		require.Equal(t, http.StatusOK, list.Status)
		for _, k := range list.Body["keys"].([]any) {
			k := k.(map[string]any)
			if k["id"] == everything.str("id") {
				assert.Equal(t, []any{"ingest"}, k["scopes"], "the listing shows the narrowed scopes")
			}
		}

		for _, bad := range []any{[]string{}, []string{"write"}, []string{"read", "read"}, "read"} {
			r := call(t, cp, "POST", keys, login, map[string]any{"name": "bad", "scopes": bad})
			assert.Equal(t, http.StatusBadRequest, r.Status, "%v: %s", bad, r.Raw)
		}
		r = call(t, cp, "PATCH", keys+"/k_nope", login, map[string]any{"scopes": []string{"read"}})
		assert.Equal(t, http.StatusNotFound, r.Status, "%s", r.Raw)
	})
}

// TestLimitedAccessTokens: a personal access token limited to one project and to
// reading sees only that project, reads it and gets console tokens for it, and changes
// nothing (403 insufficient_scope), through the API and through MCP.
func TestLimitedAccessTokens(t *testing.T) {
	databases(t, func(t *testing.T, db map[string]string) {
		s := startStack(t, db)
		cp := s.cp.URL
		login, _ := s.signup(t, "owner@example.com")
		a := call(t, cp, "POST", "/api/v1/projects", login, map[string]string{"name": "shown"}).str("id")
		b := call(t, cp, "POST", "/api/v1/projects", login, map[string]string{"name": "hidden"}).str("id")
		stranger, _ := s.signup(t, "stranger@example.com")
		theirs := call(t, cp, "POST", "/api/v1/projects", stranger, map[string]string{"name": "theirs"}).str("id")

		r := call(t, cp, "POST", "/api/v1/tokens", login, map[string]any{"name": "x", "projects": []string{theirs}})
		assert.Equal(t, http.StatusNotFound, r.Status, "a token cannot be limited to someone else's project: %s", r.Raw)
		r = call(t, cp, "POST", "/api/v1/tokens", login, map[string]any{"name": "ro", "projects": []string{a}, "read_only": true})
		require.Equal(t, http.StatusCreated, r.Status, "%s", r.Raw)
		assert.Equal(t, []any{a}, r.Body["projects"])
		assert.Equal(t, true, r.Body["read_only"])
		ro := r.str("token")

		list := call(t, cp, "GET", "/api/v1/projects", ro, nil)
		require.Equal(t, http.StatusOK, list.Status, "%s", list.Raw)
		require.Len(t, list.Body["projects"], 1, "%s", list.Raw)
		assert.Equal(t, a, list.Body["projects"].([]any)[0].(map[string]any)["id"])
		assert.Equal(t, http.StatusOK, call(t, cp, "GET", "/api/v1/projects/"+a, ro, nil).Status)
		assert.Equal(t, http.StatusNotFound, call(t, cp, "GET", "/api/v1/projects/"+b, ro, nil).Status, "the other project is not found")
		assert.Equal(t, http.StatusOK, call(t, cp, "POST", "/api/v1/projects/"+a+"/console-token", ro, nil).Status, "a console token is a read")
		assert.Equal(t, http.StatusNotFound, call(t, cp, "POST", "/api/v1/projects/"+b+"/console-token", ro, nil).Status)
		for _, c := range []struct{ method, path string }{
			{"PATCH", "/api/v1/projects/" + a}, {"POST", "/api/v1/projects/" + a + "/keys"}, {"POST", "/api/v1/projects"},
			{"POST", "/api/v1/auth/logout-all"},
		} {
			r := call(t, cp, c.method, c.path, ro, map[string]any{"name": "changed"})
			assert.Equal(t, http.StatusForbidden, r.Status, "%s %s: %s", c.method, c.path, r.Raw)
			assert.Equal(t, "insufficient_scope", r.code(), "%s %s", c.method, c.path)
		}
		assert.Equal(t, http.StatusOK, call(t, cp, "GET", "/api/v1/me", login, nil).Status, "the refused logout-all ended nothing")

		cs, err := mcpSession(t, cp, ro)
		require.NoError(t, err)
		out, errText := tool(t, cs, "list_projects", map[string]any{})
		require.Empty(t, errText)
		assert.Len(t, out["projects"], 1, "MCP lists only the token's project: %v", out)
		_, errText = tool(t, cs, "get_console_token", map[string]any{"project_id": b})
		assert.Contains(t, errText, "not_found")
		_, errText = tool(t, cs, "delete_source", map[string]any{"project_id": a, "source_id": "src_none"})
		assert.Contains(t, errText, "insufficient_scope", "a change through MCP")

		// A token limited to projects only, not to reading, changes its project.
		r = call(t, cp, "POST", "/api/v1/tokens", login, map[string]any{"name": "rw", "projects": []string{a}})
		require.Equal(t, http.StatusCreated, r.Status, "%s", r.Raw)
		rw := r.str("token")
		assert.Equal(t, http.StatusCreated, call(t, cp, "POST", "/api/v1/projects/"+a+"/keys", rw, map[string]any{"name": "k"}).Status)
		assert.Equal(t, http.StatusNotFound, call(t, cp, "POST", "/api/v1/projects/"+b+"/keys", rw, map[string]any{"name": "k"}).Status)
	})
}
