// Package agentexporter POSTs a project's records to its AI agent (docs/contract.md#section-7):
// records in JSON-array batches of the project's batch_size, window calls one by one,
// signed the Standard Webhooks way, retried with backoff within a budget, and moved to the
// project's dead-letter stream when they cannot be delivered.
package agentexporter

//go:generate ../../bin/mdatagen metadata.yaml

import (
	"context"
	"errors"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/config/configretry"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"

	"github.com/otelcol-svc/otelcol-svc/exporter/agentexporter/internal/metadata"
)

// NewFactory returns the exporter's factory.
func NewFactory() exporter.Factory {
	return exporter.NewFactory(metadata.Type, createDefaultConfig,
		exporter.WithLogs(createLogs, metadata.LogsStability),
	)
}

func createDefaultConfig() component.Config { return defaultConfig() }

// oldSinkName is the name the sink role once gave this exporter (agent/sink), when it
// delivered results too.
const oldSinkName = "sink"

var errOldSinkName = errors.New("the agent exporter no longer delivers agent results to sinks: " +
	"rename `agent/sink` to `sink` (the sink exporter, which takes the same settings except max_call_bytes) under exporters and in the sink pipeline")

// The exporter is synchronous on purpose: no queue (the JetStream receiver acks a raw
// message only when its call was delivered or dead-lettered) and no helper retry (the
// exporter retries each call itself, within its budget, keeping the request id).
func createLogs(ctx context.Context, set exporter.Settings, cfg component.Config) (exporter.Logs, error) {
	if set.ID.Name() == oldSinkName {
		return nil, errOldSinkName
	}
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
