package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPersonalAccessTokens: a script or MCP client signs in once and uses an osp_ token
// wherever a login token works; the token is shown once, cannot mint successors, belongs
// to its user alone, and stops working on the request after its revocation.
func TestPersonalAccessTokens(t *testing.T) {
	databases(t, func(t *testing.T, db map[string]string) {
		s := startStack(t, db)
		cp := s.cp.URL
		login, userID := s.signup(t, "scripts@example.com")
		other, _ := s.signup(t, "someone-else@example.com")

		r := call(t, cp, "POST", "/api/v1/tokens", login, map[string]any{"name": "ci", "expires_in_days": 7})
		require.Equal(t, http.StatusCreated, r.Status, "%s", r.Raw)
		pat, id := r.str("token"), r.str("id")
		require.True(t, strings.HasPrefix(pat, "osp_"), pat)
		assert.Equal(t, pat[:len(r.str("prefix"))], r.str("prefix"))
		expires, err := time.Parse(time.RFC3339Nano, r.str("expires_at"))
		require.NoError(t, err)
		assert.WithinDuration(t, time.Now().Add(7*24*time.Hour), expires, time.Minute)

		// Wherever a login token works: the API and MCP.
		me := call(t, cp, "GET", "/api/v1/me", pat, nil)
		require.Equal(t, http.StatusOK, me.Status, "%s", me.Raw)
		assert.Equal(t, userID, me.str("id"))
		pr := call(t, cp, "POST", "/api/v1/projects", pat, map[string]string{"name": "from-a-script"})
		require.Equal(t, http.StatusCreated, pr.Status, "%s", pr.Raw)
		cs, err := mcpSession(t, cp, pat)
		require.NoError(t, err)
		out, errText := tool(t, cs, "list_projects", map[string]any{})
		require.Empty(t, errText)
		b, err := json.Marshal(out)
		require.NoError(t, err)
		assert.Contains(t, string(b), pr.str("id"))

		// Shown once: listings have the prefix, never the token.
		list := call(t, cp, "GET", "/api/v1/tokens", pat, nil)
		require.Equal(t, http.StatusOK, list.Status)
		assert.NotContains(t, string(list.Raw), pat)
		assert.Contains(t, string(list.Raw), r.str("prefix"))
		assert.NotContains(t, string(call(t, cp, "GET", "/api/v1/tokens", other, nil).Raw), id, "another user's listing")

		// A token cannot mint tokens (a leaked one must not outlive its revocation).
		minted := call(t, cp, "POST", "/api/v1/tokens", pat, map[string]any{"name": "child"})
		assert.Equal(t, http.StatusForbidden, minted.Status, "%s", minted.Raw)

		// Bad input names the field; nothing is created.
		for _, body := range []map[string]any{{"name": "x", "expires_in_days": 366}, {"name": "x", "expires_in_days": -1}, {"name": ""}} {
			bad := call(t, cp, "POST", "/api/v1/tokens", login, body)
			assert.Equal(t, http.StatusBadRequest, bad.Status, "%v: %s", body, bad.Raw)
		}
		assert.Len(t, call(t, cp, "GET", "/api/v1/tokens", login, nil).Body["tokens"], 1)

		// Only its user revokes it; after the 204 the very next request is refused.
		assert.Equal(t, http.StatusNotFound, call(t, cp, "DELETE", "/api/v1/tokens/"+id, other, nil).Status)
		assert.Equal(t, http.StatusOK, call(t, cp, "GET", "/api/v1/me", pat, nil).Status)
		require.Equal(t, http.StatusNoContent, call(t, cp, "DELETE", "/api/v1/tokens/"+id, login, nil).Status)
		gone := call(t, cp, "GET", "/api/v1/me", pat, nil)
		assert.Equal(t, http.StatusUnauthorized, gone.Status)
		assert.Equal(t, "invalid_token", gone.code())
		_, err = mcpSession(t, cp, pat)
		assert.Error(t, err, "a revoked token opens no MCP session")

		// An expired token is refused on its next request, as a revoked one, without
		// anyone revoking it. Its expiry is moved into the past in the database, as time
		// passing would.
		r = call(t, cp, "POST", "/api/v1/tokens", login, map[string]any{"name": "short", "expires_in_days": 1})
		require.Equal(t, http.StatusCreated, r.Status, "%s", r.Raw)
		short := r.str("token")
		require.Equal(t, http.StatusOK, call(t, cp, "GET", "/api/v1/me", short, nil).Status)
		require.Regexp(t, `^pat_[A-Za-z0-9_-]+$`, r.str("id"))
		_, err = rawDB(t, db).Exec(fmt.Sprintf("UPDATE access_tokens SET expires_at = %d WHERE id = '%s'",
			time.Now().Add(-time.Second).UnixMilli(), r.str("id")))
		require.NoError(t, err)
		expired := call(t, cp, "GET", "/api/v1/me", short, nil)
		assert.Equal(t, http.StatusUnauthorized, expired.Status, "%s", expired.Raw)
		assert.Equal(t, "invalid_token", expired.code())
		_, err = mcpSession(t, cp, short)
		assert.Error(t, err, "an expired token opens no MCP session")
	})
}
