package agentexporter

import (
	"context"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/otelcol-svc/otelcol-svc/internal/delivery"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
)

// A target failing without a Retry-After opens its circuit: the deliveries waiting for
// it cost one probe per interval, not one request per retry, and end dead-lettered saying
// the circuit was open; once the target answers, a probe closes it and deliveries go on.
func TestCircuitLimitsAFailingTargetToProbes(t *testing.T) {
	e := newEnv(t)
	var up atomic.Bool
	a := newAgent(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		if !up.Load() {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		_, _ = io.WriteString(w, `{}`)
	})
	e.putProject(t, project("down", a.srv.URL))
	const (
		callers = 5
		budget  = 2 * time.Second
		probe   = 400 * time.Millisecond
	)
	r := e.start(t, func(c *Config) {
		c.DeliveryLog.Enabled = false
		c.Retry.MaxElapsedTime = budget
		c.Target.Circuit = delivery.CircuitConfig{Failures: 3, MinDuration: 100 * time.Millisecond, ProbeInterval: probe}
	})

	var wg sync.WaitGroup
	for range callers {
		wg.Add(1)
		go func() { defer wg.Done(); assert.NoError(t, consume(r, "down", records(1))) }()
	}
	wg.Wait()
	sent := len(a.requests())
	// Backoff of 10-50ms for 2s would be ~80 requests per call, ~400 in all.
	t.Logf("%d calls over a %s budget against a failing agent: %d requests", callers, budget, sent)
	assert.Less(t, sent, 60, "after the circuit opened, one probe per interval")

	dl := e.deadLetters(t, "down")
	require.Len(t, dl, callers)
	for _, m := range dl {
		assert.Contains(t, m.Header.Get(streams.HeaderDLQReason), "circuit to "+a.srv.URL)
	}
	assert.Positive(t, r.sumAttr(t, "otelcol_target_circuit_changes", "state", "open"))
	assert.Positive(t, r.sumAttr(t, "otelcol_target_circuit_changes", "state", "half_open"))

	up.Store(true)
	before := len(a.requests())
	require.NoError(t, consume(r, "down", records(1)))
	assert.Equal(t, before+1, len(a.requests()), "the probe is the call, and it closes the circuit")
	assert.Equal(t, int64(1), r.sumAttr(t, "otelcol_target_circuit_changes", "state", "closed"))
	opened := r.logs.FilterMessageSnippet("circuit opened").All()
	require.Len(t, opened, 1, "the owner is told once, not per probe")
	assert.Equal(t, "down", opened[0].ContextMap()["project"])
	assert.Equal(t, a.srv.URL, opened[0].ContextMap()["target"])
	assert.Equal(t, 1, r.logs.FilterMessageSnippet("circuit closed").Len())
	require.NoError(t, consume(r, "down", records(1)))
	assert.Len(t, e.deadLetters(t, "down"), callers)
}

// sumAttr reads a counter's total over the points whose attribute key is value.
func (r *running) sumAttr(t *testing.T, name, key, value string) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, r.reader.Collect(context.Background(), &rm))
	var total int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if d, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == name {
				for _, p := range d.DataPoints {
					if v, ok := p.Attributes.Value(attribute.Key(key)); ok && v.AsString() == value {
						total += p.Value
					}
				}
			}
		}
	}
	return total
}
