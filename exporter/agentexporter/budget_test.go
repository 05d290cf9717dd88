package agentexporter

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelinedata"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/principal"
	"github.com/otelcol-svc/otelcol-svc/internal/deliverylog"
	"github.com/otelcol-svc/otelcol-svc/internal/pipelinectx"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// clock is a time tests move by hand, shared by the exporters of one test.
type clock struct{ t atomic.Int64 }

func newClock(t time.Time) *clock {
	c := &clock{}
	c.t.Store(t.UnixNano())
	return c
}

func (c *clock) now() time.Time      { return time.Unix(0, c.t.Load()).UTC() }
func (c *clock) add(d time.Duration) { c.t.Add(int64(d)) }

// storm sends n legacy records numbered from seq on, one call each (batch_size 1), and
// returns the outcome the receiver would settle.
func storm(t *testing.T, r *running, project string, seq uint64, n int) (*deliverylog.Outcome, []uint64) {
	t.Helper()
	ld, lrs := pipelinedata.New()
	var seqs []uint64
	for i := range n {
		s := seq + uint64(i)
		pipelinedata.Append(lrs, pipelinedata.Item{Body: fmt.Appendf(nil, `{"n":%d}`, s), Signal: "log", Seq: s})
		seqs = append(seqs, s)
	}
	o := deliverylog.NewOutcome()
	ctx := pipelinectx.WithOutcome(principal.NewContext(context.Background(), principal.Principal{ProjectID: project}), o)
	require.NoError(t, r.exp.ConsumeLogs(ctx, ld))
	return o, seqs
}

func settle(t *testing.T, e *env, project string, batches map[*deliverylog.Outcome][]uint64) deliverylog.Counters {
	t.Helper()
	led, err := deliverylog.OpenLedger(context.Background(), e.js, time.Hour)
	require.NoError(t, err)
	for o, seqs := range batches {
		require.NoError(t, led.Settle(context.Background(), project, seqs, o))
	}
	require.NoError(t, led.Close(context.Background()))
	return e.ledger(t, project)
}

// max_calls_per_minute 5 under a storm, with two pipeline processes
// sharing the project: 5 calls in the minute, the rest counted as suppressed in the
// ledger, the next minute 5 more.
func TestCallBudgetPerMinuteUnderAStormAcrossProcesses(t *testing.T) {
	e := newEnv(t)
	a := newAgent(t, nil)
	p := project("p1", a.srv.URL)
	p.Pipeline.BatchSize = 1
	p.Pipeline.MaxCallsPerMinute = 5
	e.putProject(t, p)
	clk := newClock(time.Date(2026, 11, 23, 16, 4, 10, 0, time.UTC))
	withClock := func(c *Config) { c.now = clk.now }
	r1, r2 := e.start(t, withClock), e.start(t, withClock)

	batches := map[*deliverylog.Outcome][]uint64{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i, r := range []*running{r1, r2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o, seqs := storm(t, r, "p1", uint64(1+i*100), 40)
			mu.Lock()
			batches[o] = seqs
			mu.Unlock()
		}()
	}
	wg.Wait()
	assert.Len(t, a.requests(), 5, "5 calls in the minute, whichever process made them")

	c := settle(t, e, "p1", batches)
	assert.EqualValues(t, 5, c.AgentCalls)
	assert.EqualValues(t, 75, c.Suppressed, "the rest are counted as suppressed, never lost")
	assert.EqualValues(t, 75, c.Dropped)
	assert.EqualValues(t, 75, r1.sum(t, "otelcol_agent_calls_suppressed", "")+r2.sum(t, "otelcol_agent_calls_suppressed", ""))

	warned := 0
	for _, r := range []*running{r1, r2} {
		for _, l := range r.logs.FilterMessageSnippet("call budget spent").All() {
			assert.Equal(t, zapcore.WarnLevel, l.Level)
			assert.Equal(t, "max_calls_per_minute", l.ContextMap()["limit"])
			assert.Equal(t, "2026-11-23T16:04", l.ContextMap()["window_utc"])
			warned++
		}
	}
	assert.LessOrEqual(t, warned, 2, "once per process and window, not once per call")
	assert.GreaterOrEqual(t, warned, 1)

	clk.add(time.Minute)
	o, seqs := storm(t, r1, "p1", 1000, 10)
	assert.Len(t, a.requests(), 10, "the next minute has its own 5")
	c = settle(t, e, "p1", map[*deliverylog.Outcome][]uint64{o: seqs})
	assert.EqualValues(t, 10, c.AgentCalls)
	assert.EqualValues(t, 80, c.Suppressed)
	assert.Len(t, r1.logs.FilterMessageSnippet("call budget spent").FilterField(zap.String("window_utc", "2026-11-23T16:05")).All(), 1,
		"a new window is logged again")
}

// max_calls_per_day counts calls across minutes and starts again at midnight UTC.
func TestCallBudgetPerDay(t *testing.T) {
	e := newEnv(t)
	a := newAgent(t, nil)
	p := project("p1", a.srv.URL)
	p.Pipeline.BatchSize = 1
	p.Pipeline.MaxCallsPerMinute = 2
	p.Pipeline.MaxCallsPerDay = 3
	e.putProject(t, p)
	clk := newClock(time.Date(2026, 11, 23, 23, 58, 30, 0, time.UTC))
	r := e.start(t, func(c *Config) { c.now = clk.now })

	storm(t, r, "p1", 1, 4)
	assert.Len(t, a.requests(), 2, "the minute's budget first")
	clk.add(time.Minute)
	storm(t, r, "p1", 10, 4)
	assert.Len(t, a.requests(), 3, "then the day's")
	assert.EqualValues(t, 2, sumBudget(t, r, "per_minute"))
	assert.EqualValues(t, 3, sumBudget(t, r, "per_day"))
	assert.Len(t, r.logs.FilterMessageSnippet("call budget spent").FilterField(zap.String("limit", "max_calls_per_day")).All(), 1)

	clk.add(time.Minute) // 00:00:30 the next day
	storm(t, r, "p1", 20, 4)
	assert.Len(t, a.requests(), 5, "a new UTC day, a new budget (within the minute's)")
}

// Projects without a budget make no round trip to the bucket and are never held back.
func TestNoBudgetNoBucket(t *testing.T) {
	e := newEnv(t)
	a := newAgent(t, nil)
	p := project("p1", a.srv.URL)
	p.Pipeline.BatchSize = 1
	e.putProject(t, p)
	r := e.start(t, nil)
	storm(t, r, "p1", 1, 20)
	assert.Len(t, a.requests(), 20)
	_, err := e.js.KeyValue(context.Background(), BudgetBucket)
	assert.Error(t, err, "the bucket is only created by a project that has a budget")
}

// Two processes' budgets racing for one project's calls: exactly the limit passes.
func TestBudgetIsExactUnderConcurrency(t *testing.T) {
	n := testenv.StartNATS(t)
	_, js1 := testenv.Connect(t, n.URL())
	_, js2 := testenv.Connect(t, n.URL())
	now := func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }
	budgets := []*callBudget{newCallBudget(js1, 1, now), newCallBudget(js2, 1, now)}
	var passed atomic.Int64
	var wg sync.WaitGroup
	for i := range 60 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, _, err := budgets[i%2].take(context.Background(), "p1", 25, 0)
			assert.NoError(t, err)
			if v == withinBudget {
				passed.Add(1)
			}
		}()
	}
	wg.Wait()
	assert.EqualValues(t, 25, passed.Load())
}

func TestWindowsOnlyMoveForward(t *testing.T) {
	at := time.Date(2026, 11, 23, 16, 4, 59, 0, time.UTC)
	e := advance(budgetEntry{}, at)
	assert.Equal(t, budgetEntry{Minute: "2026-11-23T16:04", Day: "2026-11-23"}, e)
	e.M, e.D = 5, 7
	assert.Equal(t, e, advance(e, at.Add(-2*time.Minute)), "a lagging clock counts in the newer window")
	next := advance(e, at.Add(time.Second))
	assert.Equal(t, budgetEntry{Minute: "2026-11-23T16:05", M: 0, Day: "2026-11-23", D: 7}, next)
	tomorrow := advance(e, time.Date(2026, 11, 24, 0, 0, 0, 0, time.FixedZone("x", 3600)))
	assert.Equal(t, budgetEntry{Minute: "2026-11-23T23:00", Day: "2026-11-23", D: 7}, tomorrow,
		"windows are UTC whatever the clock's zone")
}

// sumBudget reads agent_calls_suppressed for one budget.
func sumBudget(t *testing.T, r *running, budget string) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, r.reader.Collect(context.Background(), &rm))
	var total int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if d, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == "otelcol_agent_calls_suppressed" {
				for _, p := range d.DataPoints {
					if v, _ := p.Attributes.Value("budget"); v.AsString() == budget {
						total += p.Value
					}
				}
			}
		}
	}
	return total
}
