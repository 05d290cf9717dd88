// Package jetstreamreceiver consumes each project's raw stream with a durable pull
// consumer and explicit acks, and feeds the records to the pipeline role's collector
// pipeline. A message is acked only when the pipeline has handled it (dropped by the
// trigger, delivered, or dead-lettered), so a process killed at any instant loses nothing.
package jetstreamreceiver

//go:generate ../../bin/mdatagen metadata.yaml

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/receiver"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/mirrorcache"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/natsclient"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
	"github.com/otelcol-svc/otelcol-svc/receiver/jetstreamreceiver/internal/metadata"
)

// NewFactory returns the receiver's factory.
func NewFactory() receiver.Factory {
	return receiver.NewFactory(metadata.Type, createDefaultConfig,
		receiver.WithLogs(createLogs, metadata.LogsStability))
}

func createDefaultConfig() component.Config {
	return &Config{
		NATS:      natsclient.DefaultConfig(),
		Mirror:    mirrorcache.DefaultExtension,
		Consume:   ConsumeRaw,
		Stream:    streams.DefaultLimits(),
		Durable:   "svc-pipeline",
		BatchSize: 1000,
		// Room for a few batches past one whose group is being retried.
		MaxInflightBatches: 4,
		Linger:             50 * time.Millisecond,
		AckWait:            60 * time.Second,
		RetryDelay:         5 * time.Second,
		// See Config.DrainTimeout: a hung batch must be back with another process within
		// 2 s of SIGTERM.
		DrainTimeout: time.Second,
		// Long enough that a project sending every few seconds keeps its consumer.
		IdleTimeout:   30 * time.Second,
		SweepInterval: 5 * time.Minute,
		Ledger:        true,
	}
}

func createLogs(_ context.Context, set receiver.Settings, cfg component.Config, next consumer.Logs) (receiver.Logs, error) {
	return newReceiver(cfg.(*Config), set, next)
}
