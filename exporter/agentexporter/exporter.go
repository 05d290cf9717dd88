package agentexporter

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.uber.org/zap"

	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/mirrorcache"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/principal"
	"github.com/otelcol-svc/otelcol-svc/internal/deliverylog"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/outbound"
	"github.com/otelcol-svc/otelcol-svc/internal/requestid"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
	"github.com/otelcol-svc/otelcol-svc/internal/webhooksig"
)

type agentExporter struct {
	cfg       *Config
	logger    *zap.Logger
	tel       *telemetry
	userAgent string

	client *http.Client
	cache  *mirrorcache.Cache
	nc     *nats.Conn
	js     jetstream.JetStream

	// ids issues the request ids of calls, which the ingest receiver recognises when the
	// agent posts its result; nil until loaded from NATS (see issuer).
	ids    atomic.Pointer[requestid.Issuer]
	idsMux sync.Mutex

	// ensured holds the projects whose dead-letter stream this process created or checked.
	ensured sync.Map
	// log is the delivery log; nil when delivery_log.enabled is false.
	log *dlog
	// targets paces each project's requests to each origin (target.go).
	targets *targets

	// budget counts calls against max_calls_per_minute and max_calls_per_day (budget.go).
	budget *callBudget
	// warnedBudget holds, per project, the limit and window last logged as spent.
	warnedBudget sync.Map

	// warnedUnsigned holds the projects already logged as having no signing secret, so a
	// busy project does not flood the log.
	warnedUnsigned sync.Map

	// lanes keep each group's calls in order across batches (ordering.go).
	lanes *lanes

	// notices tell the project's destinations of failures (notices.go); nil when off.
	notices *notifier
}

func newExporter(cfg *Config, set exporter.Settings) (*agentExporter, error) {
	tel, err := newTelemetry(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	e := &agentExporter{
		cfg:       cfg,
		logger:    set.Logger,
		tel:       tel,
		userAgent: "otelcol-svc/" + set.BuildInfo.Version,
		targets:   newTargets(cfg.Target, tel),
	}
	e.lanes = newLanes(e)
	return e, nil
}

func (e *agentExporter) Start(ctx context.Context, host component.Host) error {
	cache, err := mirrorcache.FromHost(host, e.cfg.Mirror)
	if err != nil {
		return fmt.Errorf("agent exporter: %w", err)
	}
	allow, err := outbound.ParseAllow(e.cfg.AllowCIDRs)
	if err != nil {
		return fmt.Errorf("agent exporter: allow_cidrs: %w", err)
	}
	nc, js, err := e.cfg.NATS.ConnectJetStream(host, "otelcol-svc agent exporter", e.logger)
	if err != nil {
		return fmt.Errorf("agent exporter: %w", err)
	}
	// Each attempt is bounded by its own context (cfg.Timeout), so the client needs none.
	e.client = outbound.NewClient(outbound.Options{AllowCIDRs: allow})
	e.cache, e.nc, e.js = cache, nc, js
	e.budget = newCallBudget(js, e.cfg.DeadLetterStream.Replicas, e.cfg.now)
	e.notices = newNotifier(e)
	e.log = startLog(e.cfg, js, e.logger, e.replayLoop)
	if err := e.tel.observeLog(e.log); err != nil {
		return fmt.Errorf("agent exporter: %w", err)
	}
	// NATS away at start must not stop the collector: the first call loads the key then.
	if nc.IsConnected() {
		lctx, cancel := context.WithTimeout(ctx, issuerLoadTimeout)
		defer cancel()
		if _, err := e.issuer(lctx); err != nil {
			e.logger.Warn("request-id key not loaded yet; agent calls wait for it (their records are redelivered)", zap.Error(err))
		}
	}
	return nil
}

const issuerLoadTimeout = 5 * time.Second

// issuer returns the request-id issuer, loading the deployment's key on first need when
// Start could not; until it loads, calls fail retryably and their records wait on the
// stream (an id the receiver cannot recognise would mark the agent's result unmatched).
func (e *agentExporter) issuer(ctx context.Context) (*requestid.Issuer, error) {
	if iss := e.ids.Load(); iss != nil {
		return iss, nil
	}
	e.idsMux.Lock()
	defer e.idsMux.Unlock()
	if iss := e.ids.Load(); iss != nil {
		return iss, nil
	}
	iss, err := requestid.Load(ctx, e.js)
	if err != nil {
		return nil, err
	}
	e.ids.Store(iss)
	return iss, nil
}

func (e *agentExporter) Shutdown(ctx context.Context) error {
	// The replay loop stops first (it uses the connection), then the log is flushed
	// while NATS is still there.
	if err := e.log.close(ctx); err != nil {
		e.logger.Warn("delivery log not flushed at shutdown; the last entries may be missing", zap.Error(err))
	}
	// Before NATS goes: a notice being sent gets its chance (bounded by noticeTimeout).
	e.notices.close()
	e.tel.Shutdown()
	if e.client != nil {
		e.client.CloseIdleConnections()
	}
	if e.nc != nil {
		e.nc.Close()
		e.nc = nil
	}
	return nil
}

// pushLogs sends the batch's calls, each group's in order across batches (sendCalls).
// When a call can be neither delivered nor dead-lettered it returns a retryable error:
// the JetStream receiver then redelivers the batch (calls already delivered are sent
// again; delivery is at least once). Results (the sink role) never hand the batch off, so
// the receiver keeps them strictly one at a time per destination.
func (e *agentExporter) pushLogs(ctx context.Context, ld plog.Logs) error {
	proj, err := e.project(ctx)
	if err != nil {
		return err
	}
	if isResults(ld) {
		return e.pushResults(ctx, proj, ld)
	}
	if proj.Pipeline.AgentEndpointURL == "" {
		return fmt.Errorf("project %s has no agent_endpoint_url; the records will be redelivered once it has one", proj.ID)
	}
	return e.sendCalls(ctx, proj, buildCalls(ld, batchSize(proj), e.cfg.MaxCallBytes))
}

var errNoProject = errors.New("agent exporter: the request carries no project; put it in a pipeline fed by the jetstream receiver")

// project returns the configuration of the request's project. A project that cannot be
// called yet is a retryable error: its messages stay on the stream until it can.
func (e *agentExporter) project(ctx context.Context) (mirror.Project, error) {
	p, ok := principal.FromContext(ctx)
	if !ok {
		return mirror.Project{}, consumererror.NewPermanent(errNoProject)
	}
	if !streams.ValidProjectID(p.ProjectID) {
		return mirror.Project{}, consumererror.NewPermanent(fmt.Errorf("agent exporter: invalid project id %q", p.ProjectID))
	}
	proj, ok := e.cache.Project(p.ProjectID)
	switch {
	case !ok && !e.cache.Ready():
		return proj, fmt.Errorf("project %s: the configuration mirror is not loaded yet; the records will be redelivered", p.ProjectID)
	case !ok:
		return proj, fmt.Errorf("project %s is not in the configuration mirror; the records will be redelivered", p.ProjectID)
	}
	if proj.SigningSecret == "" {
		e.warnUnsigned(proj.ID)
	} else if err := webhooksig.ValidateSecret(proj.SigningSecret); err != nil {
		return proj, fmt.Errorf("project %s: signing secret: %w; the records will be redelivered once it is fixed", p.ProjectID, err)
	}
	return proj, nil
}

func (e *agentExporter) warnUnsigned(projectID string) {
	if _, seen := e.warnedUnsigned.LoadOrStore(projectID, struct{}{}); !seen {
		e.logger.Warn("project has no signing secret: its agent calls and webhooks are sent unsigned, so the receiving side cannot tell them from forged ones",
			zap.String("project", projectID))
	}
}

func batchSize(p mirror.Project) int {
	if p.Pipeline.BatchSize > 0 {
		return p.Pipeline.BatchSize
	}
	return mirror.DefaultBatchSize
}

// handle makes one call and settles it: delivered, dead-lettered, or not made because the
// project's call budget is spent. It returns an error only when the call must be made
// again later (shutdown, dead-letter stream or call budget unavailable).
func (e *agentExporter) handle(ctx context.Context, proj mirror.Project, c call) error {
	ids, err := e.issuer(ctx)
	if err != nil {
		return fmt.Errorf("call to the agent of project %s: no request id can be issued yet: %w; the records will be redelivered", proj.ID, err)
	}
	if c.failed != "" {
		// Nothing to call the agent with: settled at once, visible as a dead-lettered
		// delivery with the error, and never redelivered.
		deadLettered, err := e.settleFailed(ctx, proj, c, ids.New(proj.ID))
		if err != nil {
			return err
		}
		deliverylog.OutcomeFrom(ctx).Call(c.seqs, deadLettered)
		return nil
	}
	if ok, err := e.budgetAllows(ctx, proj, c); !ok {
		return err
	}
	// The id names the call, not an attempt: every retry carries it, so the agent can
	// deduplicate.
	deadLettered, err := e.makeCall(ctx, proj, c, ids.New(proj.ID), "")
	if err != nil {
		return err
	}
	// The receiver counts the batch's records in the ledger from this before acking.
	deliverylog.OutcomeFrom(ctx).Call(c.seqs, deadLettered)
	return nil
}

// settleFailed dead-letters a call that must not be made, with its reason as the
// delivery's error; like makeCall, an error means it must be settled again later.
func (e *agentExporter) settleFailed(ctx context.Context, proj mirror.Project, c call, id string) (bool, error) {
	traceID := c.traceID
	if traceID == "" {
		traceID = newTraceID()
	}
	// A record too large after transforms has the contract's status, 413, as its
	// delivery's status_code: no agent answered, but a program reading deliveries
	// tells it from the rest by the same figure the dry run gives it.
	status := 0
	if strings.HasPrefix(c.failed, apierror.RecordTooLargeAfterTransforms+":") {
		status = http.StatusRequestEntityTooLarge
	}
	e.log.record(proj.ID, deliverylog.Delivery{ID: id, Kind: deliverylog.KindAgent, RequestID: id, Records: c.records,
		RequestBody: c.body, Seqs: c.seqs, TraceID: traceID, StatusCode: status})
	seq, err := e.deadLetter(ctx, proj, c, id, result{reason: c.failed, status: status})
	if err != nil {
		e.log.abandon(proj.ID, id, c.failed+"; not dead-lettered (the dead-letter stream was unavailable): settled again later")
		return false, fmt.Errorf("call %s of project %s cannot be made (%s) and could not be dead-lettered: %w; the records will be redelivered",
			id, proj.ID, c.failed, err)
	}
	e.log.finish(proj.ID, id, deliverylog.Final{State: deliverylog.StateDeadLettered, DeadLetterSeq: seq, Error: c.failed})
	e.tel.callEnded(ctx, outcomeDeadLettered, c.records, 0)
	e.logger.Warn("agent call dead-lettered without calling the agent",
		zap.String("project", proj.ID), zap.String("request_id", id), zap.String("reason", c.failed))
	e.notices.failed(proj.ID, failure{DeliveryID: id, Kind: failedAgentCall, Error: c.failed})
	return true, nil
}

// makeCall sends c under request id id (a replay names the call it replays in
// replayOf), logging it in the delivery log, and settles it. It reports whether the call
// was dead-lettered; an error means it was neither delivered nor dead-lettered and must
// be made again.
func (e *agentExporter) makeCall(ctx context.Context, proj mirror.Project, c call, id, replayOf string) (bool, error) {
	traceID := c.traceID
	if traceID == "" {
		traceID = newTraceID()
	}
	e.log.record(proj.ID, deliverylog.Delivery{ID: id, Kind: deliverylog.KindAgent, RequestID: id, Records: c.records,
		RequestBody: c.body, Seqs: c.seqs, TraceID: traceID, ReplayOf: replayOf})
	start := time.Now()
	res := e.deliver(ctx, outgoing{
		who: "agent", urlField: "agent_endpoint_url", project: proj.ID,
		target: proj.Pipeline.AgentEndpointURL, body: c.body, requestID: id, secret: proj.SigningSecret,
		traceparent: traceparent(traceID), logID: id, headers: suppressedHeader(c),
	})
	switch {
	case res.delivered:
		e.log.finish(proj.ID, id, deliverylog.Final{State: deliverylog.StateDelivered})
		e.tel.callEnded(ctx, outcomeDelivered, c.records, time.Since(start))
		return false, nil
	case res.aborted:
		e.log.abandon(proj.ID, id, "interrupted by shutdown; the records are sent again in a new call")
		return false, fmt.Errorf("call %s to the agent of project %s interrupted: %w; the records will be redelivered", id, proj.ID, context.Cause(ctx))
	}
	seq, err := e.deadLetter(ctx, proj, c, id, res)
	if err != nil {
		e.log.abandon(proj.ID, id, res.reason+"; not dead-lettered (the dead-letter stream was unavailable): the records are sent again in a new call")
		return false, fmt.Errorf("call %s to the agent of project %s failed (%s) and could not be dead-lettered: %w; the records will be redelivered",
			id, proj.ID, res.reason, err)
	}
	e.log.finish(proj.ID, id, deliverylog.Final{State: deliverylog.StateDeadLettered, DeadLetterSeq: seq, Error: res.reason})
	e.tel.callEnded(ctx, outcomeDeadLettered, c.records, time.Since(start))
	e.logger.Warn("agent call dead-lettered",
		zap.String("project", proj.ID),
		zap.String("request_id", id),
		zap.String("reason", res.reason),
		zap.Int("status", res.status),
		zap.Int("attempts", res.attempts),
		zap.String("agent", origin(proj.Pipeline.AgentEndpointURL)))
	e.notices.failed(proj.ID, failure{DeliveryID: id, Kind: failedAgentCall, Error: res.reason})
	return true, nil
}
