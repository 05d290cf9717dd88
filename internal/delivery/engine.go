// Package delivery is what the agent exporter (calls to a project's agent) and the sink
// exporter (an agent's results to the project's destinations) share about delivering one
// HTTP request: retries with backoff within a budget (deliver.go), each project's pace and
// circuit per target (target.go), dead letters (deadletter.go), the delivery log and its
// ledger counts (dlog.go), replays the console asks for (replay.go), and failure notices
// to the project's destinations (notices.go).
//
// It links no collector code: each exporter connects to NATS, reads its project from the
// request and records metrics on its own instruments (Telemetry), and hands the rest here.
package delivery

import (
	"context"
	"fmt"
	"net/http"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/outbound"
	"github.com/otelcol-svc/otelcol-svc/internal/webhooksig"
)

// Projects is where a project's configuration is read (the configuration mirror's cache).
type Projects interface {
	Project(id string) (mirror.Project, bool)
	Ready() bool
}

// Telemetry records on the exporter's own instruments (its metadata.yaml), so both
// exporters keep their metric names.
type Telemetry interface {
	// Attempt counts one HTTP attempt; who is "agent", "webhook" or "chat".
	Attempt(ctx context.Context, who, outcome string)
	// ThrottledWait counts a delivery that waited for its target, by reason.
	ThrottledWait(ctx context.Context, reason string)
	// CircuitChange counts a target's circuit entering state.
	CircuitChange(ctx context.Context, state string)
	// ObserveLog reports the delivery log writer's losses.
	ObserveLog(dropped, failed, retentionCut func() int64) error
}

// Options make an Engine.
type Options struct {
	Settings Settings
	// Name says whose engine it is in errors and logs ("agent exporter").
	Name      string
	Logger    *zap.Logger
	UserAgent string
	Telemetry Telemetry
	// Replays are the kinds of delivery (deliverylog.KindAgent, KindSink) this engine
	// replays; a job for another kind is left to the exporter that has it.
	Replays map[string]ReplayFunc
}

// Engine delivers one exporter's requests.
type Engine struct {
	cfg       Settings
	name      string
	logger    *zap.Logger
	tel       Telemetry
	userAgent string
	replays   map[string]ReplayFunc

	client   *http.Client
	projects Projects
	nc       *nats.Conn
	js       jetstream.JetStream

	// ensured holds the projects whose dead-letter stream this process created or checked.
	ensured sync.Map
	// log is the delivery log; nil when delivery_log.enabled is false.
	log *Log
	// targets paces each project's requests to each origin (target.go).
	targets *targets
	// notices tell the project's destinations of failures (notices.go); nil when off.
	notices *notifier
	// share shares the targets' throttles and circuits with the other processes
	// (targetshare.go); nil without NATS.
	share *targetShare

	// warnedUnsigned holds the projects already logged as having no signing secret, so a
	// busy project does not flood the log.
	warnedUnsigned sync.Map
}

// New returns an engine that is not started yet.
func New(o Options) *Engine {
	return &Engine{cfg: o.Settings, name: o.Name, logger: o.Logger, tel: o.Telemetry, userAgent: o.UserAgent,
		replays: o.Replays, targets: newTargets(o.Settings.Target, o.Telemetry)}
}

// Start takes the exporter's NATS connection and the projects' configuration, and starts
// the delivery log, its replay loop and the failure notices.
func (e *Engine) Start(projects Projects, nc *nats.Conn, js jetstream.JetStream) error {
	allow, err := outbound.ParseAllow(e.cfg.AllowCIDRs)
	if err != nil {
		return fmt.Errorf("%s: allow_cidrs: %w", e.name, err)
	}
	// Each attempt is bounded by its own context (cfg.Timeout), so the client needs none.
	e.client = outbound.NewClient(outbound.Options{AllowCIDRs: allow})
	e.projects, e.nc, e.js = projects, nc, js
	e.notices = newNotifier(e)
	if nc != nil && js != nil {
		// Until the bucket is bound each process paces on its own.
		e.share = startShare(e.targets, js, nc.IsConnected, e.cfg.DeadLetterStream.Replicas, e.cfg.Timeout, e.logger)
	}
	e.log = startLog(&e.cfg, js, e.logger, e.replayLoop)
	if e.log != nil {
		w := e.log.w
		if err := e.tel.ObserveLog(w.Dropped, w.Failed, w.RetentionCut); err != nil {
			return fmt.Errorf("%s: %w", e.name, err)
		}
	}
	return nil
}

// Shutdown stops the replay loop, flushes the log while NATS is still there, and lets a
// notice being sent finish. The connection is the exporter's to close, after this.
func (e *Engine) Shutdown(ctx context.Context) {
	if err := e.log.close(ctx); err != nil {
		e.logger.Warn("delivery log not flushed at shutdown; the last entries may be missing", zap.Error(err))
	}
	// Before NATS goes: a notice being sent gets its chance (bounded by noticeTimeout).
	e.notices.close()
	e.share.stop()
	if e.client != nil {
		e.client.CloseIdleConnections()
	}
}

// Log is the delivery log (nil, which logs nothing, when it is off).
func (e *Engine) Log() *Log { return e.log }

// Project returns the configuration of project id. A project that cannot be delivered
// for yet is an error worth trying again: its messages stay on the stream until it can.
func (e *Engine) Project(id string) (mirror.Project, error) {
	proj, ok := e.projects.Project(id)
	switch {
	case !ok && !e.projects.Ready():
		return proj, fmt.Errorf("project %s: the configuration mirror is not loaded yet; the records will be redelivered", id)
	case !ok:
		return proj, fmt.Errorf("project %s is not in the configuration mirror; the records will be redelivered", id)
	}
	if proj.SigningSecret == "" {
		e.warnUnsigned(proj.ID)
	} else if err := webhooksig.ValidateSecret(proj.SigningSecret); err != nil {
		return proj, fmt.Errorf("project %s: signing secret: %w; the records will be redelivered once it is fixed", id, err)
	}
	return proj, nil
}

func (e *Engine) warnUnsigned(projectID string) {
	if _, seen := e.warnedUnsigned.LoadOrStore(projectID, struct{}{}); !seen {
		e.logger.Warn("project has no signing secret: its agent calls and webhooks are sent unsigned, so the receiving side cannot tell them from forged ones",
			zap.String("project", projectID))
	}
}
