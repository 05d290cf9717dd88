package sinkexporter

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/otelcol-svc/otelcol-svc/exporter/sinkexporter/internal/metadata"
	"github.com/otelcol-svc/otelcol-svc/internal/delivery"
)

// telemetry records how deliveries and their attempts end on the instruments that
// mdatagen generates from metadata.yaml, so every call site labels them the same way.
type telemetry struct{ *metadata.TelemetryBuilder }

func newTelemetry(set component.TelemetrySettings) (*telemetry, error) {
	tb, err := metadata.NewTelemetryBuilder(set)
	if err != nil {
		return nil, err
	}
	return &telemetry{tb}, nil
}

func kindOutcome(kind, outcome string) metric.MeasurementOption {
	return metric.WithAttributeSet(attribute.NewSet(attribute.String("kind", kind), attribute.String("outcome", outcome)))
}

func attr(k, v string) metric.MeasurementOption {
	return metric.WithAttributeSet(attribute.NewSet(attribute.String(k, v)))
}

// Attempt counts an HTTP attempt of a delivery to a destination of kind who.
func (t *telemetry) Attempt(ctx context.Context, who, outcome string) {
	t.SinkDeliveryAttempts.Add(ctx, 1, kindOutcome(who, outcome))
}

// ThrottledWait counts a delivery that waited for its destination's target.
func (t *telemetry) ThrottledWait(ctx context.Context, reason string) {
	t.TargetThrottledWaits.Add(ctx, 1, attr("reason", reason))
}

// CircuitChange counts a destination target's circuit entering state.
func (t *telemetry) CircuitChange(ctx context.Context, state string) {
	t.TargetCircuitChanges.Add(ctx, 1, attr("state", state))
}

func (t *telemetry) deliveryEnded(ctx context.Context, kind, outcome string, took time.Duration) {
	opt := kindOutcome(kind, outcome)
	t.SinkDeliveries.Add(ctx, 1, opt)
	if outcome != delivery.OutcomeSkipped {
		t.SinkDeliveryDuration.Record(ctx, took.Seconds(), opt)
	}
}

// ObserveLog reports the delivery log writer's losses.
func (t *telemetry) ObserveLog(dropped, failed, retentionCut func() int64) error {
	if err := t.RegisterDeliveryLogDroppedCallback(func(_ context.Context, o metric.Int64Observer) error {
		o.Observe(dropped())
		return nil
	}); err != nil {
		return err
	}
	if err := t.RegisterDeliveryLogFailedCallback(func(_ context.Context, o metric.Int64Observer) error {
		o.Observe(failed())
		return nil
	}); err != nil {
		return err
	}
	return t.RegisterDeliveryLogRetentionCutCallback(func(_ context.Context, o metric.Int64Observer) error {
		o.Observe(retentionCut())
		return nil
	})
}
