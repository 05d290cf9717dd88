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
	// outcomeSkipped: the result's destination was removed or disabled meanwhile.
	outcomeSkipped = "skipped"
)

type telemetry struct {
	calls    metric.Int64Counter
	attempts metric.Int64Counter
	records  metric.Int64Counter
	duration metric.Float64Histogram

	deliveries       metric.Int64Counter
	deliveryAttempts metric.Int64Counter
	deliveryDuration metric.Float64Histogram
}

// latencyBuckets suit both a local endpoint (milliseconds) and a long retry (minutes).
var latencyBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}

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
		metric.WithExplicitBucketBoundaries(latencyBuckets...)); err != nil {
		return nil, err
	}
	if t.deliveries, err = m.Int64Counter("otelcol_sink_deliveries",
		metric.WithDescription("Agent results to sink destinations that ended, by kind (webhook, chat) and outcome (delivered, dead_lettered, skipped)."),
		metric.WithUnit("{delivery}")); err != nil {
		return nil, err
	}
	if t.deliveryAttempts, err = m.Int64Counter("otelcol_sink_delivery_attempts",
		metric.WithDescription("HTTP attempts of sink deliveries, by kind and outcome (ok, retryable, final)."),
		metric.WithUnit("{attempt}")); err != nil {
		return nil, err
	}
	if t.deliveryDuration, err = m.Float64Histogram("otelcol_sink_delivery_duration",
		metric.WithDescription("Duration of sink deliveries from the first attempt to delivery or dead letter, retries included."),
		metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(latencyBuckets...)); err != nil {
		return nil, err
	}
	return &t, nil
}

func outcomeAttr(v string) metric.MeasurementOption {
	return metric.WithAttributeSet(attribute.NewSet(attribute.String("outcome", v)))
}

func (t *telemetry) attempt(ctx context.Context, who, outcome string) {
	if who == "agent" {
		t.attempts.Add(ctx, 1, outcomeAttr(outcome))
		return
	}
	t.deliveryAttempts.Add(ctx, 1, kindOutcome(who, outcome))
}

func kindOutcome(kind, outcome string) metric.MeasurementOption {
	return metric.WithAttributeSet(attribute.NewSet(attribute.String("kind", kind), attribute.String("outcome", outcome)))
}

func (t *telemetry) deliveryEnded(ctx context.Context, kind, outcome string, took time.Duration) {
	opt := kindOutcome(kind, outcome)
	t.deliveries.Add(ctx, 1, opt)
	if outcome != outcomeSkipped {
		t.deliveryDuration.Record(ctx, took.Seconds(), opt)
	}
}

func (t *telemetry) callEnded(ctx context.Context, outcome string, records int, took time.Duration) {
	opt := outcomeAttr(outcome)
	t.calls.Add(ctx, 1, opt)
	t.duration.Record(ctx, took.Seconds(), opt)
	if outcome == outcomeDelivered {
		t.records.Add(ctx, int64(records))
	}
}
