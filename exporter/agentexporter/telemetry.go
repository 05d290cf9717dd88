package agentexporter

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

const meterName = "github.com/otelcol-svc/otelcol-svc/exporter/agentexporter"

// Outcomes, the values of the "outcome" attribute.
const (
	outcomeDelivered    = "delivered"
	outcomeDeadLettered = "dead_lettered"
	attemptOK           = "ok"
	attemptRetryable    = "retryable"
	attemptFinal        = "final"
)

type telemetry struct {
	calls    metric.Int64Counter
	attempts metric.Int64Counter
	records  metric.Int64Counter
	duration metric.Float64Histogram
}

func newTelemetry(mp metric.MeterProvider) (*telemetry, error) {
	m := mp.Meter(meterName)
	var t telemetry
	var err error
	if t.calls, err = m.Int64Counter("otelcol_agent_calls",
		metric.WithDescription("Calls to agents that ended, by outcome (delivered, dead_lettered)."),
		metric.WithUnit("{call}")); err != nil {
		return nil, err
	}
	if t.attempts, err = m.Int64Counter("otelcol_agent_call_attempts",
		metric.WithDescription("HTTP attempts of agent calls, by outcome (ok, retryable, final)."),
		metric.WithUnit("{attempt}")); err != nil {
		return nil, err
	}
	if t.records, err = m.Int64Counter("otelcol_agent_records",
		metric.WithDescription("Records delivered to agents (a window call counts one)."),
		metric.WithUnit("{record}")); err != nil {
		return nil, err
	}
	if t.duration, err = m.Float64Histogram("otelcol_agent_call_duration",
		metric.WithDescription("Duration of agent calls from the first attempt to delivery or dead letter, retries included."),
		metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)); err != nil {
		return nil, err
	}
	return &t, nil
}

func outcomeAttr(v string) metric.MeasurementOption {
	return metric.WithAttributeSet(attribute.NewSet(attribute.String("outcome", v)))
}

func (t *telemetry) attempt(ctx context.Context, outcome string) {
	t.attempts.Add(ctx, 1, outcomeAttr(outcome))
}

func (t *telemetry) callEnded(ctx context.Context, outcome string, records int, took time.Duration) {
	opt := outcomeAttr(outcome)
	t.calls.Add(ctx, 1, opt)
	t.duration.Record(ctx, took.Seconds(), opt)
	if outcome == outcomeDelivered {
		t.records.Add(ctx, int64(records))
	}
}
