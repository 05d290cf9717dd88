package agentexporter

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/otelcol-svc/otelcol-svc/exporter/agentexporter/internal/metadata"
)

// Outcomes, the values of the "outcome" attribute (documentation.md).
const (
	outcomeDelivered    = "delivered"
	outcomeDeadLettered = "dead_lettered"
	attemptOK           = "ok"
	attemptRetryable    = "retryable"
	attemptFinal        = "final"
	// outcomeSkipped: the result's destination was removed or disabled meanwhile.
	outcomeSkipped = "skipped"
)

// telemetry records how calls, deliveries and their attempts end on the instruments that
// mdatagen generates from metadata.yaml, so every call site labels them the same way.
type telemetry struct{ *metadata.TelemetryBuilder }

func newTelemetry(set component.TelemetrySettings) (*telemetry, error) {
	tb, err := metadata.NewTelemetryBuilder(set)
	if err != nil {
		return nil, err
	}
	return &telemetry{tb}, nil
}

func outcomeAttr(v string) metric.MeasurementOption {
	return metric.WithAttributeSet(attribute.NewSet(attribute.String("outcome", v)))
}

func (t *telemetry) attempt(ctx context.Context, who, outcome string) {
	if who == "agent" {
		t.AgentCallAttempts.Add(ctx, 1, outcomeAttr(outcome))
		return
	}
	t.SinkDeliveryAttempts.Add(ctx, 1, kindOutcome(who, outcome))
}

func kindOutcome(kind, outcome string) metric.MeasurementOption {
	return metric.WithAttributeSet(attribute.NewSet(attribute.String("kind", kind), attribute.String("outcome", outcome)))
}

func (t *telemetry) deliveryEnded(ctx context.Context, kind, outcome string, took time.Duration) {
	opt := kindOutcome(kind, outcome)
	t.SinkDeliveries.Add(ctx, 1, opt)
	if outcome != outcomeSkipped {
		t.SinkDeliveryDuration.Record(ctx, took.Seconds(), opt)
	}
}

func (t *telemetry) callEnded(ctx context.Context, outcome string, records int, took time.Duration) {
	opt := outcomeAttr(outcome)
	t.AgentCalls.Add(ctx, 1, opt)
	t.AgentCallDuration.Record(ctx, took.Seconds(), opt)
	if outcome == outcomeDelivered {
		t.AgentRecords.Add(ctx, int64(records))
	}
}

// observeLog reports the delivery log writer's losses (none when the log is off).
func (t *telemetry) observeLog(l *dlog) error {
	if l == nil {
		return nil
	}
	if err := t.RegisterDeliveryLogDroppedCallback(func(_ context.Context, o metric.Int64Observer) error {
		o.Observe(l.w.Dropped())
		return nil
	}); err != nil {
		return err
	}
	if err := t.RegisterDeliveryLogFailedCallback(func(_ context.Context, o metric.Int64Observer) error {
		o.Observe(l.w.Failed())
		return nil
	}); err != nil {
		return err
	}
	return t.RegisterDeliveryLogRetentionCutCallback(func(_ context.Context, o metric.Int64Observer) error {
		o.Observe(l.w.RetentionCut())
		return nil
	})
}
