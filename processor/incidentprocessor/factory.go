// Package incidentprocessor is incident mode (mode "incident"): the events of a project
// that match its trigger are grouped by fingerprint into incidents (internal/incident keeps
// them in the svc-incidents bucket, shared by every process), and each incident makes its
// own calls to the agent: opened after group_wait, updated at most once per
// group_interval while new events come, resolved (resolve_when, resolve_after, or a
// person), reinvestigate on request. Records of other modes pass through untouched.
//
// Records are handled synchronously, in the batch's call (what pipelinecheck requires):
// each is evaluated (internal/collector/pipelineeval), events and context records are
// stored in the window store, and each fingerprint's events are applied to its incident
// once per batch. The calls are made by the processor's own ticker, which hands each, as
// one item, to the next consumer (the agent exporter) with the project in the context.
package incidentprocessor

//go:generate ../../bin/mdatagen metadata.yaml

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processorhelper"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/mirrorcache"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/natsclient"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/ottlevent"
	"github.com/otelcol-svc/otelcol-svc/internal/windowstore"
	"github.com/otelcol-svc/otelcol-svc/processor/incidentprocessor/internal/metadata"
)

// Defaults.
const (
	DefaultTick               = time.Second
	DefaultClaimTimeout       = 30 * time.Second
	DefaultMaxConcurrentCalls = 16
)

// NewFactory returns the processor's factory.
func NewFactory() processor.Factory {
	return processor.NewFactory(metadata.Type, createDefaultConfig,
		processor.WithLogs(createLogs, metadata.LogsStability))
}

func createDefaultConfig() component.Config {
	return &Config{Mirror: mirrorcache.DefaultExtension, NATS: natsclient.DefaultConfig(), Replicas: 1,
		MaxRecordBytes: ottlevent.DefaultMaxRecordBytes, Tick: DefaultTick, ClaimTimeout: DefaultClaimTimeout,
		MaxConcurrentCalls:    DefaultMaxConcurrentCalls,
		MemoryMaxProjectBytes: windowstore.DefaultMaxProjectBytes, MemoryMaxBytes: windowstore.DefaultMaxBytes}
}

func createLogs(ctx context.Context, set processor.Settings, cfg component.Config, next consumer.Logs) (processor.Logs, error) {
	p, err := newProcessor(cfg.(*Config), set, next)
	if err != nil {
		return nil, err
	}
	return processorhelper.NewLogs(ctx, set, cfg, next, p.processLogs,
		processorhelper.WithStart(p.start),
		processorhelper.WithShutdown(p.shutdown),
		processorhelper.WithCapabilities(consumer.Capabilities{MutatesData: true}))
}
