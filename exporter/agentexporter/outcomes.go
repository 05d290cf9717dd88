package agentexporter

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/metric"

	"github.com/otelcol-svc/otelcol-svc/exporter/agentexporter/internal/metadata"
	"github.com/otelcol-svc/otelcol-svc/internal/delivery"
)

// telemetry records how calls and their attempts end on the instruments that
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

var outcomes = delivery.NewAttrSets("outcome")

func outcomeAttr(v string) metric.MeasurementOption { return outcomes.Of(v) }

// Attempt counts an HTTP attempt of an agent call.
func (t *telemetry) Attempt(ctx context.Context, _, outcome string) {
	t.AgentCallAttempts.Add(ctx, 1, outcomeAttr(outcome))
}

func (t *telemetry) callEnded(ctx context.Context, outcome string, records int, took time.Duration) {
	opt := outcomeAttr(outcome)
	t.AgentCalls.Add(ctx, 1, opt)
	t.AgentCallDuration.Record(ctx, took.Seconds(), opt)
	if outcome == delivery.OutcomeDelivered {
		t.AgentRecords.Add(ctx, int64(records))
	}
}
