package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/otelcol-svc/otelcol-svc/controlplane/service"
	"github.com/otelcol-svc/otelcol-svc/controlplane/store"
	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
)

// The audit log's API (docs/contract.md, "Audit log"): a project's log for its owner and
// admins, the caller's own account log, newest first, in pages by cursor or exported as
// JSON lines.

const (
	defaultAuditLimit = 100
	// maxAuditExport bounds one JSON-lines export: a retention's worth of a busy project
	// is exported in several, each naming where the next starts.
	maxAuditExport = 50000
)

// actor is who r acts as, for the audit log.
func (s *Server) actor(r *http.Request) service.Actor {
	u, _ := r.Context().Value(userKey{}).(store.User)
	c := currentCredential(r.Context())
	a := service.Actor{UserID: u.ID, Email: u.Email, CredID: c.ID, CredKind: service.CredentialKind(c.ID), Addr: s.clientAddr(r)}
	return a
}

// audited is r's context carrying the record of the change the handler is about to make
// to its project ({id} in the path) or, outside a project, to the caller's account. The
// change's transaction writes the record (service.Audited).
func (s *Server) audited(r *http.Request, action, target string) context.Context {
	return service.Audited(r.Context(), s.actor(r), r.PathValue("id"), action, target)
}

// auditQuery is what a request asks of the log.
type auditQuery struct {
	store.AuditQuery
	jsonl bool
}

// parseAuditQuery reads limit (1..500, JSON lines up to 50,000), before (a cursor from a
// previous page), action (a name or its prefix) and format (json or jsonl).
func parseAuditQuery(v url.Values) (auditQuery, *apierror.Error) {
	var q auditQuery
	switch f := v.Get("format"); f {
	case "", "json":
	case "jsonl":
		q.jsonl = true
	default:
		return q, badQuery(fmt.Sprintf("format must be json or jsonl, not %q", clip(f, 32)))
	}
	q.Limit = defaultAuditLimit
	most := store.MaxAuditLimit
	if q.jsonl {
		q.Limit, most = maxAuditExport, maxAuditExport
	}
	if l := v.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > most {
			return q, badQuery(fmt.Sprintf("limit must be a whole number from 1 to %d", most))
		}
		q.Limit = n
	}
	if b := v.Get("before"); b != "" {
		c, ok := parseCursor(b)
		if !ok {
			return q, badQuery("before must be a cursor from a previous page's next_before")
		}
		q.Before = c
	}
	if a := v.Get("action"); a != "" {
		if len(a) > 64 || strings.Trim(a, "abcdefghijklmnopqrstuvwxyz_.") != "" {
			return q, badQuery("action must be an action name or its start, such as sink or sink.create")
		}
		q.Action = strings.TrimSuffix(a, ".")
	}
	return q, nil
}

func badQuery(msg string) *apierror.Error {
	return service.BadBody(msg)
}

// A cursor is the last record's time (unix ms) and id: "1700000000000.ae_…".
func cursorOf(ev store.AuditEvent) string {
	return strconv.FormatInt(ev.At.UnixMilli(), 10) + "." + ev.ID
}

func parseCursor(s string) (store.AuditCursor, bool) {
	at, id, ok := strings.Cut(s, ".")
	n, err := strconv.ParseInt(at, 10, 64)
	if !ok || err != nil || n <= 0 || len(id) == 0 || len(id) > 64 || strings.Trim(id, "abcdefghijklmnopqrstuvwxyz0123456789_") != "" {
		return store.AuditCursor{}, false
	}
	return store.AuditCursor{At: n, ID: id}, true
}

type auditEventJSON struct {
	At         string          `json:"at"`
	Actor      auditActorJSON  `json:"actor"`
	Credential *auditCredJSON  `json:"credential"`
	Action     string          `json:"action"`
	Target     string          `json:"target"`
	From       string          `json:"from"`
	Changes    json.RawMessage `json:"changes"`
	ProjectID  string          `json:"project_id,omitempty"`
}

type auditActorJSON struct {
	ID    string `json:"id"`
	Email string `json:"email"`
}

type auditCredJSON struct {
	Kind string `json:"kind"`
	ID   string `json:"id,omitempty"`
}

func auditJSON(ev store.AuditEvent) auditEventJSON {
	out := auditEventJSON{At: ev.At.UTC().Format(time.RFC3339Nano), Actor: auditActorJSON{ID: ev.ActorID, Email: ev.ActorEmail},
		Action: ev.Action, Target: ev.Target, From: ev.Addr, Changes: ev.Changes, ProjectID: ev.ProjectID}
	if ev.CredKind != "" || ev.CredID != "" {
		out.Credential = &auditCredJSON{Kind: ev.CredKind, ID: ev.CredID}
	}
	if out.Changes == nil {
		out.Changes = json.RawMessage("{}")
	}
	return out
}

// projectAudit serves GET /api/v1/projects/{id}/audit.
func (s *Server) projectAudit(w http.ResponseWriter, r *http.Request) {
	s.serveAudit(w, r, func(ctx context.Context, q store.AuditQuery) ([]store.AuditEvent, error) {
		return s.Svc.AuditLog(ctx, currentUser(r).ID, r.PathValue("id"), q)
	})
}

// accountAudit serves GET /api/v1/audit: the caller's changes to their own account.
func (s *Server) accountAudit(w http.ResponseWriter, r *http.Request) {
	s.serveAudit(w, r, func(ctx context.Context, q store.AuditQuery) ([]store.AuditEvent, error) {
		return s.Svc.AccountAuditLog(ctx, currentUser(r).ID, q)
	})
}

func (s *Server) serveAudit(w http.ResponseWriter, r *http.Request, list func(context.Context, store.AuditQuery) ([]store.AuditEvent, error)) {
	q, e := parseAuditQuery(r.URL.Query())
	if e != nil {
		fail(w, e)
		return
	}
	if !q.jsonl {
		evs, err := list(r.Context(), q.AuditQuery)
		s.respond(w, r, err, http.StatusOK, func() any {
			out := make([]auditEventJSON, 0, len(evs))
			for _, ev := range evs {
				out = append(out, auditJSON(ev))
			}
			ans := map[string]any{"events": out}
			if len(evs) == q.Limit {
				ans["next_before"] = cursorOf(evs[len(evs)-1])
			}
			return ans
		})
		return
	}
	// JSON lines, streamed a page at a time: the first page answers for access (403, 404)
	// before anything is written; the export itself is recorded, as the data it reads is
	// who did what.
	left := q.Limit
	page := q.AuditQuery
	page.Limit = min(left, store.MaxAuditLimit)
	evs, err := list(r.Context(), page)
	if err != nil {
		s.respond(w, r, err, 0, nil)
		return
	}
	if err := s.Svc.RecordAudit(r.Context(), s.actor(r), r.PathValue("id"), "audit.export", ""); err != nil {
		s.internal(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Content-Disposition", `attachment; filename="audit.jsonl"`)
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	flusher, _ := w.(http.Flusher)
	for {
		for _, ev := range evs {
			if enc.Encode(auditJSON(ev)) != nil {
				return // the client went away
			}
		}
		left -= len(evs)
		if len(evs) < page.Limit || left <= 0 {
			return
		}
		if flusher != nil {
			flusher.Flush()
		}
		page.Before = store.AuditCursor{At: evs[len(evs)-1].At.UnixMilli(), ID: evs[len(evs)-1].ID}
		page.Limit = min(left, store.MaxAuditLimit)
		if evs, err = list(r.Context(), page); err != nil {
			s.Logger.Warn("audit export ended early", "error", err)
			return
		}
	}
}

// auditAction is what a route records: the action, the path value naming its target
// ("" when the change names it: a new id), and whether it is a read that changes no row
// (a console token that reads data), which IssueConsoleToken records in the transaction
// that mints the token, before handing it out.
type auditAction struct {
	action, target string
	read           bool
	// account: the record is the caller's account's as well as the project's (creating
	// and deleting projects: the project's own log is gone with it).
	account bool
}

// auditActions are the routes that change a project or an account, or hand out reads of
// a project's data, by method and pattern (as route registers them): one table, so that
// what is recorded can be read in one place. A change records itself in its own
// transaction (store.WithAudit); a route not listed records nothing.
var auditActions = map[string]auditAction{
	"POST /api/v1/projects":                                        {action: "project.create", account: true},
	"PATCH /api/v1/projects/{id}":                                  {action: "project.settings", target: "id"},
	"DELETE /api/v1/projects/{id}":                                 {action: "project.delete", target: "id", account: true},
	"POST /api/v1/projects/{id}/keys":                              {action: "key.create"},
	"PATCH /api/v1/projects/{id}/keys/{key_id}":                    {action: "key.scopes", target: "key_id"},
	"DELETE /api/v1/projects/{id}/keys/{key_id}":                   {action: "key.revoke", target: "key_id"},
	"POST /api/v1/projects/{id}/members":                           {action: "member.add"},
	"DELETE /api/v1/projects/{id}/members/{user_id}":               {action: "member.remove", target: "user_id"},
	"DELETE /api/v1/projects/{id}/invitations/{invitation_id}":     {action: "invitation.revoke", target: "invitation_id"},
	"PUT /api/v1/projects/{id}/pipeline":                           {action: "pipeline.update"},
	"PATCH /api/v1/projects/{id}/pipeline":                         {action: "pipeline.update"},
	"POST /api/v1/projects/{id}/pipeline/rotate-secret":            {action: "pipeline.secret.rotate"},
	"POST /api/v1/projects/{id}/pipeline/versions/{n}/restore":     {action: "pipeline.restore", target: "n"},
	"POST /api/v1/projects/{id}/pipeline/backlog":                  {action: "backlog.start"},
	"POST /api/v1/projects/{id}/sinks":                             {action: "sink.create"},
	"PATCH /api/v1/projects/{id}/sinks/{sink_id}":                  {action: "sink.update", target: "sink_id"},
	"DELETE /api/v1/projects/{id}/sinks/{sink_id}":                 {action: "sink.delete", target: "sink_id"},
	"POST /api/v1/projects/{id}/sources":                           {action: "source.create"},
	"DELETE /api/v1/projects/{id}/sources/{source_id}":             {action: "source.delete", target: "source_id"},
	"POST /api/v1/projects/{id}/sources/{source_id}/rotate-secret": {action: "source.secret.rotate", target: "source_id"},
	"POST /api/v1/projects/{id}/console-token":                     {action: "console.token", read: true},
	"POST /api/v1/tokens":                                          {action: "token.create"},
	"DELETE /api/v1/tokens/{token_id}":                             {action: "token.revoke", target: "token_id"},
	"POST /api/v1/auth/logout-all":                                 {action: "logout_all"},
	"PUT /api/v1/me/password":                                      {action: "password.change"},
	"POST /api/v1/oauth/requests/{id}/approve":                     {action: "oauth_grant.create"},
	"DELETE /api/v1/oauth/grants/{id}":                             {action: "oauth_grant.revoke", target: "id"},
}

// withAudit serves h with the record of its route's action (auditActions) in the
// context, for the authenticated caller: a change writes it in its transaction, a
// console token before it is handed out, so a record that cannot be written refuses
// either.
func (s *Server) withAudit(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		a, ok := auditActions[r.Method+" "+r.Pattern]
		if !ok {
			h(w, r)
			return
		}
		target := ""
		if a.target != "" {
			target = r.PathValue(a.target)
		}
		project := r.PathValue("id")
		if strings.HasPrefix(r.Pattern, "/api/v1/oauth/") {
			project = "" // an OAuth request's or grant's id, the account's
		}
		actor := s.actor(r)
		ctx := service.Audited(r.Context(), actor, project, a.action, target)
		if a.account {
			store.AuditOf(ctx).AccountID = actor.UserID
		}
		h(w, r.WithContext(ctx))
	}
}
