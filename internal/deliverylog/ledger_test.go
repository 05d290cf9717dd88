package deliverylog

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/streams"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// A batch settled, then delivered again (the process died before its ack) and settled
// by another process, counts once; the equation holds against the stream itself.
func TestSettleCountsARedeliveredBatchOnce(t *testing.T) {
	ctx := context.Background()
	n := testenv.StartNATS(t)
	_, js := testenv.Connect(t, n.URL())
	if err := streams.Create(ctx, js, streams.RawConfig("p", streams.DefaultLimits())); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if _, err := js.Publish(ctx, streams.RawSubject("p"), fmt.Appendf(nil, `{"n":%d}`, i)); err != nil {
			t.Fatal(err)
		}
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, streams.RawStream("p"), jetstream.ConsumerConfig{Durable: "svc-pipeline", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	a, err := OpenLedger(ctx, js, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	_, js2 := testenv.Connect(t, n.URL())
	b, err := OpenLedger(ctx, js2, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	view := func() LedgerView {
		t.Helper()
		v, err := View(ctx, js, "p", ViewOptions{PipelineDurable: "svc-pipeline"})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if v := view(); v.Received != 10 || v.Pending != 10 || !v.Balanced {
		t.Fatalf("before: %+v", v)
	}
	o := NewOutcome()
	o.Call([]uint64{1, 2, 3}, false)
	o.Call([]uint64{5}, true)
	o.Suppressed([]uint64{4, 3})
	batch := []uint64{1, 2, 3, 4, 5, 6}
	if err := a.Settle(ctx, "p", batch, o); err != nil {
		t.Fatal(err)
	}
	// Process a dies here, before acking; process b gets the batch again and settles it.
	if err := b.Settle(ctx, "p", batch, o); err != nil {
		t.Fatal(err)
	}
	msgs, err := cons.Fetch(6)
	if err != nil {
		t.Fatal(err)
	}
	for m := range msgs.Messages() {
		_ = m.Ack()
	}
	// Acks are asynchronous on the server: wait until the consumer shows them.
	deadline := time.Now().Add(10 * time.Second)
	var v LedgerView
	for v = view(); !v.Balanced && time.Now().Before(deadline); v = view() {
		time.Sleep(10 * time.Millisecond)
	}
	if v.Received != 10 || v.AgentCalls != 3 || v.DeadLettered != 1 || v.Dropped != 2 || v.Suppressed != 1 || v.Pending != 4 || !v.Balanced ||
		v.Calls != 1 || v.CallsDeadLettered != 1 {
		t.Fatalf("after: %+v", v)
	}
}

func TestAddSeqsKeepsSortedDisjointIntervals(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var iv [][2]uint64
	seen := map[uint64]bool{}
	for range 2000 {
		s := uint64(r.IntN(500) + 1)
		if seen[s] {
			continue
		}
		seen[s] = true
		iv = addSeqs(iv, []uint64{s})
	}
	for i, x := range iv {
		if x[0] > x[1] || (i > 0 && iv[i-1][1]+1 >= x[0]) {
			t.Fatalf("intervals not sorted and disjoint at %d: %v", i, iv)
		}
	}
	for s := uint64(1); s <= 500; s++ {
		if settled(iv, s) != seen[s] {
			t.Fatalf("seq %d: settled %v, added %v", s, settled(iv, s), seen[s])
		}
	}
	if len(seen) == 500 && !slices.Equal(iv, [][2]uint64{{1, 500}}) {
		t.Fatalf("all added but not one interval: %v", iv)
	}
}

// The log keeps at most MaxPerProject deliveries of a project; another project's stay.
func TestTrimBoundsEachProject(t *testing.T) {
	ctx := context.Background()
	js, s := startLog(t, StoreConfig{})
	w := NewWriter(js, WriterConfig{MaxPerProject: 50, TrimInterval: time.Hour, Buffer: 1 << 12})
	w.Record("quiet", Delivery{ID: "q1", Kind: KindSink})
	for i := range 300 {
		w.Record("busy", Delivery{ID: fmt.Sprintf("b%03d", i), Kind: KindSink})
	}
	// Trim after the writer has published: Close drains it.
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := w.Close(cctx); err != nil {
		t.Fatal(err)
	}
	if w.Dropped() != 0 {
		t.Fatalf("dropped %d", w.Dropped())
	}
	w.Trim(ctx)
	r := NewReader(s)
	busy, err := r.List(ctx, "busy", Filter{Limit: MaxLimit})
	if err != nil {
		t.Fatal(err)
	}
	if len(busy) != 50 || busy[0].ID != "b299" || busy[49].ID != "b250" {
		t.Fatalf("busy kept %d deliveries, newest %v", len(busy), busy[0].ID)
	}
	if _, err := r.Get(ctx, "quiet", "q1"); err != nil {
		t.Fatalf("the quiet project's delivery was trimmed: %v", err)
	}
}

// A delivery recorded, tried and finished in one go is one message, not three: the
// writer's publishing keeps up with three times as many deliveries.
func TestWriterCoalescesADeliverysEvents(t *testing.T) {
	ctx := context.Background()
	js, s := startLog(t, StoreConfig{})
	w := NewWriter(js, WriterConfig{Buffer: 1 << 14})
	const total = 3000
	for i := range total {
		id := fmt.Sprintf("d%d", i)
		w.Record("p", Delivery{ID: id, Kind: KindAgent})
		w.Attempt("p", id, Attempt{StatusCode: 200}, nil)
		w.Finish("p", id, Final{State: StateDelivered})
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := w.Close(cctx); err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != total || w.Dropped() != 0 {
		t.Fatalf("%d of %d deliveries logged (%d events dropped)", info.State.Msgs, total, w.Dropped())
	}
	// LastSeq counts every message ever published, the rewritten ones too.
	if info.State.LastSeq > total*3/2 {
		t.Fatalf("%d messages published for %d deliveries: events not coalesced", info.State.LastSeq, total)
	}
	d, err := NewReader(s).Get(ctx, "p", fmt.Sprintf("d%d", total-1))
	if err != nil || d.State != StateDelivered || d.Attempts != 1 {
		t.Fatalf("last delivery: %+v %v", d, err)
	}
}

func TestTraceFollowsARecordToItsCallResultAndDeliveries(t *testing.T) {
	ctx := context.Background()
	js, s := startLog(t, StoreConfig{})
	if err := streams.Create(ctx, js, streams.RawConfig("p", streams.DefaultLimits())); err != nil {
		t.Fatal(err)
	}
	if err := streams.Create(ctx, js, streams.OutputConfig("p", streams.DefaultLimits())); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		m := &nats.Msg{Subject: streams.RawSubject("p"), Data: fmt.Appendf(nil, `{"n":%d}`, i), Header: nats.Header{}}
		m.Header.Set(streams.HeaderSignal, "event")
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	w := NewWriter(js, WriterConfig{})
	w.Record("p", Delivery{ID: "req_a", Kind: KindAgent, RequestID: "req_a", Seqs: []uint64{1}})
	w.Record("p", Delivery{ID: "req_b", Kind: KindAgent, RequestID: "req_b", Seqs: []uint64{2, 3}})
	w.Finish("p", "req_b", Final{State: StateDelivered})
	out := &nats.Msg{Subject: streams.OutputSubject("p"), Data: []byte(`{"ok":true}`), Header: nats.Header{}}
	out.Header.Set(streams.HeaderRequestID, "req_b")
	if _, err := js.PublishMsg(ctx, out); err != nil {
		t.Fatal(err)
	}
	w.Record("p", Delivery{ID: "snk_1", Kind: KindSink, SinkID: "s1", RequestID: "req_b", SourceSeq: 1})
	w.Record("p", Delivery{ID: "snk_2", Kind: KindSink, SinkID: "s1", RequestID: "req_a", SourceSeq: 2})
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := w.Close(cctx); err != nil {
		t.Fatal(err)
	}
	r := NewReader(s)
	tr, err := r.TraceSeq(ctx, js, "p", 3)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Record == nil || tr.Record.Seq != 3 || tr.Record.Signal != "event" || tr.Call == nil || tr.Call.ID != "req_b" ||
		len(tr.Results) != 1 || tr.Results[0].Seq != 1 || len(tr.Deliveries) != 1 || tr.Deliveries[0].ID != "snk_1" {
		t.Fatalf("trace of seq 3: %+v", tr)
	}
	tr, err = r.TraceRequest(ctx, js, "p", "req_a")
	if err != nil || tr.Call.ID != "req_a" || len(tr.Results) != 0 || len(tr.Deliveries) != 1 || tr.Deliveries[0].ID != "snk_2" {
		t.Fatalf("trace of req_a: %+v %v", tr, err)
	}
	if _, err := r.TraceSeq(ctx, js, "p", 99); err != ErrNotFound {
		t.Fatalf("a missing record: %v", err)
	}
	// Another project's reader sees none of it.
	if _, err := r.TraceRequest(ctx, js, "q", "req_a"); err != ErrNotFound {
		t.Fatalf("project q traced p's call: %v", err)
	}
}

func TestParseReplayRequest(t *testing.T) {
	r, err := ParseReplayRequest([]byte(`{"ids":["a","b","a"]}`))
	if err != nil || !slices.Equal(r.IDs, []string{"a", "b"}) {
		t.Fatalf("%+v %v", r, err)
	}
	r, err = ParseReplayRequest([]byte(`{"state":"dead_lettered","kind":"agent","since":"2026-11-01T00:00:00Z"}`))
	if err != nil || r.State != StateDeadLettered || r.Kind != KindAgent || r.Since.IsZero() {
		t.Fatalf("%+v %v", r, err)
	}
	for _, bad := range []string{``, `[]`, `{}`, `{"ids":[]}`, `{"ids":["a.b"]}`, `{"ids":["*"]}`, `{"ids":["a"],"state":"dead_lettered"}`,
		`{"state":"delivered"}`, `{"state":"dead_lettered","kind":"x"}`, `{"state":"dead_lettered","since":"today"}`, `{"idz":["a"]}`, `{"ids":["a"]} {}`} {
		if _, err := ParseReplayRequest([]byte(bad)); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

func FuzzParseReplayRequest(f *testing.F) {
	f.Add([]byte(`{"ids":["req_1","snk_2"]}`))
	f.Add([]byte(`{"state":"dead_lettered","kind":"sink","since":"2026-11-01T00:00:00Z"}`))
	f.Add([]byte(`{"ids":[">"]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := ParseReplayRequest(body)
		if err != nil {
			return
		}
		if len(r.IDs) == 0 && r.State != StateDeadLettered {
			t.Fatalf("accepted neither ids nor dead_lettered: %+v", r)
		}
		if len(r.IDs) > MaxReplay {
			t.Fatalf("%d ids", len(r.IDs))
		}
		for _, id := range r.IDs {
			if !validToken(id) {
				t.Fatalf("id %q is not one subject token", id)
			}
		}
	})
}

// A dead-lettered call replayed twice moves its records once.
func TestReplayedMovesRecordsOnce(t *testing.T) {
	ctx := context.Background()
	n := testenv.StartNATS(t)
	_, js := testenv.Connect(t, n.URL())
	l, err := OpenLedger(ctx, js, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	o := NewOutcome()
	o.Call([]uint64{1, 2}, true)
	if err := l.Settle(ctx, "p", []uint64{1, 2}, o); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := l.Replayed(ctx, js, "p", "req_x", 2); err != nil {
			t.Fatal(err)
		}
	}
	v, err := View(ctx, js, "p", ViewOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v.DeadLettered != 0 || v.AgentCalls != 2 {
		t.Fatalf("%+v", v)
	}
}

// Batches settle in whatever order the pipeline's processes finish them: the ledger
// balances against the raw stream whatever the order, and a batch settled twice (the
// process died before its ack) counts once.
func TestSettleBalancesInAnyOrder(t *testing.T) {
	ctx := context.Background()
	n := testenv.StartNATS(t)
	_, js := testenv.Connect(t, n.URL())
	_, js2 := testenv.Connect(t, n.URL())
	a, err := OpenLedger(ctx, js, time.Hour)
	require.NoError(t, err)
	b, err := OpenLedger(ctx, js2, time.Hour)
	require.NoError(t, err)
	seqs := func(lo, hi uint64) []uint64 {
		var s []uint64
		for i := lo; i <= hi; i++ {
			s = append(s, i)
		}
		return s
	}
	odd, even := []uint64{}, []uint64{}
	for i := uint64(1); i <= 30; i++ {
		if i%2 == 1 {
			odd = append(odd, i)
		} else {
			even = append(even, i)
		}
	}
	for _, c := range []struct {
		name    string
		batches [][]uint64
	}{
		{"reverse", [][]uint64{seqs(21, 30), seqs(11, 20), seqs(1, 10)}},
		{"interleaved", [][]uint64{seqs(11, 20), seqs(1, 10), seqs(21, 30)}},
		{"interleaved-seqs", [][]uint64{even[5:], odd, even[:5]}},
		{"redelivered", [][]uint64{seqs(11, 20), seqs(1, 10), seqs(11, 20), seqs(21, 30), seqs(1, 10)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := "p-" + c.name
			require.NoError(t, streams.Create(ctx, js, streams.RawConfig(p, streams.DefaultLimits())))
			for i := range 30 {
				_, err := js.Publish(ctx, streams.RawSubject(p), fmt.Appendf(nil, `{"n":%d}`, i))
				require.NoError(t, err)
			}
			cons, err := js.CreateOrUpdateConsumer(ctx, streams.RawStream(p), jetstream.ConsumerConfig{Durable: "svc-pipeline", AckPolicy: jetstream.AckExplicitPolicy})
			require.NoError(t, err)
			msgs, err := cons.Fetch(30)
			require.NoError(t, err)
			var held []jetstream.Msg
			for m := range msgs.Messages() {
				held = append(held, m)
			}
			require.Len(t, held, 30)
			// Every record is sent to the agent; two processes settle alternately.
			for i, batch := range c.batches {
				o := NewOutcome()
				o.Call(batch, false)
				l := a
				if i%2 == 1 {
					l = b
				}
				require.NoError(t, l.Settle(ctx, p, batch, o))
			}
			for _, m := range held {
				require.NoError(t, m.Ack())
			}
			var v LedgerView
			require.Eventually(t, func() bool {
				v, err = View(ctx, js, p, ViewOptions{PipelineDurable: "svc-pipeline"})
				return err == nil && v.Pending == 0
			}, 10*time.Second, 10*time.Millisecond)
			assert.Equal(t, int64(30), v.Received)
			assert.Equal(t, int64(30), v.AgentCalls, "each record counted once")
			assert.Equal(t, int64(0), v.Unaccounted)
			assert.True(t, v.Balanced, "%+v", v)
		})
	}
}

// A project of big deliveries keeps about MaxBytesPerProject of the shared stream,
// its newest; another project's deliveries stay.
func TestTrimBoundsEachProjectsBytes(t *testing.T) {
	ctx := context.Background()
	js, s := startLog(t, StoreConfig{})
	const budget = 256 << 10
	w := NewWriter(js, WriterConfig{MaxBytesPerProject: budget, TrimInterval: time.Hour, Buffer: 1 << 12})
	w.Record("quiet", Delivery{ID: "q1", Kind: KindSink})
	body := make([]byte, 8<<10)
	for i := range 300 {
		w.Record("busy", Delivery{ID: fmt.Sprintf("b%03d", i), Kind: KindSink, RequestBody: body})
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	require.NoError(t, w.Close(cctx))
	require.Zero(t, w.Dropped())
	w.Trim(ctx)
	info, err := s.Info(ctx)
	require.NoError(t, err)
	// The stream holds busy's share and quiet's one small delivery.
	assert.LessOrEqual(t, info.State.Bytes, uint64(budget*11/10), "the stream holds %d bytes", info.State.Bytes)
	busy, err := NewReader(s).List(ctx, "busy", Filter{Limit: MaxLimit})
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(busy), 20, "busy keeps about budget/size deliveries")
	assert.LessOrEqual(t, len(busy), 31)
	assert.Equal(t, "b299", busy[0].ID, "the newest are kept")
	_, err = NewReader(s).Get(ctx, "quiet", "q1")
	assert.NoError(t, err, "the quiet project's delivery stays")
	assert.Zero(t, w.RetentionCut(), "a stream far from full cuts no retention")
}

// A stream full of deliveries younger than its max age is counted: discard-old is
// removing deliveries before their 7 days.
func TestTrimCountsAStreamDiscardingYoungDeliveries(t *testing.T) {
	ctx := context.Background()
	js, s := startLog(t, StoreConfig{MaxBytes: 1 << 20})
	w := NewWriter(js, WriterConfig{TrimInterval: time.Hour, Buffer: 1 << 12})
	t.Cleanup(func() { _ = w.Close(context.Background()) })
	body := make([]byte, 8<<10)
	write := func(from, to int) {
		for i := from; i < to; i++ {
			w.Record("p", Delivery{ID: fmt.Sprintf("d%03d", i), Kind: KindAgent, RequestBody: body})
		}
		require.Eventually(t, func() bool {
			info, err := s.Info(ctx)
			return err == nil && info.State.LastSeq >= uint64(to)
		}, 10*time.Second, 10*time.Millisecond)
	}
	write(0, 10)
	w.Trim(ctx)
	assert.Zero(t, w.RetentionCut())
	write(10, 250) // ~2 MB into a 1 MiB stream
	w.Trim(ctx)
	assert.Equal(t, int64(1), w.RetentionCut())
}

// In incident mode the events that joined an incident are neither dropped nor sent:
// they count in incident_events, and the equation holds with them; a redelivered batch
// counts its events and the incidents it opened once.
func TestSettleCountsIncidentEventsInTheEquation(t *testing.T) {
	ctx := context.Background()
	n := testenv.StartNATS(t)
	_, js := testenv.Connect(t, n.URL())
	require.NoError(t, streams.Create(ctx, js, streams.RawConfig("p", streams.DefaultLimits())))
	for i := range 6 {
		_, err := js.Publish(ctx, streams.RawSubject("p"), fmt.Appendf(nil, `{"n":%d}`, i))
		require.NoError(t, err)
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, streams.RawStream("p"), jetstream.ConsumerConfig{Durable: "svc-pipeline", AckPolicy: jetstream.AckExplicitPolicy})
	require.NoError(t, err)
	l, err := OpenLedger(ctx, js, time.Hour)
	require.NoError(t, err)
	o := NewOutcome()
	o.Incident([]uint64{1, 2, 4}, 2)
	o.Incident([]uint64{5}, 0)
	batch := []uint64{1, 2, 3, 4, 5, 6}
	require.NoError(t, l.Settle(ctx, "p", batch, o))
	require.NoError(t, l.Settle(ctx, "p", batch, o)) // redelivered
	msgs, err := cons.Fetch(6)
	require.NoError(t, err)
	for m := range msgs.Messages() {
		require.NoError(t, m.Ack())
	}
	var v LedgerView
	require.Eventually(t, func() bool {
		v, err = View(ctx, js, "p", ViewOptions{PipelineDurable: "svc-pipeline"})
		return err == nil && v.Pending == 0
	}, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, int64(4), v.IncidentEvents)
	assert.Equal(t, int64(2), v.Dropped)
	assert.Equal(t, int64(2), v.IncidentsOpened)
	assert.Equal(t, int64(0), v.AgentCalls)
	assert.True(t, v.Balanced, "%+v", v)
}
