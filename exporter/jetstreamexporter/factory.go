// Package jetstreamexporter publishes each record of a request to its project's raw
// stream, creating the stream on first use, and returns only when JetStream has
// confirmed every record: a 2xx from the receiver means the records are stored.
package jetstreamexporter

//go:generate ../../bin/mdatagen metadata.yaml

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/config/configretry"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"

	"github.com/otelcol-svc/otelcol-svc/exporter/jetstreamexporter/internal/metadata"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/mirrorcache"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/natsclient"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/sharedcomponent"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
)

// defaultMaxRecordBytes leaves 48 KiB of the NATS default max_payload (1 MiB) for headers,
// which are at most a few hundred bytes here (signal, message id, source or request id).
const defaultMaxRecordBytes = 1_000_000

// defaultFreeTierEvents is the free tier of the specification (section 1.1).
const defaultFreeTierEvents = 10_000

// NewFactory returns the exporter's factory.
func NewFactory() exporter.Factory {
	return exporter.NewFactory(metadata.Type, createDefaultConfig,
		exporter.WithLogs(createLogs, metadata.LogsStability),
		exporter.WithTraces(createTraces, metadata.TracesStability),
		exporter.WithMetrics(createMetrics, metadata.MetricsStability),
	)
}

func createDefaultConfig() component.Config {
	return &Config{
		NATS:           natsclient.DefaultConfig(),
		Stream:         streams.DefaultLimits(),
		PublishTimeout: 5 * time.Second,
		MaxPending:     16384,
		Publish:        PublishAsync,
		MaxRecordBytes: defaultMaxRecordBytes,
		Results:        defaultResultsConfig(),
		Usage: UsageConfig{
			Enabled:        true,
			FreeTierEvents: defaultFreeTierEvents,
			Mirror:         mirrorcache.DefaultExtension,
		},
	}
}

var instances sharedcomponent.Map[*Config, *jsExporter]

func instance(set exporter.Settings, cfg component.Config) (*sharedcomponent.Component[*jsExporter], error) {
	c := cfg.(*Config)
	return instances.LoadOrStore(c, func() (*jsExporter, error) { return newExporter(c, set), nil })
}

// The exporter is synchronous on purpose: no queue (the receiver's answer must mean
// "stored") and no retry here (the client retries on 503, with the Retry-After we send).
func helperOptions(s *sharedcomponent.Component[*jsExporter]) []exporterhelper.Option {
	return []exporterhelper.Option{
		exporterhelper.WithStart(s.Start),
		exporterhelper.WithShutdown(s.Shutdown),
		exporterhelper.WithCapabilities(consumer.Capabilities{MutatesData: false}),
		exporterhelper.WithTimeout(exporterhelper.TimeoutConfig{Timeout: 0}),
		exporterhelper.WithRetry(configretry.BackOffConfig{Enabled: false}),
		exporterhelper.WithQueue(configoptional.None[exporterhelper.QueueBatchConfig]()),
	}
}

// helperSettings are set with exporterhelper's failure lines about refusals of the
// client's making moved to debug (refusals.go).
func helperSettings(set exporter.Settings) exporter.Settings {
	set.Logger = helperLogger(set.Logger)
	return set
}

func createLogs(ctx context.Context, set exporter.Settings, cfg component.Config) (exporter.Logs, error) {
	s, err := instance(set, cfg)
	if err != nil {
		return nil, err
	}
	return exporterhelper.NewLogs(ctx, helperSettings(set), cfg, countRefusals(s.Value, s.Value.limitResults(s.Value.pushLogs)), helperOptions(s)...)
}

func createTraces(ctx context.Context, set exporter.Settings, cfg component.Config) (exporter.Traces, error) {
	s, err := instance(set, cfg)
	if err != nil {
		return nil, err
	}
	return exporterhelper.NewTraces(ctx, helperSettings(set), cfg, countRefusals(s.Value, s.Value.pushTraces), helperOptions(s)...)
}

func createMetrics(ctx context.Context, set exporter.Settings, cfg component.Config) (exporter.Metrics, error) {
	s, err := instance(set, cfg)
	if err != nil {
		return nil, err
	}
	return exporterhelper.NewMetrics(ctx, helperSettings(set), cfg, countRefusals(s.Value, s.Value.pushMetrics), helperOptions(s)...)
}
