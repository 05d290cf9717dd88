package console

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/collector/client"
	"go.uber.org/zap"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/principal"
	"github.com/otelcol-svc/otelcol-svc/internal/deliverylog"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
)

// The console records who read a project's data and who replayed its dead letters on the
// audit stream (svc-audit), which the control planes consume into the audit log: these
// requests come to the receivers, never to the control plane.
//
// A record must never slow or fail the request it records: it is published after the
// answer is decided, by a goroutine of its own, at most maxAuditInFlight at once; one
// that finds no slot, or whose publish fails, is dropped and counted.
const (
	maxAuditInFlight = 64
	auditTimeout     = 5 * time.Second
	// maxAuditSeen bounds the read ids remembered this hour; past it, reads publish
	// again and the stream's duplicate window keeps one record.
	maxAuditSeen = 10000
)

type auditor struct {
	logger   *zap.Logger
	replicas int
	slots    chan struct{}
	dropped  atomic.Int64
	ensured  atomic.Bool

	mu sync.Mutex
	// seen are the read ids published in hour: a busy key's reads publish once an hour
	// per process, not once per read.
	hour string
	seen map[string]bool
}

func newAuditor(logger *zap.Logger, replicas int) *auditor {
	return &auditor{logger: logger, replicas: replicas, slots: make(chan struct{}, maxAuditInFlight), seen: map[string]bool{}}
}

// Dropped returns how many audit records this console could not publish.
func (a *API) AuditDropped() int64 { return a.audit.dropped.Load() }

// read records a credential's read of surface, once per hour.
func (au *auditor) read(ctx context.Context, req *http.Request, js jetstream.JetStream, projectID, surface string) {
	p, ok := principal.FromContext(ctx)
	if !ok || p.KeyID == "" {
		return
	}
	now := time.Now().UTC()
	id := streams.AuditReadID(projectID, p.KeyID, surface, now)
	hour := now.Format("2006010215")
	au.mu.Lock()
	if au.hour != hour || len(au.seen) >= maxAuditSeen {
		au.hour, au.seen = hour, map[string]bool{}
	}
	if au.seen[id] {
		au.mu.Unlock()
		return
	}
	au.seen[id] = true
	au.mu.Unlock()
	rec := streams.AuditRecord{ID: id, Action: streams.AuditKeyRead, At: now.Truncate(time.Hour), Actor: p.KeyID,
		ActorEmail: p.Email, Scope: p.Scope, Surface: surface, Addr: clientAddr(req)}
	au.publish(js, projectID, rec, func() {
		au.mu.Lock()
		delete(au.seen, id) // the next read tries again
		au.mu.Unlock()
	})
}

// replay records a replay request.
func (au *auditor) replay(ctx context.Context, js jetstream.JetStream, projectID, replayID, addr string, jobs []deliverylog.Job, bulk bool, at time.Time) {
	p, _ := principal.FromContext(ctx)
	details := map[string]any{"deliveries": len(jobs)}
	switch {
	case bulk:
		details["all_dead_letters"] = true
	case len(jobs) == 1:
		details["delivery_id"] = jobs[0].DeliveryID
	default: // at most deliverylog.MaxReplay ids
		ids := make([]string, len(jobs))
		for i, j := range jobs {
			ids[i] = j.DeliveryID
		}
		details["delivery_ids"] = ids
	}
	rec := streams.AuditRecord{ID: streams.AuditReplay + ":" + projectID + ":" + replayID, Action: streams.AuditReplay, At: at,
		Actor: p.KeyID, ActorEmail: p.Email, Scope: p.Scope, Target: replayID, Addr: addr, Details: details}
	au.publish(js, projectID, rec, nil)
}

// incidentAction records a person's action on an incident (who, from where, what the
// incident's status became): a change to what the on-call sees, as a pipeline change is.
func (au *auditor) incidentAction(ctx context.Context, js jetstream.JetStream, projectID, incidentID, action, addr, status string, at time.Time) {
	p, _ := principal.FromContext(ctx)
	rec := streams.AuditRecord{ID: streams.AuditIncidentPrefix + action + ":" + projectID + ":" + incidentID + ":" + strconv.FormatInt(at.UnixNano(), 10),
		Action: streams.AuditIncidentPrefix + action, At: at, Actor: p.KeyID, ActorEmail: p.Email, Scope: p.Scope,
		Target: incidentID, Addr: addr, Details: map[string]any{"status": status}}
	au.publish(js, projectID, rec, nil)
}

func (au *auditor) publish(js jetstream.JetStream, projectID string, rec streams.AuditRecord, failed func()) {
	select {
	case au.slots <- struct{}{}:
	default:
		au.drop(projectID, rec.Action, nil, failed)
		return
	}
	go func() {
		defer func() { <-au.slots }()
		ctx, cancel := context.WithTimeout(context.Background(), auditTimeout)
		defer cancel()
		if !au.ensured.Load() {
			if err := streams.Ensure(ctx, js, streams.AuditConfig(au.replicas)); err != nil {
				au.drop(projectID, rec.Action, err, failed)
				return
			}
			au.ensured.Store(true)
		}
		body, err := json.Marshal(rec)
		if err == nil {
			_, err = js.PublishMsg(ctx, &nats.Msg{Subject: streams.AuditSubject(projectID), Data: body,
				Header: nats.Header{streams.HeaderMsgID: []string{rec.ID}}})
		}
		if err != nil {
			au.ensured.Store(false) // the stream may have been deleted: look again next time
			au.drop(projectID, rec.Action, err, failed)
		}
	}()
}

// drop counts a record not published; the log line comes at the 1st, 2nd, 4th, 8th...
// drop, so a NATS outage does not flood the log.
func (au *auditor) drop(projectID, action string, err error, failed func()) {
	if failed != nil {
		failed()
	}
	if n := au.dropped.Add(1); n&(n-1) == 0 {
		au.logger.Warn("an audit record could not be published", zap.String("project_id", projectID),
			zap.String("action", action), zap.Int64("dropped_total", n), zap.Error(err))
	}
}

// addrOf is the client's address as the collector's HTTP server recorded it (the
// connection's peer), "" when it did not.
func addrOf(ctx context.Context) string {
	if a := client.FromContext(ctx).Addr; a != nil {
		return a.String()
	}
	return ""
}

// clientAddr is addrOf for a request, falling back to its peer address when it was not
// served by the collector's server (tests).
func clientAddr(req *http.Request) string {
	if a := addrOf(req.Context()); a != "" {
		return a
	}
	if h, _, err := net.SplitHostPort(req.RemoteAddr); err == nil {
		return h
	}
	return req.RemoteAddr
}
