package delivery

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// SharedMetrics are the instruments both delivering exporters declare in their
// metadata.yaml under the same names and scope (otelcol_target_*, otelcol_delivery_log_*):
// each exporter fills it from its mdatagen TelemetryBuilder, and the engine's Telemetry
// methods for them are written once here. An exporter's telemetry embeds it and adds
// Attempt, whose instrument is its own.
type SharedMetrics struct {
	TargetThrottledWaits metric.Int64Counter
	TargetCircuitChanges metric.Int64Counter
	// The builder's Register*Callback methods of the delivery log's observable counters.
	RegisterDropped, RegisterFailed, RegisterRetentionCut func(metric.Int64Callback) error
}

// ThrottledWait counts a delivery that waited for its target, by reason.
func (m SharedMetrics) ThrottledWait(ctx context.Context, reason string) {
	m.TargetThrottledWaits.Add(ctx, 1, Attr("reason", reason))
}

// CircuitChange counts a target's circuit entering state.
func (m SharedMetrics) CircuitChange(ctx context.Context, state string) {
	m.TargetCircuitChanges.Add(ctx, 1, Attr("state", state))
}

// ObserveLog reports the delivery log writer's losses.
func (m SharedMetrics) ObserveLog(dropped, failed, retentionCut func() int64) error {
	for _, r := range []struct {
		register func(metric.Int64Callback) error
		value    func() int64
	}{{m.RegisterDropped, dropped}, {m.RegisterFailed, failed}, {m.RegisterRetentionCut, retentionCut}} {
		value := r.value
		if err := r.register(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(value())
			return nil
		}); err != nil {
			return err
		}
	}
	return nil
}

// Attr is a measurement's one attribute.
func Attr(k, v string) metric.MeasurementOption {
	return metric.WithAttributeSet(attribute.NewSet(attribute.String(k, v)))
}
