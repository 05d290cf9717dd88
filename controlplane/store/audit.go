package store

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"reflect"
	"sort"
	"strings"
	"time"
)

// AuditEvent is one record of the audit log: who (ActorID, ActorEmail) did Action to
// Target in a project (ProjectID) or to their account (AccountID), with which credential
// (CredKind, CredID), from which client address, and what changed. Changes holds the
// fields that changed, each {"from", "to"}, secrets already redacted (Change).
type AuditEvent struct {
	ID         string
	At         time.Time
	ProjectID  string
	AccountID  string
	ActorID    string
	ActorEmail string
	CredKind   string
	CredID     string
	Action     string
	Target     string
	Addr       string
	Changes    json.RawMessage
	// Dedupe, when set, makes a second record of the same action a no-op.
	Dedupe string

	written bool
}

// Credential kinds an audit record names.
const (
	CredSession    = "session"
	CredLoginToken = "login_token"
	CredPAT        = "personal_access_token"
	CredOAuth      = "oauth_grant"
	CredConsole    = "console_token"
	CredProjectKey = "project_key"
)

// MaxAuditLimit bounds one page of the log.
const MaxAuditLimit = 500

type auditKey struct{}

// WithAudit marks ctx as carrying a change to record: the first transaction run with it
// that writes anything (InTx) writes ev too, before committing, so the change and its
// record commit together or not at all. Fill ev's target and changes inside that
// transaction (SetTarget, Change) when only the change knows them.
func WithAudit(ctx context.Context, ev *AuditEvent) context.Context {
	return context.WithValue(ctx, auditKey{}, ev)
}

// AuditOf is the change ctx carries, nil when none; its methods accept nil.
func AuditOf(ctx context.Context) *AuditEvent {
	ev, _ := ctx.Value(auditKey{}).(*AuditEvent)
	return ev
}

// SetTarget names what the change acted on, when only the change knows it (a new id).
func (e *AuditEvent) SetTarget(id string) {
	if e != nil {
		e.Target = id
	}
}

// SetProject names the project a change made (a new project's id): the record is the
// project's, and stays the account's too.
func (e *AuditEvent) SetProject(id string) {
	if e != nil {
		e.ProjectID, e.Target = id, id
	}
}

// SetAction names the action when the change knows it better than the route (adding a
// member that turns out to be an invitation).
func (e *AuditEvent) SetAction(action string) {
	if e != nil {
		e.Action = action
	}
}

// Change records the fields of a configuration that differ between before and after
// (nil before: created; nil after: removed), as {"field": {"from", "to"}} with every
// secret redacted (redact): the log is readable by admins who must not learn a secret
// from it, and it is kept for months.
func (e *AuditEvent) Change(before, after any) {
	if e == nil {
		return
	}
	if b, err := json.Marshal(Diff(before, after)); err == nil && string(b) != "{}" {
		e.Changes = b
	}
}

// Diff is the fields of before and after (any JSON-encodable objects) that differ,
// redacted; Change records it.
func Diff(before, after any) map[string]map[string]any {
	from, to := asObject(before), asObject(after)
	out := map[string]map[string]any{}
	keys := make([]string, 0, len(from)+len(to))
	for k := range from {
		keys = append(keys, k)
	}
	for k := range to {
		if _, ok := from[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		f, fok := from[k]
		t, tok := to[k]
		if fok && tok && reflect.DeepEqual(f, t) {
			continue
		}
		c := map[string]any{}
		if fok {
			c["from"] = redact(k, f)
		}
		if tok {
			c["to"] = redact(k, t)
		}
		if fok && tok && reflect.DeepEqual(c["from"], c["to"]) {
			// Two secrets that differ redact alike: say it changed without either.
			c = map[string]any{"from": Redacted, "to": Redacted + " (changed)"}
		}
		out[k] = c
	}
	return out
}

func asObject(v any) map[string]any {
	if v == nil || (reflect.ValueOf(v).Kind() == reflect.Pointer && reflect.ValueOf(v).IsNil()) {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var m map[string]any
	if json.Unmarshal(b, &m) != nil {
		return map[string]any{"value": Redacted}
	}
	return m
}

// Redacted stands for a secret in the audit log.
const Redacted = "[redacted]"

// secretName reports a field whose value is a secret: tokens, signing secrets, passwords,
// key hashes and request headers (which carry Authorization), by name, so that a field
// added later with such a name is redacted without a change here.
func secretName(k string) bool {
	k = strings.ToLower(k)
	for _, s := range []string{"secret", "token", "password", "hash", "authorization", "headers", "cookie", "private", "credential", "api_key", "apikey"} {
		if strings.Contains(k, s) {
			return true
		}
	}
	return false
}

// redact replaces the secrets in v (the value of field k): secret fields whole, and in
// URLs what may hold one (user info, path, query: a Slack webhook's path is its
// secret), which are kept only as a short digest so a change still shows.
func redact(k string, v any) any {
	if secretName(k) {
		if v == nil || v == "" {
			return v
		}
		return Redacted
	}
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for kk, vv := range x {
			out[kk] = redact(kk, vv)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, vv := range x {
			out[i] = redact(k, vv)
		}
		return out
	case string:
		if strings.HasSuffix(strings.ToLower(k), "url") {
			return redactURL(x)
		}
		if writtenName(k) && x != "" {
			return digest(x)
		}
	}
	return v
}

// writtenName reports a field whose value is code or text a person writes (pipeline
// transforms, message templates), where a literal may hold a secret no field name
// announces (a token compared in OTTL, a key in a link): shown as a digest, which tells
// which statement changed; the pipeline's versions show the text to those who may read it.
func writtenName(k string) bool {
	k = strings.ToLower(k)
	return k == "transforms" || strings.HasSuffix(k, "template")
}

func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "[as written, #" + hex.EncodeToString(sum[:4]) + "]"
}

func redactURL(s string) string {
	if s == "" {
		return s
	}
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return Redacted
	}
	rest := strings.TrimPrefix(s, u.Scheme+"://")
	rest = rest[min(len(rest), strings.Index(rest, u.Host)+len(u.Host)):]
	if rest == "" && u.User == nil {
		return u.Scheme + "://" + u.Host
	}
	sum := sha256.Sum256([]byte(s))
	return u.Scheme + "://" + u.Host + "/… (#" + hex.EncodeToString(sum[:4]) + ")"
}

// AddAudit writes a record; one whose Dedupe was recorded before is dropped.
func (t *Tx) AddAudit(ctx context.Context, ev AuditEvent) error {
	if ev.At.IsZero() {
		ev.At = time.Now()
	}
	if ev.ID == "" {
		ev.ID = newAuditID(ev.At)
	}
	if ev.ActorEmail == "" && ev.ActorID != "" {
		// Kept with the record: the log names who acted after their account is gone.
		if u, err := t.UserByID(ctx, ev.ActorID); err == nil {
			ev.ActorEmail = u.Email
		}
	}
	var dedupe any
	if ev.Dedupe != "" {
		dedupe = ev.Dedupe
	}
	_, err := t.exec(ctx, `INSERT INTO audit_events (id, at, project_id, account_id, actor_id, actor_email, cred_kind, cred_id, action, target, addr, changes, dedupe)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
		ev.ID, ev.At.UnixMilli(), ev.ProjectID, ev.AccountID, ev.ActorID, ev.ActorEmail, ev.CredKind, ev.CredID,
		ev.Action, ev.Target, ev.Addr, string(ev.Changes), dedupe)
	return err
}

// newAuditID starts with the time in nanoseconds (fixed width), so records of the same
// millisecond (at is kept in ms) list in the order they were made; the random rest keeps
// ids unique across control planes.
func newAuditID(at time.Time) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return fmt.Sprintf("ae_%016x%s", at.UnixNano(), hex.EncodeToString(b))
}

// writePendingAudit writes the change ctx carries (WithAudit) in tx, once, when tx wrote
// something: a transaction that only read (checking access before the change) does not
// take it.
func (t *Tx) writePendingAudit(ctx context.Context) error {
	ev := AuditOf(ctx)
	if ev == nil || ev.written || !t.wrote || ev.Action == "" {
		return nil
	}
	if err := t.AddAudit(ctx, *ev); err != nil {
		return err
	}
	ev.written = true
	return nil
}

// AuditRead writes the record ctx carries (WithAudit) in tx now, for a transaction whose
// work is a read that hands out data (a console token) and so writes nothing of its own:
// what it hands out is handed out only once the record is in, and a record that cannot
// be written refuses it.
func (t *Tx) AuditRead(ctx context.Context) error {
	t.wrote = true
	return t.writePendingAudit(ctx)
}

// AuditCursor is where a page of the log ends: the next page is older than it.
type AuditCursor struct {
	At int64 // unix ms
	ID string
}

// AuditQuery selects a project's log (ProjectID) or an account's (AccountID).
type AuditQuery struct {
	ProjectID string
	AccountID string
	Before    AuditCursor // zero: from the newest
	Action    string      // "" all; "sink" matches sink.create, sink.update...; "sink.create" only it
	Limit     int
}

// AuditEvents lists records newest first, at most q.Limit (bounded by MaxAuditLimit).
func (t *Tx) AuditEvents(ctx context.Context, q AuditQuery) ([]AuditEvent, error) {
	limit := q.Limit
	if limit <= 0 || limit > MaxAuditLimit {
		limit = MaxAuditLimit
	}
	query := `SELECT id, at, project_id, account_id, actor_id, actor_email, cred_kind, cred_id, action, target, addr, changes FROM audit_events WHERE `
	var args []any
	if q.ProjectID != "" {
		query += `project_id = ?`
		args = append(args, q.ProjectID)
	} else {
		query += `account_id = ? AND account_id <> ''`
		args = append(args, q.AccountID)
	}
	if q.Before.At > 0 {
		query += ` AND (at < ? OR (at = ? AND id < ?))`
		args = append(args, q.Before.At, q.Before.At, q.Before.ID)
	}
	if q.Action != "" {
		prefix := q.Action + "."
		query += ` AND (action = ? OR substr(action, 1, ?) = ?)`
		args = append(args, q.Action, len(prefix), prefix)
	}
	query += ` ORDER BY at DESC, id DESC LIMIT ?`
	args = append(args, limit)
	rows, err := t.query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []AuditEvent
	for rows.Next() {
		var ev AuditEvent
		var at int64
		var changes string
		if err := rows.Scan(&ev.ID, &at, &ev.ProjectID, &ev.AccountID, &ev.ActorID, &ev.ActorEmail, &ev.CredKind, &ev.CredID,
			&ev.Action, &ev.Target, &ev.Addr, &changes); err != nil {
			return nil, err
		}
		ev.At = ms(at)
		if changes != "" {
			ev.Changes = json.RawMessage(changes)
		}
		out = append(out, ev)
	}
	return out, rows.Err()
}

// SweepAudit deletes the records older than before (the retention), at most batch of
// them, and says how many went: a long backlog is swept in several short transactions.
func (s *Store) SweepAudit(ctx context.Context, before time.Time, batch int) (int64, error) {
	res, err := s.db.ExecContext(ctx, s.rebind(`DELETE FROM audit_events WHERE id IN (SELECT id FROM audit_events WHERE at < ? LIMIT ?)`),
		before.UnixMilli(), batch)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}
