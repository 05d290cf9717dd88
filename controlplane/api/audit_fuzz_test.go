package api

import (
	"net/url"
	"testing"
	"time"

	"github.com/otelcol-svc/otelcol-svc/controlplane/store"
)

// FuzzParseAuditQuery: whatever the query string, the parser answers without panicking,
// bounds the page (1..500, an export 1..50,000), and what it accepts is a valid cursor
// and an action made only of the names' letters, which the store uses as a prefix.
func FuzzParseAuditQuery(f *testing.F) {
	for _, s := range []string{"", "limit=10", "limit=0", "limit=501", "format=jsonl&limit=50000", "before=1700000000000.ae_0a",
		"before=1.x.y", "before=-1.a", "action=sink", "action=sink.", "action=%25", "format=csv", "limit=9999999999999999999", "before=.", "action=a_b.c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		v, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		q, e := parseAuditQuery(v)
		if e != nil {
			if e.Status != 400 {
				t.Fatalf("status %d for %q", e.Status, raw)
			}
			return
		}
		most := store.MaxAuditLimit
		if q.jsonl {
			most = maxAuditExport
		}
		if q.Limit < 1 || q.Limit > most {
			t.Fatalf("limit %d for %q", q.Limit, raw)
		}
		if q.Before != (store.AuditCursor{}) {
			if q.Before.At <= 0 || q.Before.ID == "" {
				t.Fatalf("cursor %+v for %q", q.Before, raw)
			}
			if c, ok := parseCursor(cursorOf(store.AuditEvent{ID: q.Before.ID, At: msTime(q.Before.At)})); !ok || c != q.Before {
				t.Fatalf("cursor %+v does not round-trip", q.Before)
			}
		}
		for _, r := range q.Action {
			if (r < 'a' || r > 'z') && r != '_' && r != '.' {
				t.Fatalf("action %q for %q", q.Action, raw)
			}
		}
	})
}

func msTime(ms int64) time.Time { return time.UnixMilli(ms) }
