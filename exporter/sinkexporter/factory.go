// Package sinkexporter delivers a project's agent results to its destinations
// (docs/contract.md#section-8): webhooks, signed the Standard Webhooks way, and chat
// incoming webhooks (Slack, Discord, Teams), in each destination's order, retried with
// backoff within a budget and moved to the project's dead-letter stream when they cannot
// be delivered. It is the sink role's exporter, after the jetstream receiver in output
// mode; the agent exporter calls the agents.
package sinkexporter

//go:generate ../../bin/mdatagen metadata.yaml

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/config/configretry"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"

	"github.com/otelcol-svc/otelcol-svc/exporter/sinkexporter/internal/metadata"
)

// NewFactory returns the exporter's factory.
func NewFactory() exporter.Factory {
	return exporter.NewFactory(metadata.Type, createDefaultConfig,
		exporter.WithLogs(createLogs, metadata.LogsStability),
	)
}

func createDefaultConfig() component.Config { return defaultConfig() }

// The exporter is synchronous on purpose: no queue (the JetStream receiver acks a result
// only once it was delivered or dead-lettered) and no helper retry (the exporter retries
// each delivery itself, within its budget).
func createLogs(ctx context.Context, set exporter.Settings, cfg component.Config) (exporter.Logs, error) {
	e, err := newExporter(cfg.(*Config), set)
	if err != nil {
		return nil, err
	}
	return exporterhelper.NewLogs(ctx, set, cfg, e.pushLogs,
		exporterhelper.WithStart(e.Start),
		exporterhelper.WithShutdown(e.Shutdown),
		exporterhelper.WithCapabilities(consumer.Capabilities{MutatesData: false}),
		exporterhelper.WithTimeout(exporterhelper.TimeoutConfig{Timeout: 0}),
		exporterhelper.WithRetry(configretry.BackOffConfig{Enabled: false}),
		exporterhelper.WithQueue(configoptional.None[exporterhelper.QueueBatchConfig]()),
	)
}
