package agentexporter

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelinedata"
	"github.com/otelcol-svc/otelcol-svc/internal/deliverylog"
	"github.com/otelcol-svc/otelcol-svc/internal/pipelinectx"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
)

// delivery waits until the log holds delivery id of project in a state ok accepts.
func (e *env) delivery(t *testing.T, project, id string, ok func(deliverylog.Delivery) bool) deliverylog.Delivery {
	t.Helper()
	ctx := context.Background()
	var d deliverylog.Delivery
	require.Eventually(t, func() bool {
		s, err := e.js.Stream(ctx, deliverylog.StreamName)
		if err != nil {
			return false
		}
		d, err = deliverylog.NewReader(s).Get(ctx, project, id)
		return err == nil && ok(d)
	}, 10*time.Second, 10*time.Millisecond, "delivery %s: last seen %+v", id, d)
	return d
}

func inState(state string) func(deliverylog.Delivery) bool {
	return func(d deliverylog.Delivery) bool { return d.State == state }
}

// ledger reads a project's ledger counters as stored.
func (e *env) ledger(t *testing.T, project string) deliverylog.Counters {
	t.Helper()
	ctx := context.Background()
	kv, err := e.js.KeyValue(ctx, deliverylog.LedgerBucket)
	if err != nil {
		return deliverylog.Counters{}
	}
	entry, err := kv.Get(ctx, project)
	if err != nil {
		return deliverylog.Counters{}
	}
	var c deliverylog.Counters
	require.NoError(t, json.Unmarshal(entry.Value(), &c))
	return c
}

// An agent that answers 404: the call is dead-lettered and the log shows why, what was
// sent and what came back; the batch's outcome says so, and the ledger counts it. Once the
// agent is fixed, a replay sends the same records once, under a new request id, and
// moves them from dead_lettered to agent_calls; the dead letter stays.
func TestDeadLetteredCallIsLoggedAndReplayed(t *testing.T) {
	e := newEnv(t)
	var fixed atomic.Bool
	a := newAgent(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		if fixed.Load() {
			_, _ = io.WriteString(w, `{"status": "accepted"}`)
			return
		}
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"error": "no such route"}`)
	})
	e.putProject(t, project("p1", a.srv.URL))
	r := e.start(t, nil)

	in := records(3)
	o := deliverylog.NewOutcome()
	ctx := pipelinectx.WithOutcome(context.Background(), o)
	require.NoError(t, consumeCtx(ctx, r, "p1", in))
	got := a.requests()
	require.Len(t, got, 1)
	oldID := got[0].header.Get("X-Request-Id")

	d := e.delivery(t, "p1", oldID, inState(deliverylog.StateDeadLettered))
	assert.Equal(t, deliverylog.KindAgent, d.Kind)
	assert.Equal(t, oldID, d.RequestID)
	assert.Equal(t, 404, d.StatusCode)
	assert.Equal(t, `agent answered 404: {"error": "no such route"}`, d.Error)
	assert.Equal(t, string(got[0].body), string(d.RequestBody), "the body sent")
	assert.Equal(t, `{"error": "no such route"}`, string(d.Answer))
	assert.Equal(t, 3, d.Records)
	assert.Equal(t, []uint64{1, 2, 3}, d.Seqs)
	require.Len(t, d.AttemptLog, 1)
	assert.Equal(t, 404, d.AttemptLog[0].StatusCode)
	dl := e.deadLetters(t, "p1")
	require.Len(t, dl, 1)
	assert.Equal(t, dl[0].Sequence, d.DeadLetterSeq)

	// The receiver settles the batch from the outcome the exporter filled.
	led, err := deliverylog.OpenLedger(context.Background(), e.js, time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { _ = led.Close(context.Background()) })
	require.NoError(t, led.Settle(context.Background(), "p1", []uint64{1, 2, 3}, o))
	before := e.ledger(t, "p1")
	assert.Equal(t, int64(3), before.DeadLettered)
	assert.Equal(t, int64(0), before.AgentCalls)
	assert.Equal(t, int64(1), before.CallsDeadLettered)

	fixed.Store(true)
	require.NoError(t, deliverylog.Enqueue(context.Background(), e.js, []deliverylog.Job{
		{Project: "p1", DeliveryID: oldID, ReplayID: "rp1", RequestedAt: time.Now()}}))
	require.Eventually(t, func() bool { return len(a.requests()) == 2 }, 10*time.Second, 10*time.Millisecond)
	replayed := a.requests()[1]
	newID := replayed.header.Get("X-Request-Id")
	assert.NotEqual(t, oldID, newID, "a replay is a new call")
	assert.Equal(t, string(got[0].body), string(replayed.body), "the same records")

	nd := e.delivery(t, "p1", newID, inState(deliverylog.StateDelivered))
	assert.Equal(t, oldID, nd.ReplayOf)
	assert.Equal(t, []uint64{1, 2, 3}, nd.Seqs)
	assert.Equal(t, d.TraceID, nd.TraceID, "the replay joins the same trace")

	require.Eventually(t, func() bool {
		c := e.ledger(t, "p1")
		return c.DeadLettered == 0 && c.AgentCalls == 3 && c.Replayed == 1 && c.Calls == 1
	}, 10*time.Second, 20*time.Millisecond, "the ledger after the replay: %+v", e.ledger(t, "p1"))
	assert.Len(t, e.deadLetters(t, "p1"), 1, "the dead letter is kept")
	// The job was taken once: nothing is left for another replay.
	require.Eventually(t, func() bool {
		c, err := e.js.Consumer(context.Background(), deliverylog.ReplayStream, deliverylog.ReplayDurable)
		if err != nil {
			return false
		}
		info, err := c.Info(context.Background())
		return err == nil && info.NumPending == 0 && info.NumAckPending == 0
	}, 10*time.Second, 10*time.Millisecond)
	assert.Len(t, a.requests(), 2, "the records were sent again once")

	// Replaying the replay sends them again but moves nothing more in the ledger.
	require.NoError(t, deliverylog.Enqueue(context.Background(), e.js, []deliverylog.Job{
		{Project: "p1", DeliveryID: newID, ReplayID: "rp2", RequestedAt: time.Now()}}))
	require.Eventually(t, func() bool { return len(a.requests()) == 3 }, 10*time.Second, 10*time.Millisecond)
	e.delivery(t, "p1", a.requests()[2].header.Get("X-Request-Id"), func(d deliverylog.Delivery) bool {
		return d.State == deliverylog.StateDelivered && d.ReplayOf == newID
	})
	require.Eventually(t, func() bool { return e.ledger(t, "p1").Replayed == 2 }, 10*time.Second, 20*time.Millisecond)
	c := e.ledger(t, "p1")
	assert.Equal(t, int64(0), c.DeadLettered)
	assert.Equal(t, int64(3), c.AgentCalls)

	// The writer's losses are on :8888, nothing lost here.
	var rm metricdata.ResourceMetrics
	require.NoError(t, r.reader.Collect(context.Background(), &rm))
	seen := map[string]bool{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			seen[m.Name] = true
		}
	}
	assert.True(t, seen["otelcol_delivery_log_dropped"] && seen["otelcol_delivery_log_failed"], "%v", seen)
	assert.Zero(t, r.sum(t, "otelcol_delivery_log_dropped", ""))
}

func TestRetriedCallLogsEveryAttempt(t *testing.T) {
	e := newEnv(t)
	a := newAgent(t, statusThen(503))
	e.putProject(t, project("p1", a.srv.URL))
	r := e.start(t, nil)

	o := deliverylog.NewOutcome()
	require.NoError(t, consumeCtx(pipelinectx.WithOutcome(context.Background(), o), r, "p1", records(2)))
	got := a.requests()
	require.Len(t, got, 2)
	d := e.delivery(t, "p1", got[0].header.Get("X-Request-Id"), inState(deliverylog.StateDelivered))
	require.Len(t, d.AttemptLog, 2)
	assert.Equal(t, 503, d.AttemptLog[0].StatusCode)
	assert.Equal(t, "503", d.AttemptLog[0].Error)
	assert.Equal(t, 200, d.AttemptLog[1].StatusCode)
	assert.Empty(t, d.Error)
	assert.Equal(t, `{"status": "accepted"}`, string(d.Answer))
	assert.Empty(t, d.ReplayOf)

	led, err := deliverylog.OpenLedger(context.Background(), e.js, time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { _ = led.Close(context.Background()) })
	require.NoError(t, led.Settle(context.Background(), "p1", []uint64{1, 2, 3}, o))
	c := e.ledger(t, "p1")
	assert.Equal(t, deliverylog.Counters{AgentCalls: 2, Dropped: 1, Calls: 1}, c, "seq 3 was in no call: dropped")
}

func TestCallsCarryTheRecordsTraceparent(t *testing.T) {
	e := newEnv(t)
	a := newAgent(t, nil)
	p := project("p1", a.srv.URL)
	p.Pipeline.BatchSize = 2
	e.putProject(t, p)
	r := e.start(t, nil)

	const trace = "4bf92f3577b34da6a3ce929d0e0e4736"
	in := []item{
		// An attribute named traceId is not the record's.
		{body: `{"attributes": {"traceId": "11111111111111111111111111111111"}, "traceId": "", "body": "no trace"}`},
		{body: `{"resourceAttributes": {}, "traceId": "` + trace + `", "spanId": "00f067aa0ba902b7"}`},
		{body: `{"n": 1}`},
		{body: `{"trigger": {"traceId": "` + strings.Repeat("ab", 16) + `"}, "window": [{"traceId": "` + trace + `"}]}`, kind: pipelinedata.KindWindowCall},
	}
	require.NoError(t, consume(r, "p1", in))
	got := a.requests()
	require.Len(t, got, 3)
	re := regexp.MustCompile(`^00-([0-9a-f]{32})-([0-9a-f]{16})-01$`)
	var spans []string
	for i, want := range []string{trace, "", strings.Repeat("ab", 16)} {
		m := re.FindStringSubmatch(got[i].header.Get("traceparent"))
		require.NotNil(t, m, "call %d: %q", i, got[i].header.Get("traceparent"))
		if want != "" {
			assert.Equal(t, want, m[1], "call %d", i)
		} else {
			assert.NotEqual(t, trace, m[1], "a call without a trace id gets a new one")
		}
		assert.NotEqual(t, strings.Repeat("0", 16), m[2])
		spans = append(spans, m[2])
		d := e.delivery(t, "p1", got[i].header.Get("X-Request-Id"), inState(deliverylog.StateDelivered))
		assert.Equal(t, m[1], d.TraceID, "the log keeps the call's trace id")
	}
	assert.NotEqual(t, spans[0], spans[1], "a span id per call")
}

// A replay never reaches another project's deliveries: the job's project is the only
// one looked in.
func TestReplayStaysInItsProject(t *testing.T) {
	e := newEnv(t)
	a := newAgent(t, statusThen(404))
	b := newAgent(t, nil)
	e.putProject(t, project("pa", a.srv.URL))
	e.putProject(t, project("pb", b.srv.URL))
	r := e.start(t, nil)
	require.NoError(t, consume(r, "pa", records(1)))
	aID := a.requests()[0].header.Get("X-Request-Id")
	e.delivery(t, "pa", aID, inState(deliverylog.StateDeadLettered))

	require.NoError(t, deliverylog.Enqueue(context.Background(), e.js, []deliverylog.Job{
		{Project: "pb", DeliveryID: aID, ReplayID: "x", RequestedAt: time.Now()}}))
	require.Eventually(t, func() bool {
		c, err := e.js.Consumer(context.Background(), deliverylog.ReplayStream, deliverylog.ReplayDurable)
		if err != nil {
			return false
		}
		info, err := c.Info(context.Background())
		return err == nil && info.NumPending == 0 && info.NumAckPending == 0 && info.AckFloor.Stream > 0
	}, 10*time.Second, 10*time.Millisecond)
	assert.Empty(t, b.requests(), "B's agent never gets A's records")
	assert.Len(t, a.requests(), 1, "nor are they sent to A")
	_, err := e.js.Stream(context.Background(), streams.DeadLetterStream("pb"))
	assert.ErrorIs(t, err, jetstream.ErrStreamNotFound)
}

func TestDeliveryLogOff(t *testing.T) {
	e := newEnv(t)
	a := newAgent(t, nil)
	e.putProject(t, project("p1", a.srv.URL))
	r := e.start(t, func(c *Config) { c.DeliveryLog.Enabled = false })
	require.NoError(t, consume(r, "p1", records(1)))
	require.Len(t, a.requests(), 1)
	assert.Regexp(t, `^00-[0-9a-f]{32}-[0-9a-f]{16}-01$`, a.requests()[0].header.Get("traceparent"), "trace context does not need the log")
	_, err := e.js.Stream(context.Background(), deliverylog.StreamName)
	assert.ErrorIs(t, err, jetstream.ErrStreamNotFound)
}

// A call whose dead letter is gone and whose logged body was cut cannot be replayed: the
// replay is logged dead-lettered, saying so, and the agent is not called with half a body.
func TestReplayWithoutTheBody(t *testing.T) {
	e := newEnv(t)
	a := newAgent(t, statusThen(404))
	e.putProject(t, project("p1", a.srv.URL))
	r := e.start(t, nil)
	big := []item{{body: `{"blob": "` + strings.Repeat("x", deliverylog.MaxRequestBody) + `"}`}}
	require.NoError(t, consume(r, "p1", big))
	oldID := a.requests()[0].header.Get("X-Request-Id")
	old := e.delivery(t, "p1", oldID, inState(deliverylog.StateDeadLettered))
	assert.True(t, old.RequestTruncated)
	s, err := e.js.Stream(context.Background(), streams.DeadLetterStream("p1"))
	require.NoError(t, err)
	require.NoError(t, s.Purge(context.Background()))

	require.NoError(t, deliverylog.Enqueue(context.Background(), e.js, []deliverylog.Job{
		{Project: "p1", DeliveryID: oldID, ReplayID: "rp", RequestedAt: time.Now()}}))
	var got deliverylog.Delivery
	require.Eventually(t, func() bool {
		rs, err := e.js.Stream(context.Background(), deliverylog.StreamName)
		if err != nil {
			return false
		}
		ds, err := deliverylog.NewReader(rs).List(context.Background(), "p1", deliverylog.Filter{})
		if err != nil {
			return false
		}
		for _, d := range ds {
			if d.ReplayOf == oldID {
				got = d
				return true
			}
		}
		return false
	}, 10*time.Second, 20*time.Millisecond)
	assert.Equal(t, deliverylog.StateDeadLettered, got.State)
	assert.Equal(t, errBodyGone, got.Error)
	assert.Len(t, a.requests(), 1)
}
