package api

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"database/sql"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/controlplane/auth"
	"github.com/otelcol-svc/otelcol-svc/controlplane/service"
	"github.com/otelcol-svc/otelcol-svc/controlplane/store"
)

// The JSON-lines export streams every record, newest first, across the store's pages,
// and stops at its limit; the page answer names the next page only when it was full.
func TestAuditExportStreamsAcrossPages(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, t.TempDir(), "")
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	now := time.Now().UTC().Truncate(time.Millisecond)
	u := store.User{ID: "u_1", Email: "a@example.com", PasswordHash: "x", CreatedAt: now}
	const n = 1234
	require.NoError(t, st.InTx(ctx, func(tx *store.Tx) error {
		if err := tx.CreateUser(ctx, u); err != nil {
			return err
		}
		for i := range n {
			// Some share a millisecond: the cursor's id orders those.
			if err := tx.AddAudit(ctx, store.AuditEvent{AccountID: "u_1", ActorID: "u_1", Action: "token.create",
				At: now.Add(-time.Duration(i/3) * time.Millisecond)}); err != nil {
				return err
			}
		}
		return nil
	}))
	s := &Server{Svc: &service.Service{Store: st, Logger: slog.New(slog.DiscardHandler)}, Logger: slog.New(slog.DiscardHandler)}
	get := func(query string) *http.Response {
		r := httptest.NewRequest("GET", "/api/v1/audit"+query, nil)
		r = r.WithContext(context.WithValue(r.Context(), userKey{}, u))
		w := httptest.NewRecorder()
		s.accountAudit(w, r)
		return w.Result()
	}

	res := get("?format=jsonl")
	require.Equal(t, http.StatusOK, res.StatusCode)
	sc := bufio.NewScanner(res.Body)
	var prev time.Time
	lines := 0
	for sc.Scan() {
		var e auditEventJSON
		require.NoError(t, json.Unmarshal(sc.Bytes(), &e))
		at, err := time.Parse(time.RFC3339Nano, e.At)
		require.NoError(t, err)
		if lines > 0 {
			assert.False(t, at.After(prev), "newest first")
		}
		prev = at
		lines++
	}
	assert.Equal(t, n, lines, "every record (the export's own record comes after its first page)")

	res = get("?format=jsonl&limit=700")
	body, _ := io.ReadAll(res.Body)
	assert.Equal(t, 700, countLines(body), "stops at its limit")

	var page struct {
		Events     []auditEventJSON `json:"events"`
		NextBefore string           `json:"next_before"`
	}
	total := 0
	query := "?limit=500"
	for pages := 0; ; pages++ {
		require.Less(t, pages, 10)
		res = get(query)
		require.Equal(t, http.StatusOK, res.StatusCode)
		page.NextBefore = ""
		require.NoError(t, json.NewDecoder(res.Body).Decode(&page))
		total += len(page.Events)
		if page.NextBefore == "" {
			break
		}
		query = "?limit=500&before=" + page.NextBefore
	}
	assert.Equal(t, n+2, total, "every record once across the pages (the two exports' included)")
}

func countLines(b []byte) int {
	n := 0
	for _, c := range b {
		if c == '\n' {
			n++
		}
	}
	return n
}

// A console token reads the project's data at the receiver, so it is handed out only
// once its record is in the audit log: while the log cannot be written the dashboard's
// route answers 500 and the MCP tools fail, with no token in either answer; once it can,
// the token comes with its record.
func TestConsoleTokenNotHandedOutWithoutItsRecord(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := store.Open(ctx, dir, "")
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	now := time.Now()
	require.NoError(t, st.InTx(ctx, func(tx *store.Tx) error {
		if err := tx.CreateUser(ctx, store.User{ID: "u_1", Email: "u_1@example.com", PasswordHash: "x", CreatedAt: now}); err != nil {
			return err
		}
		return tx.CreateProject(ctx, store.Project{ID: "p_1", Name: "one", OwnerID: "u_1", Version: 1, CreatedAt: now, UpdatedAt: now})
	}))
	tokens, err := auth.NewTokens([]byte("test-secret-test-secret-test-secret-0123"), time.Hour)
	require.NoError(t, err)
	_, priv, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	logger := slog.New(slog.DiscardHandler)
	s := &Server{Tokens: tokens, Logger: logger, Svc: &service.Service{Store: st, Logger: logger,
		ConsoleKey: priv, ReceiverURL: testReceiverURL}}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	tok, err := tokens.Issue("u_1", "u_1@example.com", now)
	require.NoError(t, err)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp",
			HTTPClient: &http.Client{Transport: bearerTransport{tok}, Timeout: 10 * time.Second}, MaxRetries: -1}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	issue := func() (int, string) {
		req, _ := http.NewRequest("POST", srv.URL+"/api/v1/projects/p_1/console-token", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	tool := func(name string) (bool, string) {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: json.RawMessage(`{"project_id": "p_1"}`)})
		require.NoError(t, err)
		b, _ := json.Marshal(res)
		return res.IsError, string(b)
	}
	records := func() int {
		var n int
		require.NoError(t, st.InTx(ctx, func(tx *store.Tx) error {
			evs, err := tx.AuditEvents(ctx, store.AuditQuery{ProjectID: "p_1", Action: "console.token"})
			n = len(evs)
			return err
		}))
		return n
	}

	// The audit log refuses writes, as a full disk or a lost database would.
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "controlplane.db")+"?_pragma=busy_timeout(5000)")
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	_, err = db.Exec(`CREATE TRIGGER audit_down BEFORE INSERT ON audit_events BEGIN SELECT RAISE(ABORT, 'audit log down'); END`)
	require.NoError(t, err)
	code, body := issue()
	assert.Equal(t, http.StatusInternalServerError, code, body)
	assert.NotContains(t, body, `"token"`)
	for _, name := range []string{"get_console_token", "console_recent_events"} {
		failed, body := tool(name)
		assert.True(t, failed, "%s: %s", name, body)
		assert.NotContains(t, body, "Bearer ", name)
		assert.NotContains(t, body, `"console_token"`, name)
	}

	_, err = db.Exec(`DROP TRIGGER audit_down`)
	require.NoError(t, err)
	code, body = issue()
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, `"token"`)
	failed, body := tool("console_recent_events")
	require.False(t, failed, body)
	assert.Equal(t, 2, records(), "each token handed out is recorded, the refused ones are not")
}
