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
	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelinedata"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/principal"
	"github.com/otelcol-svc/otelcol-svc/internal/delivery"
	"github.com/otelcol-svc/otelcol-svc/internal/deliverylog"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/pipelinectx"
	"github.com/otelcol-svc/otelcol-svc/internal/requestid"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
)

type agentExporter struct {
	cfg    *Config
	logger *zap.Logger
	tel    *telemetry

	// engine delivers the calls: retries, target pacing, dead letters, the delivery log,
	// replays and failure notices (internal/delivery, shared with the sink exporter).
	engine *delivery.Engine
	nc     *nats.Conn
	js     jetstream.JetStream

	// ids issues the request ids of calls, which the ingest receiver recognises when the
	// agent posts its result; nil until loaded from NATS (see issuer).
	ids    atomic.Pointer[requestid.Issuer]
	idsMux sync.Mutex

	// budget counts calls against max_calls_per_minute and max_calls_per_day (budget.go).
	budget *callBudget
	// warnedBudget holds, per project, the limit and window last logged as spent.
	warnedBudget sync.Map

	// lanes keep each group's calls in order across batches (ordering.go).
	lanes *lanes
}

func newExporter(cfg *Config, set exporter.Settings) (*agentExporter, error) {
	tel, err := newTelemetry(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	e := &agentExporter{cfg: cfg, logger: set.Logger, tel: tel}
	e.engine = delivery.New(delivery.Options{
		Settings: cfg.Settings, Name: "agent exporter", Logger: set.Logger, Telemetry: tel,
		UserAgent: "otelcol-svc/" + set.BuildInfo.Version,
		Replays:   map[string]delivery.ReplayFunc{deliverylog.KindAgent: e.replayCall},
	})
	e.lanes = newLanes(e)
	return e, nil
}

func (e *agentExporter) Start(ctx context.Context, host component.Host) error {
	cache, err := mirrorcache.FromHost(host, e.cfg.Mirror)
	if err != nil {
		return fmt.Errorf("agent exporter: %w", err)
	}
	nc, js, err := e.cfg.NATS.ConnectJetStream(host, "otelcol-svc agent exporter", e.logger)
	if err != nil {
		return fmt.Errorf("agent exporter: %w", err)
	}
	e.nc, e.js = nc, js
	e.budget = newCallBudget(js, e.cfg.DeadLetterStream.Replicas, e.cfg.now)
	if err := e.engine.Start(cache, nc, js); err != nil {
		return err
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
	// and the notices sent while NATS is still there.
	e.engine.Shutdown(ctx)
	e.tel.Shutdown()
	if e.nc != nil {
		e.nc.Close()
		e.nc = nil
	}
	return nil
}

// pushLogs sends the batch's calls, each group's in order across batches (sendCalls).
// When a call can be neither delivered nor dead-lettered it returns a retryable error:
// the JetStream receiver then redelivers the batch (calls already delivered are sent
// again; delivery is at least once).
func (e *agentExporter) pushLogs(ctx context.Context, ld plog.Logs) error {
	if isResults(ld) {
		// Not dropped: the receiver keeps them until the pipeline is fixed.
		return errResults
	}
	proj, err := e.project(ctx)
	if err != nil {
		return err
	}
	if proj.Pipeline.AgentEndpointURL == "" {
		return fmt.Errorf("project %s has no agent_endpoint_url; the records will be redelivered once it has one", proj.ID)
	}
	return e.sendCalls(ctx, proj, buildCalls(ld, batchSize(proj), e.cfg.MaxCallBytes))
}

var errNoProject = errors.New("agent exporter: the request carries no project; put it in a pipeline fed by the jetstream receiver")

// errResults: the sink role's pipeline still ends in the agent exporter, as it did
// before results had an exporter of their own.
var errResults = errors.New("agent exporter: this pipeline hands it agent results (the jetstream receiver's output mode), which the sink exporter delivers: " +
	"in the sink pipeline use the `sink` exporter instead of `agent/sink` (the results stay on the output stream until then)")

// isResults reports whether a batch holds agent results for the sink role (the JetStream
// receiver in output mode) rather than records for an agent. A batch is one or the other,
// so its first item tells.
func isResults(ld plog.Logs) bool {
	rls := ld.ResourceLogs()
	if rls.Len() == 0 || rls.At(0).ScopeLogs().Len() == 0 || rls.At(0).ScopeLogs().At(0).LogRecords().Len() == 0 {
		return false
	}
	return pipelinedata.KindOf(rls.At(0).ScopeLogs().At(0).LogRecords().At(0)) == pipelinedata.KindResult
}

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
	return e.engine.Project(p.ProjectID)
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
	// The id names the call, not an attempt: every retry carries it, so the agent can
	// deduplicate. An incident call comes with its own.
	id := c.requestID
	if id == "" {
		id = ids.New(proj.ID)
	}
	if c.failed != "" {
		// Nothing to call the agent with: settled at once, visible as a dead-lettered
		// delivery with the error, and never redelivered.
		deadLettered, err := e.settleFailed(ctx, proj, c, id)
		if err != nil {
			return err
		}
		e.settled(ctx, proj, c, deadLettered)
		return nil
	}
	if ok, err := e.budgetAllows(ctx, proj, c); !ok {
		// Refused by the budget (no error): the outcome records no call, which the
		// incident processor reads as "refused".
		return err
	}
	deadLettered, err := e.makeCall(ctx, proj, c, id, "")
	if err != nil {
		return err
	}
	e.settled(ctx, proj, c, deadLettered)
	return nil
}

// settled tells how a call ended: to the batch's outcome, from which the receiver
// counts the batch's records in the ledger before acking (and the incident processor
// learns how its call ended), and for an incident call, which no batch settles, to the
// ledger's incident_calls directly, once per request id however often it is taken over
// (takeover.go).
func (e *agentExporter) settled(ctx context.Context, proj mirror.Project, c call, deadLettered bool) {
	pipelinectx.OutcomeFrom(ctx).Call(c.seqs, deadLettered)
	if !c.incident {
		return
	}
	if c.requestID != "" {
		if counted, err := e.budget.marked(ctx, proj.ID, markCounted, c.requestID); err == nil && counted {
			return
		}
	}
	led, err := e.engine.Log().LedgerNow(ctx)
	if err != nil {
		return // the call is settled; only its count is lost
	}
	counts := deliverylog.Counters{IncidentCalls: 1, Calls: 1}
	if deadLettered {
		counts = deliverylog.Counters{IncidentCalls: 1, CallsDeadLettered: 1}
	}
	led.Add(proj.ID, counts)
	if c.requestID == "" {
		return
	}
	// Stored before it is marked: the mark then never stands for a count a crash lost.
	// Incident calls are few (each is an agent call), so a flush per call is cheap.
	if err := led.Flush(ctx); err == nil {
		e.budget.mark(ctx, proj.ID, markCounted, c.requestID)
	}
}

// settleFailed dead-letters a call that must not be made, with its reason as the
// delivery's error; like makeCall, an error means it must be settled again later.
// deadLetterKind is the last token of the dead letter's subject: the stream also takes
// the sink exporter's.
const deadLetterKind = "agent"

// deadLetter stores a call that could not be delivered, with why, in the project's
// dead-letter stream, and returns once JetStream has acknowledged it, with the message's
// stream sequence (the delivery log points there, for a replay).
func (e *agentExporter) deadLetter(ctx context.Context, proj mirror.Project, c call, id string, res delivery.Result) (uint64, error) {
	h := delivery.DeadLetterHeaders(id, res, proj.Pipeline.AgentEndpointURL)
	return e.engine.PublishDeadLetter(ctx, proj.ID, deadLetterKind, c.body, h)
}

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
	e.engine.Log().Record(proj.ID, deliverylog.Delivery{ID: id, Kind: deliverylog.KindAgent, RequestID: id, Records: c.records,
		RequestBody: c.body, Seqs: c.seqs, TraceID: traceID, StatusCode: status})
	seq, err := e.deadLetter(ctx, proj, c, id, delivery.Result{Reason: c.failed, Status: status})
	if err != nil {
		e.engine.Log().Abandon(proj.ID, id, c.failed+"; not dead-lettered (the dead-letter stream was unavailable): settled again later")
		return false, fmt.Errorf("call %s of project %s cannot be made (%s) and could not be dead-lettered: %w; the records will be redelivered",
			id, proj.ID, c.failed, err)
	}
	e.engine.Log().Finish(proj.ID, id, deliverylog.Final{State: deliverylog.StateDeadLettered, DeadLetterSeq: seq, Error: c.failed})
	e.tel.callEnded(ctx, delivery.OutcomeDeadLettered, c.records, 0)
	e.logger.Warn("agent call dead-lettered without calling the agent",
		zap.String("project", proj.ID), zap.String("request_id", id), zap.String("reason", c.failed))
	e.engine.Failed(proj.ID, delivery.Failure{DeliveryID: id, Kind: delivery.FailedAgentCall, Error: c.failed})
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
	e.engine.Log().Record(proj.ID, deliverylog.Delivery{ID: id, Kind: deliverylog.KindAgent, RequestID: id, Records: c.records,
		RequestBody: c.body, Seqs: c.seqs, TraceID: traceID, ReplayOf: replayOf})
	start := time.Now()
	res := e.engine.Deliver(ctx, delivery.Request{
		Who: "agent", URLField: "agent_endpoint_url", Project: proj.ID,
		Target: proj.Pipeline.AgentEndpointURL, Body: c.body, RequestID: id, Secret: proj.SigningSecret,
		Traceparent: traceparent(traceID), LogID: id, Headers: suppressedHeader(c),
	})
	switch {
	case res.Delivered:
		e.engine.Log().Finish(proj.ID, id, deliverylog.Final{State: deliverylog.StateDelivered})
		e.tel.callEnded(ctx, delivery.OutcomeDelivered, c.records, time.Since(start))
		return false, nil
	case res.Aborted:
		e.engine.Log().Abandon(proj.ID, id, "interrupted by shutdown; the records are sent again in a new call")
		return false, fmt.Errorf("call %s to the agent of project %s interrupted: %w; the records will be redelivered", id, proj.ID, res.Cause)
	}
	seq, err := e.deadLetter(ctx, proj, c, id, res)
	if err != nil {
		e.engine.Log().Abandon(proj.ID, id, res.Reason+"; not dead-lettered (the dead-letter stream was unavailable): the records are sent again in a new call")
		return false, fmt.Errorf("call %s to the agent of project %s failed (%s) and could not be dead-lettered: %w; the records will be redelivered",
			id, proj.ID, res.Reason, err)
	}
	e.engine.Log().Finish(proj.ID, id, deliverylog.Final{State: deliverylog.StateDeadLettered, DeadLetterSeq: seq, Error: res.Reason})
	e.tel.callEnded(ctx, delivery.OutcomeDeadLettered, c.records, time.Since(start))
	e.logger.Warn("agent call dead-lettered",
		zap.String("project", proj.ID),
		zap.String("request_id", id),
		zap.String("reason", res.Reason),
		zap.Int("status", res.Status),
		zap.Int("attempts", res.Attempts),
		zap.String("agent", delivery.Origin(proj.Pipeline.AgentEndpointURL)))
	e.engine.Failed(proj.ID, delivery.Failure{DeliveryID: id, Kind: delivery.FailedAgentCall, Error: res.Reason})
	return true, nil
}
