package sinkexporter

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelinedata"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/principal"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
)

// deliverResultN hands the exporter result n for sinkID, each its own output message.
func deliverResultN(ctx context.Context, r *running, projectID, sinkID string, n int) error {
	ld, lrs := pipelinedata.New()
	pipelinedata.Append(lrs, pipelinedata.Item{Body: fmt.Appendf(nil, `{"sink":%q,"n":%d}`, sinkID, n), Kind: pipelinedata.KindResult,
		Seq: uint64(n + 1), SinkID: sinkID, RequestID: "req_" + strconv.Itoa(n), MsgID: "out:" + sinkID + ":" + strconv.Itoa(n)})
	return r.exp.ConsumeLogs(principal.NewContext(ctx, principal.Principal{ProjectID: projectID}), ld)
}

// stormDestination answers 429 with Retry-After: 1 until the storm ends, then takes
// everything; it keeps what it took and counts what it refused.
type stormDestination struct {
	*agent
	mu      sync.Mutex
	ends    time.Time
	refused int
	taken   [][]byte
}

func newStormDestination(t testing.TB) *stormDestination {
	d := &stormDestination{ends: time.Now().Add(time.Hour)}
	d.agent = newAgent(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		body := d.requests()[n-1].body
		d.mu.Lock()
		defer d.mu.Unlock()
		if time.Now().Before(d.ends) {
			d.refused++
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		d.taken = append(d.taken, body)
		_, _ = io.WriteString(w, `{}`)
	})
	return d
}

// storm starts a storm lasting d from now.
func (d *stormDestination) storm(dur time.Duration) {
	d.mu.Lock()
	d.ends = time.Now().Add(dur)
	d.mu.Unlock()
}

func (d *stormDestination) refusals() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.refused
}

// takenPerSink is what the destination took, per sink, in arrival order.
func (d *stormDestination) takenPerSink() map[string][]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[string][]int{}
	for _, body := range d.taken {
		var b struct {
			Sink string `json:"sink"`
			N    int    `json:"n"`
		}
		if json.Unmarshal(body, &b) == nil {
			out[b.Sink] = append(out[b.Sink], b.N)
		}
	}
	return out
}

func p99(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*99/100)]
}

// calmLatencies delivers results of the calm project one after the other until stop (at
// least min of them), each timed from hand-over to settlement.
func calmLatencies(t testing.TB, r *running, from, least int, stop <-chan struct{}) []time.Duration {
	var out []time.Duration
	for n := from; ; n++ {
		select {
		case <-stop:
			if len(out) >= least {
				return out
			}
		default:
		}
		began := time.Now()
		if err := deliverResultN(context.Background(), r, "calm", "s_calm", n); err != nil {
			t.Errorf("calm delivery %d: %v", n, err)
			return out
		}
		out = append(out, time.Since(began))
	}
}

const (
	stormSenders = 6
	stormResults = 4
	stormFor     = 5 * time.Second
)

// In short: a destination answering 429 with Retry-After: 1 for 5s
// gets about one request a second from a project with several destinations' results
// waiting for it (not one per result per second), every result arrives afterwards in
// order, and another project's deliveries to its own destination meanwhile are as quick
// as without the storm.
func TestStormySlowsTheTargetNotOtherProjects(t *testing.T) {
	e := newEnv(t)
	dest := newStormDestination(t)
	calm := newAgent(t, nil)
	var sinks []mirror.Sink
	for i := range stormSenders {
		// Several sinks at one URL: each is its own stream of results, in parallel.
		sinks = append(sinks, mirror.Sink{ID: "s_" + strconv.Itoa(i), Kind: "webhook", URL: dest.srv.URL + "/hook/" + strconv.Itoa(i)})
	}
	e.putProject(t, sinkProject("storm", sinks...))
	e.putProject(t, sinkProject("calm", mirror.Sink{ID: "s_calm", Kind: "webhook", URL: calm.srv.URL}))
	r := e.start(t, func(c *Config) {
		c.DeliveryLog.Enabled = false
		c.Retry.MaxElapsedTime = 30 * time.Second
	})

	baseline := calmLatencies(t, r, 0, 200, closed())

	dest.storm(stormFor)
	done := make(chan struct{})
	var wg sync.WaitGroup
	for i := range stormSenders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range stormResults {
				assert.NoError(t, deliverResultN(context.Background(), r, "storm", "s_"+strconv.Itoa(i), n))
			}
		}()
	}
	go func() { wg.Wait(); close(done) }()
	during := calmLatencies(t, r, 1000, 200, done)
	<-done

	refused := dest.refusals()
	t.Logf("storm of %s: %d requests refused (Retry-After: 1) for %d results from %d sinks", stormFor, refused, stormSenders*stormResults, stormSenders)
	// The senders' first requests go before any answer says to wait; after that, one a
	// second. Without the target's pace each result retries on its own: ~30 here.
	assert.LessOrEqual(t, refused, stormSenders+int(stormFor/time.Second)+2, "a few requests, not one per result per second")

	taken := dest.takenPerSink()
	for i := range stormSenders {
		assert.Equal(t, []int{0, 1, 2, 3}, taken["s_"+strconv.Itoa(i)], "sink %d: every result, in order", i)
	}
	assert.Empty(t, e.deadLetters(t, "storm"), "nothing was lost to the storm")
	assert.Positive(t, r.sumAttr(t, "otelcol_target_throttled_waits", "reason", "retry_after"))

	base, storm := p99(baseline), p99(during)
	ratio := float64(storm) / float64(max(base, 5*time.Millisecond))
	t.Logf("calm project p99: %s without the storm, %s during it (%d and %d deliveries); ratio %.2f (baseline floored at 5ms)",
		base, storm, len(baseline), len(during), ratio)
	assert.Less(t, ratio, 10.0, "another project's deliveries are not held up by the storm")
}

func closed() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
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

// BenchmarkCalmP99UnderStorm is the other half of the fairness claim, as a number: the
// calm project's p99 per delivery without, then during, another project's storm against
// a target answering 429 with Retry-After (its p99-ratio should stay near 1).
func BenchmarkCalmP99UnderStorm(b *testing.B) {
	e := newEnv(b)
	dest := newStormDestination(b)
	calm := newAgent(b, nil)
	var sinks []mirror.Sink
	for i := range stormSenders {
		sinks = append(sinks, mirror.Sink{ID: "s_" + strconv.Itoa(i), Kind: "webhook", URL: dest.srv.URL})
	}
	e.putProject(b, sinkProject("storm", sinks...))
	e.putProject(b, sinkProject("calm", mirror.Sink{ID: "s_calm", Kind: "webhook", URL: calm.srv.URL}))
	r := e.start(b, func(c *Config) { c.DeliveryLog.Enabled = false })

	measure := func(from int) []time.Duration {
		out := make([]time.Duration, 0, b.N)
		for n := range b.N {
			began := time.Now()
			if err := deliverResultN(context.Background(), r, "calm", "s_calm", from+n); err != nil {
				b.Fatal(err)
			}
			out = append(out, time.Since(began))
		}
		return out
	}
	b.ResetTimer()
	base := p99(measure(0))

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range stormSenders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ctx.Err() == nil; n++ {
				_ = deliverResultN(ctx, r, "storm", "s_"+strconv.Itoa(i), n)
			}
		}()
	}
	// The storm is under way once the target has refused every sender.
	for dest.refusals() < stormSenders {
		time.Sleep(time.Millisecond)
	}
	storm := p99(measure(b.N))
	b.StopTimer()
	cancel()
	wg.Wait()

	b.ReportMetric(float64(base.Microseconds())/1000, "p99-base-ms")
	b.ReportMetric(float64(storm.Microseconds())/1000, "p99-storm-ms")
	b.ReportMetric(float64(storm)/float64(max(base, time.Microsecond)), "p99-ratio")
}
