package api

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
