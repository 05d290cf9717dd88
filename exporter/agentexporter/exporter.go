package agentexporter

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.uber.org/zap"

	"github.com/otelcol-svc/otelcol-svc/components/mirror"
	"github.com/otelcol-svc/otelcol-svc/components/mirror/mirrorcache"
	"github.com/otelcol-svc/otelcol-svc/components/outbound"
	"github.com/otelcol-svc/otelcol-svc/components/streams"
	"github.com/otelcol-svc/otelcol-svc/components/tenant"
	"github.com/otelcol-svc/otelcol-svc/components/webhooksig"
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

	// ensured holds the projects whose dead-letter stream this process created or checked.
	ensured sync.Map
	// warnedUnsigned holds the projects already logged as having no signing secret, so a
	// busy project does not flood the log.
	warnedUnsigned sync.Map
}

func newExporter(cfg *Config, set exporter.Settings) (*agentExporter, error) {
	tel, err := newTelemetry(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	return &agentExporter{
		cfg:       cfg,
		logger:    set.Logger,
		tel:       tel,
		userAgent: "otelcol-svc/" + set.BuildInfo.Version,
	}, nil
}

func (e *agentExporter) Start(_ context.Context, host component.Host) error {
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
	return nil
}

func (e *agentExporter) Shutdown(context.Context) error {
	if e.client != nil {
		e.client.CloseIdleConnections()
	}
	if e.nc != nil {
		e.nc.Close()
		e.nc = nil
	}
	return nil
}

// pushLogs sends the batch's calls one after the other, in order. On the first call that
// can be neither delivered nor dead-lettered it stops with a retryable error: the
// JetStream receiver then redelivers the batch (calls already delivered are sent again;
// delivery is at least once).
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
	for _, c := range buildCalls(ld, batchSize(proj)) {
		if err := e.handle(ctx, proj, c); err != nil {
			return err
		}
	}
	return nil
}

var errNoProject = errors.New("agent exporter: the request carries no project; put it in a pipeline fed by the jetstream receiver")

// project returns the configuration of the request's project. A project that cannot be
// called yet is a retryable error: its messages stay on the stream until it can.
func (e *agentExporter) project(ctx context.Context) (mirror.Project, error) {
	p, ok := tenant.FromContext(ctx)
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

// handle makes one call and settles it: delivered, or dead-lettered. It returns an error
// only when the call must be made again later (shutdown, dead-letter stream unavailable).
func (e *agentExporter) handle(ctx context.Context, proj mirror.Project, c call) error {
	id := newRequestID()
	start := time.Now()
	res := e.deliver(ctx, outgoing{
		who: "agent", urlField: "agent_endpoint_url", project: proj.ID,
		target: proj.Pipeline.AgentEndpointURL, body: c.body, requestID: id, secret: proj.SigningSecret,
	})
	switch {
	case res.delivered:
		e.tel.callEnded(ctx, outcomeDelivered, c.records, time.Since(start))
		return nil
	case res.aborted:
		return fmt.Errorf("call %s to the agent of project %s interrupted: %w; the records will be redelivered", id, proj.ID, context.Cause(ctx))
	}
	if err := e.deadLetter(ctx, proj, c, id, res); err != nil {
		return fmt.Errorf("call %s to the agent of project %s failed (%s) and could not be dead-lettered: %w; the records will be redelivered",
			id, proj.ID, res.reason, err)
	}
	e.tel.callEnded(ctx, outcomeDeadLettered, c.records, time.Since(start))
	e.logger.Warn("agent call dead-lettered",
		zap.String("project", proj.ID),
		zap.String("request_id", id),
		zap.String("reason", res.reason),
		zap.Int("status", res.status),
		zap.Int("attempts", res.attempts),
		zap.String("agent", origin(proj.Pipeline.AgentEndpointURL)))
	return nil
}

// newRequestID returns "req_" and 128 random bits in hex. It names the call, not an
// attempt: every retry carries it, so the agent can deduplicate.
func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "req_" + hex.EncodeToString(b[:])
}
