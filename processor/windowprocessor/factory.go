// Package windowprocessor is window mode (window_enabled true): for each record, in order,
// the project's transforms run; when the trigger matches, the window of the record's group
// is read and a {"trigger", "window"} call is emitted; when the context filter passes, the
// record is stored in its group's window for window_duration. Records of legacy projects
// pass through for the trigger processor. The evaluation is
// internal/collector/pipelineeval's (the dry run's too); this package adapts it to the
// collector: the mirror, the window store, metrics and logs.
package windowprocessor

//go:generate ../../bin/mdatagen metadata.yaml

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processorhelper"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/mirrorcache"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/ottlevent"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelineeval"
	"github.com/otelcol-svc/otelcol-svc/internal/windowstore"
	"github.com/otelcol-svc/otelcol-svc/processor/windowprocessor/internal/metadata"
)

// NewFactory returns the processor's factory.
func NewFactory() processor.Factory {
	return processor.NewFactory(metadata.Type, createDefaultConfig,
		processor.WithLogs(createLogs, metadata.LogsStability))
}

func createDefaultConfig() component.Config {
	return &Config{SweepInterval: 30 * time.Second, Mirror: mirrorcache.DefaultExtension, MaxRecordBytes: ottlevent.DefaultMaxRecordBytes,
		MemoryMaxProjectBytes: windowstore.DefaultMaxProjectBytes, MemoryMaxBytes: windowstore.DefaultMaxBytes}
}

func createLogs(ctx context.Context, set processor.Settings, cfg component.Config, next consumer.Logs) (processor.Logs, error) {
	p, err := newProcessor(cfg.(*Config), set)
	if err != nil {
		return nil, err
	}
	l, err := processorhelper.NewLogs(ctx, set, cfg, next, p.processLogs,
		processorhelper.WithStart(p.start),
		processorhelper.WithShutdown(p.shutdown),
		processorhelper.WithCapabilities(consumer.Capabilities{MutatesData: true}))
	if err != nil {
		return nil, err
	}
	return pipelineeval.WithPasses(l), nil
}
