package delivery

import (
	"context"
	"sync"

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

var (
	reasonAttrs = NewAttrSets("reason")
	stateAttrs  = NewAttrSets("state")
)

// Attr is a measurement's one attribute.
func Attr(k, v string) metric.MeasurementOption {
	switch k {
	case "reason":
		return reasonAttrs.Of(v)
	case "state":
		return stateAttrs.Of(v)
	}
	return metric.WithAttributeSet(attribute.NewSet(attribute.String(k, v)))
}

// maxAttrSets bounds an AttrSets: the values are the few outcomes and kinds the code
// names, and a value beyond them (a destination kind of a newer control plane) is
// measured all the same, only built each time.
const maxAttrSets = 64

// AttrSets gives a measurement's attributes (one or two, by the keys given to
// NewAttrSets) built once per combination of values: each delivery records several
// measurements, and building a set sorts and allocates, about a tenth of a delivery's
// CPU when done per call.
type AttrSets struct {
	k1, k2 string
	mu     sync.RWMutex
	opts   map[[2]string]metric.MeasurementOption
}

// NewAttrSets is a cache of the attributes k1 (and k2, when given).
func NewAttrSets(k1 string, k2 ...string) *AttrSets {
	a := &AttrSets{k1: k1, opts: map[[2]string]metric.MeasurementOption{}}
	if len(k2) > 0 {
		a.k2 = k2[0]
	}
	return a
}

// Of is the measurement option of the values v1 (and v2 for the second key).
func (a *AttrSets) Of(v1 string, v2 ...string) metric.MeasurementOption {
	key := [2]string{v1}
	if a.k2 != "" && len(v2) > 0 {
		key[1] = v2[0]
	}
	a.mu.RLock()
	o, ok := a.opts[key]
	a.mu.RUnlock()
	if ok {
		return o
	}
	attrs := []attribute.KeyValue{attribute.String(a.k1, key[0])}
	if a.k2 != "" {
		attrs = append(attrs, attribute.String(a.k2, key[1]))
	}
	o = metric.WithAttributeSet(attribute.NewSet(attrs...))
	a.mu.Lock()
	if len(a.opts) < maxAttrSets {
		a.opts[key] = o
	}
	a.mu.Unlock()
	return o
}
