// Package triggerprocessor is legacy mode (window_enabled false): each record is kept
// only when the project's OTTL trigger matches it, then reshaped by the project's OTTL
// transforms. Records of window-mode projects pass through for the window processor.
// The evaluation is internal/collector/pipelineeval's (the dry run's too); this package
// adapts it to the collector: the mirror, the cooldown store, metrics and logs.
package triggerprocessor

//go:generate ../../bin/mdatagen metadata.yaml

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processorhelper"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/mirrorcache"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/ottlevent"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelineeval"
	"github.com/otelcol-svc/otelcol-svc/processor/triggerprocessor/internal/metadata"
)

// NewFactory returns the processor's factory.
func NewFactory() processor.Factory {
	return processor.NewFactory(metadata.Type, func() component.Config {
		return &Config{Mirror: mirrorcache.DefaultExtension, MaxRecordBytes: ottlevent.DefaultMaxRecordBytes}
	},
		processor.WithLogs(createLogs, metadata.LogsStability))
}

func createLogs(ctx context.Context, set processor.Settings, cfg component.Config, next consumer.Logs) (processor.Logs, error) {
	p, err := newProcessor(set)
	if err != nil {
		return nil, err
	}
	p.mirror, p.redisURL, p.maxRecordBytes = cfg.(*Config).Mirror, cfg.(*Config).RedisURL, cfg.(*Config).MaxRecordBytes
	l, err := processorhelper.NewLogs(ctx, set, cfg, next, p.processLogs,
		processorhelper.WithStart(p.start),
		processorhelper.WithShutdown(p.shutdown),
		processorhelper.WithCapabilities(consumer.Capabilities{MutatesData: true}))
	if err != nil {
		return nil, err
	}
	return pipelineeval.WithPasses(l), nil
}
