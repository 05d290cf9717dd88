package agentexporter

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/otelcol-svc/otelcol-svc/exporter/agentexporter/internal/metadata"
	"github.com/otelcol-svc/otelcol-svc/internal/delivery"
)

// telemetry records how calls and their attempts end on the instruments that
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

// Attempt counts an HTTP attempt of an agent call.
func (t *telemetry) Attempt(ctx context.Context, _, outcome string) {
	t.AgentCallAttempts.Add(ctx, 1, outcomeAttr(outcome))
}

// ThrottledWait counts a call that waited for the agent's target.
func (t *telemetry) ThrottledWait(ctx context.Context, reason string) {
	t.TargetThrottledWaits.Add(ctx, 1, attr("reason", reason))
}

// CircuitChange counts the agent target's circuit entering state.
func (t *telemetry) CircuitChange(ctx context.Context, state string) {
	t.TargetCircuitChanges.Add(ctx, 1, attr("state", state))
}

func attr(k, v string) metric.MeasurementOption {
	return metric.WithAttributeSet(attribute.NewSet(attribute.String(k, v)))
}

func (t *telemetry) callEnded(ctx context.Context, outcome string, records int, took time.Duration) {
	opt := outcomeAttr(outcome)
	t.AgentCalls.Add(ctx, 1, opt)
	t.AgentCallDuration.Record(ctx, took.Seconds(), opt)
	if outcome == delivery.OutcomeDelivered {
		t.AgentRecords.Add(ctx, int64(records))
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
