package sinkexporter

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/metric"

	"github.com/otelcol-svc/otelcol-svc/exporter/sinkexporter/internal/metadata"
	"github.com/otelcol-svc/otelcol-svc/internal/delivery"
)

// telemetry records how deliveries and their attempts end on the instruments that
// mdatagen generates from metadata.yaml, so every call site labels them the same way.
type telemetry struct {
	*metadata.TelemetryBuilder
	delivery.SharedMetrics
}

func newTelemetry(set component.TelemetrySettings) (*telemetry, error) {
	tb, err := metadata.NewTelemetryBuilder(set)
	if err != nil {
		return nil, err
	}
	return &telemetry{tb, delivery.SharedMetrics{
		TargetThrottledWaits: tb.TargetThrottledWaits, TargetCircuitChanges: tb.TargetCircuitChanges,
		RegisterDropped: tb.RegisterDeliveryLogDroppedCallback, RegisterFailed: tb.RegisterDeliveryLogFailedCallback,
		RegisterRetentionCut: tb.RegisterDeliveryLogRetentionCutCallback,
	}}, nil
}

var kindOutcomes = delivery.NewAttrSets("kind", "outcome")

func kindOutcome(kind, outcome string) metric.MeasurementOption {
	return kindOutcomes.Of(kind, outcome)
}

// Attempt counts an HTTP attempt of a delivery to a destination of kind who.
func (t *telemetry) Attempt(ctx context.Context, who, outcome string) {
	t.SinkDeliveryAttempts.Add(ctx, 1, kindOutcome(who, outcome))
}

func (t *telemetry) deliveryEnded(ctx context.Context, kind, outcome string, took time.Duration) {
	opt := kindOutcome(kind, outcome)
	t.SinkDeliveries.Add(ctx, 1, opt)
	if outcome != delivery.OutcomeSkipped {
		t.SinkDeliveryDuration.Record(ctx, took.Seconds(), opt)
	}
}
