package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/otelcol-svc/otelcol-svc/controlplane/store"
	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
)

// Actor is who a request acts as, for the audit log: the user, the credential they came
// with (kind and id) and their client address (through trusted proxies).
type Actor struct {
	UserID   string
	Email    string
	CredKind string
	CredID   string
	Addr     string
}

// CredentialKind names the kind of a credential by its id's prefix, as the ids are made
// (sessions ses_, personal access tokens pat_, OAuth grants ogr_, login tokens lgn_).
func CredentialKind(id string) string {
	switch {
	case strings.HasPrefix(id, "ses_"):
		return store.CredSession
	case strings.HasPrefix(id, "pat_"):
		return store.CredPAT
	case strings.HasPrefix(id, "ogr_"):
		return store.CredOAuth
	case strings.HasPrefix(id, "lgn_"):
		return store.CredLoginToken
	}
	return ""
}

// Audited returns ctx carrying the record of a change to a project (projectID) or, with
// projectID "", to the actor's own account; the transaction that makes the change writes
// it (store.WithAudit), so a change that does not commit leaves no record and a record
// that cannot be written stops the change.
func Audited(ctx context.Context, a Actor, projectID, action, target string) context.Context {
	ev := &store.AuditEvent{ProjectID: projectID, ActorID: a.UserID, ActorEmail: a.Email,
		CredKind: a.CredKind, CredID: a.CredID, Action: action, Target: target, Addr: a.Addr}
	if projectID == "" {
		ev.AccountID = a.UserID
	}
	return store.WithAudit(ctx, ev)
}

// RecordAudit writes a record of something that changes no row of its own (a console
// token issued for reading, an export), in its own transaction.
func (s *Service) RecordAudit(ctx context.Context, a Actor, projectID, action, target string) error {
	return s.Store.InTx(ctx, func(tx *store.Tx) error {
		ev := store.AuditEvent{ProjectID: projectID, ActorID: a.UserID, ActorEmail: a.Email,
			CredKind: a.CredKind, CredID: a.CredID, Action: action, Target: target, Addr: a.Addr}
		if projectID == "" {
			ev.AccountID = a.UserID
		}
		return tx.AddAudit(ctx, ev)
	})
}

// AuditLog is a project's audit log, for its owner and admins: it names who did what and
// from where, which members are not shown.
func (s *Service) AuditLog(ctx context.Context, userID, projectID string, q store.AuditQuery) (evs []store.AuditEvent, err error) {
	err = s.InProject(ctx, userID, projectID, Read, func(ctx context.Context, tx *store.Tx, p store.Project, role string, _ *mirror.Store) error {
		if role == store.RoleMember {
			return apierror.New(http.StatusForbidden, apierror.Forbidden, "only the project's owner and admins can read its audit log")
		}
		q.ProjectID, q.AccountID = p.ID, ""
		evs, err = tx.AuditEvents(ctx, q)
		return err
	})
	return evs, err
}

// AccountAuditLog is the changes the user made to their own account.
func (s *Service) AccountAuditLog(ctx context.Context, userID string, q store.AuditQuery) (evs []store.AuditEvent, err error) {
	if LimitsOf(ctx).Projects != nil { // its records name projects (a token's, for one)
		return nil, AccountRefusal
	}
	q.ProjectID, q.AccountID = "", userID
	err = s.Store.InTx(ctx, func(tx *store.Tx) error {
		evs, err = tx.AuditEvents(ctx, q)
		return err
	})
	return evs, err
}

// SweepAuditLoop deletes the records older than retention, now and every interval,
// until ctx ends.
func (s *Service) SweepAuditLoop(ctx context.Context, retention, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		for {
			n, err := s.Store.SweepAudit(ctx, time.Now().Add(-retention), 5000)
			if err != nil {
				if ctx.Err() == nil {
					s.Logger.Warn("audit log sweep failed", "error", err)
				}
				break
			}
			if n < 5000 {
				break
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// AuditConsumer is the durable consumer of the audit stream that every control plane
// shares: each record is taken by one of them, and stays on the stream until one has
// committed it, so records published while no control plane runs are written at the next
// start.
const AuditConsumer = "svc-audit-controlplane"

// auditRetry is how long a record that could not be written waits before it comes again.
const auditRetry = 5 * time.Second

// AuditWatch is the control plane's share of the audit stream's consumer.
type AuditWatch struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// Unsubscribe stops taking records; a record being written is finished first.
func (w *AuditWatch) Unsubscribe() error {
	w.cancel()
	<-w.done
	return nil
}

// WatchReplays writes the audit records the receivers publish on the audit stream
// (svc-audit): the replays the console queues and the reads made with a project key or a
// console token, which reach the receivers and never the control plane. A record is
// acknowledged once committed; one whose write fails comes again, and one written before
// (a redelivery, or a receiver that published it again) is dropped by its id.
//
// Until the stream and consumer can be made (JetStream not yet up) it tries again in the
// background: the control plane starts without them.
func (s *Service) WatchReplays(nc *nats.Conn) (*AuditWatch, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &AuditWatch{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		s.consumeAudit(ctx, js)
	}()
	return w, nil
}

func (s *Service) consumeAudit(ctx context.Context, js jetstream.JetStream) {
	wait := time.Second
	for {
		cc, err := s.startAuditConsumer(ctx, js)
		if err == nil {
			<-ctx.Done()
			cc.Drain()
			<-cc.Closed()
			return
		}
		s.Logger.Warn("the audit stream cannot be read yet; retrying", "error", err, "retry_in", wait)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		wait = min(2*wait, time.Minute)
	}
}

func (s *Service) startAuditConsumer(ctx context.Context, js jetstream.JetStream) (jetstream.ConsumeContext, error) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	// Created if missing and otherwise left as the receivers made it: a reader must not
	// fight the writers over its limits.
	if err := streams.Create(cctx, js, streams.AuditConfig(1)); err != nil {
		return nil, err
	}
	c, err := js.CreateOrUpdateConsumer(cctx, streams.AuditStream, jetstream.ConsumerConfig{
		Durable: AuditConsumer, AckPolicy: jetstream.AckExplicitPolicy, AckWait: 30 * time.Second,
		MaxAckPending: 256, DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return nil, err
	}
	return c.Consume(func(m jetstream.Msg) { s.auditMsg(ctx, m) })
}

func (s *Service) auditMsg(ctx context.Context, m jetstream.Msg) {
	project, r, ok := parseAuditMsg(m.Subject(), m.Data())
	if !ok {
		s.Logger.Warn("an audit stream message is not a record; dropped", "subject", m.Subject())
		_ = m.Term()
		return
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := s.recordReceived(wctx, project, r); err != nil {
		s.Logger.Warn("writing a receiver's audit record failed; it comes again", "project_id", project, "action", r.Action, "error", err)
		_ = m.NakWithDelay(auditRetry)
		return
	}
	_ = m.Ack()
}

// parseAuditMsg reads a message of the audit stream. The project is the subject's: a
// record cannot place itself in another project's log.
func parseAuditMsg(subject string, data []byte) (project string, r streams.AuditRecord, ok bool) {
	project = streams.AuditProject(subject)
	if project == "" || len(data) > 64<<10 || json.Unmarshal(data, &r) != nil || r.ID == "" || len(r.ID) > 512 ||
		!streams.IsAuditAction(r.Action) {
		return "", streams.AuditRecord{}, false
	}
	return project, r, true
}

// recordReceived writes a receiver's record in project's log, once per record id.
func (s *Service) recordReceived(ctx context.Context, project string, r streams.AuditRecord) error {
	return s.Store.InTx(ctx, func(tx *store.Tx) error {
		ev := store.AuditEvent{ProjectID: project, Action: r.Action, Target: r.Target, At: r.At, Addr: r.Addr,
			Dedupe: "receiver:" + project + ":" + r.ID}
		if ev.At.IsZero() {
			ev.At = time.Now()
		}
		what := map[string]any{}
		for k, v := range r.Details {
			what[k] = v
		}
		if r.Action == streams.AuditKeyRead {
			ev.Target = r.Surface
			what["surface"] = r.Surface
			if r.Scope != "" {
				what["scope"] = r.Scope
			}
		}
		ev.Change(nil, what)
		if id, ok := strings.CutPrefix(r.Actor, "user:"); ok {
			ev.CredKind, ev.ActorID = store.CredConsole, id
			if u, err := tx.UserByID(ctx, id); err == nil {
				ev.ActorEmail = u.Email
			} else if !errors.Is(err, store.ErrNotFound) {
				return err
			}
		} else {
			ev.CredKind, ev.CredID = store.CredProjectKey, r.Actor
		}
		return tx.AddAudit(ctx, ev)
	})
}

// auditAccount names the account a change acted on, in the record ctx carries, when the
// request did not know it (signing up, a verification link, an OAuth token revoked by the
// app holding it): that account's owner is the actor, and the record is their account's.
// Until it is called the record has no action, so a transaction that turns out to change
// nothing (an unknown token, an address changed since the mail) records nothing.
func auditAccount(ctx context.Context, userID, action, target string, before, after any) {
	ev := store.AuditOf(ctx)
	if ev == nil {
		return
	}
	ev.ActorID, ev.AccountID, ev.ProjectID = userID, userID, ""
	ev.SetAction(action)
	ev.SetTarget(target)
	ev.Change(before, after)
}

// AccountCreated is the record of a signup, for the transaction that creates u.
func AccountCreated(ctx context.Context, addr string, u store.User) context.Context {
	ctx = Audited(ctx, Actor{UserID: u.ID, Email: u.Email, Addr: addr}, "", "", "")
	auditAccount(ctx, u.ID, "account.create", u.ID, nil, map[string]string{"email": u.Email})
	return ctx
}

// sinkAudited is a destination as its audit record shows it: without its id (the
// record's target) and the time it delivers from (set by the service, not the person),
// which would read as changes next to the fields they did change.
func sinkAudited(c mirror.Sink) map[string]any {
	m := map[string]any{}
	if b, err := json.Marshal(c); err == nil && json.Unmarshal(b, &m) == nil {
		delete(m, "id")
		delete(m, "since")
	}
	return m
}

// sourceAudited is a new source as its audit record shows it: what the person chose,
// never its ingest key, API key or verification secret (only the verification's kind).
func sourceAudited(v SourceView) map[string]any {
	m := map[string]any{"name": v.Name, "connector": v.Connector, "event_type": v.EventType,
		"event_type_field": v.EventTypeField, "text_template": v.TextTemplate,
		"event_time_field": v.EventTimeField, "labels": v.Labels, "preset": v.Preset}
	if v.Verification != nil {
		m["verification"] = v.Verification.Scheme
	}
	return m
}

// projectSettings are a project's settings as its audit record shows them.
type projectSettings struct {
	Name       string           `json:"name"`
	IngestRate store.IngestRate `json:"ingest_rate_limit"`
}

// ParseRetention reads SVC_AUDIT_RETENTION: a number of days ("90d") or a Go duration
// ("2160h"), at least an hour.
func ParseRetention(v string) (time.Duration, error) {
	var d time.Duration
	if days, ok := strings.CutSuffix(v, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < 1 || n > 100*365 {
			return 0, fmt.Errorf("want a number of days such as 90d, or a duration such as 2160h, got %q", v)
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(v); err != nil {
			return 0, fmt.Errorf("want a number of days such as 90d, or a duration such as 2160h, got %q", v)
		}
	}
	if d < time.Hour {
		return 0, fmt.Errorf("keep the audit log at least an hour, got %q", v)
	}
	return d, nil
}
