package sinkexporter

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.uber.org/zap"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/mirrorcache"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelinedata"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/principal"
	"github.com/otelcol-svc/otelcol-svc/internal/delivery"
	"github.com/otelcol-svc/otelcol-svc/internal/deliverylog"
	"github.com/otelcol-svc/otelcol-svc/internal/incident"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
)

type sinkExporter struct {
	cfg    *Config
	logger *zap.Logger
	tel    *telemetry

	// engine delivers the results: retries, target pacing, dead letters, the delivery
	// log, replays and failure notices (internal/delivery, shared with the agent exporter).
	engine *delivery.Engine
	nc     *nats.Conn
	js     jetstream.JetStream
	// userAgent is sent to Slack's Web API as to every destination.
	userAgent string

	// incidents is the incidents' bucket, opened on first use (incidentStore).
	incMu     sync.Mutex
	incidents *incident.Store
}

func newExporter(cfg *Config, set exporter.Settings) (*sinkExporter, error) {
	tel, err := newTelemetry(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	e := &sinkExporter{cfg: cfg, logger: set.Logger, tel: tel, userAgent: "otelcol-svc/" + set.BuildInfo.Version}
	e.engine = delivery.New(delivery.Options{
		Settings: cfg.Settings, Name: "sink exporter", Logger: set.Logger, Telemetry: tel,
		UserAgent: e.userAgent,
		Replays:   map[string]delivery.ReplayFunc{deliverylog.KindSink: e.replaySink},
	})
	return e, nil
}

func (e *sinkExporter) Start(_ context.Context, host component.Host) error {
	cache, err := mirrorcache.FromHost(host, e.cfg.Mirror)
	if err != nil {
		return fmt.Errorf("sink exporter: %w", err)
	}
	nc, js, err := e.cfg.NATS.ConnectJetStream(host, "otelcol-svc sink exporter", e.logger)
	if err != nil {
		return fmt.Errorf("sink exporter: %w", err)
	}
	e.nc, e.js = nc, js
	return e.engine.Start(cache, nc, js)
}

func (e *sinkExporter) Shutdown(ctx context.Context) error {
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

var errNoProject = errors.New("sink exporter: the request carries no project; put it in a pipeline fed by the jetstream receiver in output mode")

// errRecords: a pipeline of records for agents ends in the sink exporter.
var errRecords = errors.New("sink exporter: this pipeline hands it records for an agent, which the agent exporter calls the agent with: " +
	"use the `agent` exporter in that pipeline, and `sink` only after the jetstream receiver in output mode (the records stay on the stream until then)")

// pushLogs delivers each result to its destination, in order. A result is settled
// (delivered or dead-lettered) before the next; only an interrupted delivery fails the
// batch, which is then redelivered. The batch is never handed off, so the receiver
// keeps results strictly one at a time per destination.
func (e *sinkExporter) pushLogs(ctx context.Context, ld plog.Logs) error {
	if !isResults(ld) {
		return errRecords
	}
	p, ok := principal.FromContext(ctx)
	if !ok {
		return consumererror.NewPermanent(errNoProject)
	}
	if !streams.ValidProjectID(p.ProjectID) {
		return consumererror.NewPermanent(fmt.Errorf("sink exporter: invalid project id %q", p.ProjectID))
	}
	proj, err := e.engine.Project(p.ProjectID)
	if err != nil {
		return err
	}
	pipelinedata.Each(ld, func(lr plog.LogRecord) {
		if err == nil {
			err = e.settleResult(ctx, proj, pipelinedata.Read(lr))
		}
	})
	return err
}

// isResults reports whether a batch holds agent results (the JetStream receiver in
// output mode) rather than records for an agent; an empty batch holds nothing to refuse.
// A batch is one or the other, so its first item tells.
func isResults(ld plog.Logs) bool {
	rls := ld.ResourceLogs()
	if rls.Len() == 0 || rls.At(0).ScopeLogs().Len() == 0 || rls.At(0).ScopeLogs().At(0).LogRecords().Len() == 0 {
		return true
	}
	return pipelinedata.KindOf(rls.At(0).ScopeLogs().At(0).LogRecords().At(0)) == pipelinedata.KindResult
}
