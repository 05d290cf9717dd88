package main

import (
	"context"
	"database/sql"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sessionRows reads the ids and stored hashes of the sessions in the stack's database,
// as an operator would: the API never names a session.
func sessionRows(t *testing.T, db map[string]string) map[string]string {
	t.Helper()
	driver, dsn := "pgx", db["DATABASE_URL"]
	if dsn == "" {
		driver, dsn = "sqlite", "file:"+filepath.Join(db["SVC_DATA_DIR"], "controlplane.db")+"?_pragma=busy_timeout(5000)"
	}
	conn, err := sql.Open(driver, dsn)
	require.NoError(t, err)
	defer conn.Close()
	rows, err := conn.QueryContext(context.Background(), `SELECT id, hash FROM sessions`)
	require.NoError(t, err)
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var id, hash string
		require.NoError(t, rows.Scan(&id, &hash))
		out[id] = hash
	}
	require.NoError(t, rows.Err())
	return out
}

// A dashboard session is no personal access token: the token listing never shows it
// (through the session itself or a Bearer login), and DELETE /api/v1/tokens/{id} with
// the session's id is "not found" and leaves the session working, whoever asks.
func TestSessionsAreNotAccessTokens(t *testing.T) {
	databases(t, func(t *testing.T, db map[string]string) {
		s := startStack(t, db)
		cp := s.cp.URL
		b := newBrowser(t, cp)
		c := sessionCookie(t, b.signup("sessions@example.com"))
		login := call(t, cp, "POST", "/api/v1/auth/login", "", map[string]string{"email": "sessions@example.com", "password": "correct horse battery"})
		require.Equal(t, http.StatusOK, login.Status, "%s", login.Raw)
		bearer := login.str("token")
		other, _ := s.signup(t, "other@example.com")

		pat := call(t, cp, "POST", "/api/v1/tokens", bearer, map[string]any{"name": "ci"})
		require.Equal(t, http.StatusCreated, pat.Status, "%s", pat.Raw)

		rows := sessionRows(t, db)
		require.Len(t, rows, 1, "one browser logged in")
		var sessionID string
		for id, hash := range rows {
			sessionID = id
			assert.NotContains(t, hash, c.Value, "the session's secret is stored only as a hash")
		}

		for name, list := range map[string]reply{
			"bearer":  call(t, cp, "GET", "/api/v1/tokens", bearer, nil),
			"session": b.do("GET", "/api/v1/tokens", nil, false),
		} {
			require.Equal(t, http.StatusOK, list.Status, "%s: %s", name, list.Raw)
			tokens, _ := list.Body["tokens"].([]any)
			require.Len(t, tokens, 1, "%s: only the personal access token: %s", name, list.Raw)
			assert.Equal(t, pat.str("id"), tokens[0].(map[string]any)["id"], name)
			assert.NotContains(t, string(list.Raw), sessionID, name)
		}

		for name, r := range map[string]reply{
			"its user (bearer)":  call(t, cp, "DELETE", "/api/v1/tokens/"+sessionID, bearer, nil),
			"its user (session)": b.do("DELETE", "/api/v1/tokens/"+sessionID, nil, true),
			"another user":       call(t, cp, "DELETE", "/api/v1/tokens/"+sessionID, other, nil),
		} {
			assert.Equal(t, http.StatusNotFound, r.Status, "%s: %s", name, r.Raw)
			assert.Equal(t, "not_found", r.code(), name)
		}
		me := b.do("GET", "/api/v1/me", nil, false)
		assert.Equal(t, http.StatusOK, me.Status, "the session still works: %s", me.Raw)
		assert.Contains(t, sessionRows(t, db), sessionID)
	})
}
