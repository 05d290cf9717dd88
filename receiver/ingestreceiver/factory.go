// Package ingestreceiver is the HTTP front door on port 4318: OTLP/HTTP logs, traces and
// metrics, JSON events and push sources' payloads, each authenticated to a project by the
// projectauth extension. It hands records to the pipeline synchronously, so its answer
// reflects whether they were stored. It also serves the console's read API (a project's
// recent records and their field paths, its delivery log, ledger and traces, and replays of
// its deliveries), read straight from NATS.
package ingestreceiver

//go:generate ../../bin/mdatagen metadata.yaml

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/config/confignet"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/receiver"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/sharedcomponent"
	"github.com/otelcol-svc/otelcol-svc/receiver/ingestreceiver/internal/console"
	"github.com/otelcol-svc/otelcol-svc/receiver/ingestreceiver/internal/metadata"
)

// defaultMaxObjects is max_objects_per_request's default: the free tier's whole month of
// records in one request, far more than any webhook or batch sends at once.
const defaultMaxObjects = 10000

// defaultMaxRecords is max_records_per_request's default, the events' object limit: an
// OpenTelemetry SDK or collector sends at most a few thousand per request (the batch
// processor's default is 8192).
const defaultMaxRecords = 10000

// defaultMaxInflightBytes lets about three requests at the body limit (10 MiB, 10,000
// records: 50 MiB each by the admission estimate) decode at once, or thousands of
// ordinary ones, keeping the receiver's memory under 512 MiB (measured:
// cmd/otelcol-svc/limits_e2e_test.go).
const defaultMaxInflightBytes = 128 << 20

const (
	defaultReadHeaderTimeout = 10 * time.Second
	defaultIdleTimeout       = time.Minute
	// defaultReadBodyTimeout lets a 10 MiB body arrive at 3 Mbit/s; a client slower than
	// that sends smaller requests.
	defaultReadBodyTimeout = 30 * time.Second
	// defaultMinBodyRate, 64 KiB/s (512 kbit/s), is under any connection that uploads at
	// all, and makes a trickling sender's 10 MiB buffer cost it a sending rate: holding it
	// for read_body_timeout takes sending at least 2 MB more.
	defaultMinBodyRate = 64 << 10
	// defaultBodyHoldWindow holds a body that has grown past its first buffer to its
	// buffer's size every 10 s: a 10 MiB body must arrive at 1 MiB/s (8 Mbit/s) towards
	// its end, a 1 MiB one at 100 KiB/s. A client burst-sending 9.5 MB and trickling the
	// rest is ended about 3 s after its burst instead of holding 10 MiB for 15 s.
	defaultBodyHoldWindow = 10 * time.Second
)

// NewFactory returns the receiver's factory.
func NewFactory() receiver.Factory {
	return receiver.NewFactory(metadata.Type, createDefaultConfig,
		receiver.WithLogs(createLogs, metadata.LogsStability),
		receiver.WithTraces(createTraces, metadata.TracesStability),
		receiver.WithMetrics(createMetrics, metadata.MetricsStability),
	)
}

func createDefaultConfig() component.Config {
	server := confighttp.NewDefaultServerConfig()
	server.NetAddr = confignet.AddrConfig{Endpoint: "0.0.0.0:4318", Transport: confignet.TransportTypeTCP}
	server.MaxRequestBodySize = 10 << 20
	// A public endpoint must not let a client hold a connection by trickling its headers
	// (confighttp's default allows a minute). Ten seconds is ample for any real client.
	server.ReadHeaderTimeout = defaultReadHeaderTimeout
	// Idle keep-alive connections are closed after a minute: long enough to outlast the
	// usual load balancer idle timeouts (60 s), which must be the shorter side.
	server.Keepalive = configoptional.Some(confighttp.KeepaliveServerConfig{IdleTimeout: defaultIdleTimeout})
	return &Config{ServerConfig: server, RetryAfter: 5 * time.Second, MaxObjectsPerRequest: defaultMaxObjects,
		MaxRecordsPerRequest: defaultMaxRecords, MaxInflightBytes: defaultMaxInflightBytes,
		ReadBodyTimeout: defaultReadBodyTimeout, MinBodyRate: defaultMinBodyRate,
		BodyHoldWindow: defaultBodyHoldWindow,
		DrainDelay:     2 * time.Second, DrainTimeout: 3 * time.Second,
		DeliveryLog: DeliveryLogConfig{PipelineDurable: console.DefaultPipelineDurable, SinkDurable: console.DefaultSinkDurable, ReplayReplicas: 1},
		Console:     ConsoleConfig{AllowedOrigins: defaultDashboardOrigins()}}
}

// defaultDashboardOrigins are where `make run` serves the dashboard
// (docs/contract.md#section-13), under each name a browser on the same machine may open it by: a browser sends the
// Origin as typed, so a page opened at http://127.0.0.1:8080 got no CORS answer from a
// receiver allowing only http://localhost:8080, and Recent events and Fields broke.
func defaultDashboardOrigins() []string {
	return []string{"http://localhost:8080", "http://127.0.0.1:8080", "http://[::1]:8080"}
}

var instances sharedcomponent.Map[*Config, *ingestReceiver]

func instance(set receiver.Settings, cfg component.Config) (*sharedcomponent.Component[*ingestReceiver], error) {
	c := cfg.(*Config)
	return instances.LoadOrStore(c, func() (*ingestReceiver, error) { return newReceiver(c, set) })
}

func createLogs(_ context.Context, set receiver.Settings, cfg component.Config, next consumer.Logs) (receiver.Logs, error) {
	s, err := instance(set, cfg)
	if err != nil {
		return nil, err
	}
	s.Value.logs = next
	return s, nil
}

func createTraces(_ context.Context, set receiver.Settings, cfg component.Config, next consumer.Traces) (receiver.Traces, error) {
	s, err := instance(set, cfg)
	if err != nil {
		return nil, err
	}
	s.Value.traces = next
	return s, nil
}

func createMetrics(_ context.Context, set receiver.Settings, cfg component.Config, next consumer.Metrics) (receiver.Metrics, error) {
	s, err := instance(set, cfg)
	if err != nil {
		return nil, err
	}
	s.Value.metrics = next
	return s, nil
}
