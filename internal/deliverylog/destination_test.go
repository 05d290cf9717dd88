package deliverylog

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/streams"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// A sink process killed before its counts were written (here: a
// ledger never flushed) takes nothing from the figures, which come from the
// destination's cursor; results come from the output stream.
func TestDestinationFiguresSurviveALostProcess(t *testing.T) {
	ctx := context.Background()
	n := testenv.StartNATS(t)
	_, js := testenv.Connect(t, n.URL())
	require.NoError(t, streams.Create(ctx, js, streams.OutputConfig("p", streams.DefaultLimits())))
	publish := func(k int) {
		for i := range k {
			_, err := js.Publish(ctx, streams.OutputSubject("p"), fmt.Appendf(nil, `{"n":%d}`, i))
			require.NoError(t, err)
		}
	}
	publish(5) // before the destination existed: owed to it neither
	c, err := js.CreateConsumer(ctx, streams.OutputStream("p"), jetstream.ConsumerConfig{
		Durable: "svc-sink-s1", AckPolicy: jetstream.AckExplicitPolicy, DeliverPolicy: jetstream.DeliverNewPolicy})
	require.NoError(t, err)
	require.NoError(t, StartDestination(ctx, js, "p", "s1", c.CachedInfo()))
	publish(20)

	crashed, err := OpenLedger(ctx, js, time.Hour) // never flushed: killed
	require.NoError(t, err)
	t.Cleanup(func() { crashed.once.Do(func() { close(crashed.stop) }); <-crashed.done })
	batch, err := c.Fetch(12)
	require.NoError(t, err)
	i := 0
	for m := range batch.Messages() {
		switch {
		case i == 3:
			crashed.AddDestination("p", "s1", Counters{SinkDeadLettered: 1}, Destination{DeadLettered: 1})
			require.NoError(t, m.DoubleAck(ctx))
		case i < 10:
			crashed.AddDestination("p", "s1", Counters{Delivered: 1}, Destination{Delivered: 1})
			require.NoError(t, m.DoubleAck(ctx))
		}
		i++ // the last two are held, unacknowledged, by the killed process
	}
	require.Equal(t, 12, i)

	// A replay's dead letter is none of the cursor's results.
	crashed.AddReplayedDestination("p", "s1", Counters{SinkDeadLettered: 1}, Destination{DeadLettered: 1})

	// The start entry is the cursor's own: recording it again (another process finding
	// the cursor) changes nothing.
	c2, err := js.Consumer(ctx, streams.OutputStream("p"), "svc-sink-s1")
	require.NoError(t, err)
	require.NoError(t, StartDestination(ctx, js, "p", "s1", c2.CachedInfo()))

	v, err := View(ctx, js, "p", ViewOptions{SinkDurable: "svc-sink", Sinks: []string{"s1"}})
	require.NoError(t, err)
	d := v.Destinations["s1"]
	assert.True(t, d.Exact, "%+v", d)
	assert.Equal(t, int64(25), v.Results, "results from the output stream")
	assert.Equal(t, int64(20), d.Results, "owed to the destination since its cursor started")
	assert.Equal(t, int64(9), d.Delivered)
	assert.Equal(t, int64(1), d.DeadLettered)
	assert.Equal(t, int64(10), d.Pending, "8 never fetched and 2 unacknowledged")
	assert.Equal(t, d.Results, d.Delivered+d.DeadLettered+d.Pending)
	assert.Equal(t, int64(9), v.Delivered)
	assert.NotContains(t, v.Approximate, "delivered")
	assert.True(t, v.Balanced)

	// A cursor whose start nobody recorded is counted, and says so.
	c3, err := js.CreateConsumer(ctx, streams.OutputStream("p"), jetstream.ConsumerConfig{
		Durable: "svc-sink-s2", AckPolicy: jetstream.AckExplicitPolicy, DeliverPolicy: jetstream.DeliverAllPolicy})
	require.NoError(t, err)
	_ = c3
	v, err = View(ctx, js, "p", ViewOptions{SinkDurable: "svc-sink", Sinks: []string{"s1", "s2"}})
	require.NoError(t, err)
	assert.False(t, v.Destinations["s2"].Exact)
	assert.Equal(t, int64(25), v.Destinations["s2"].Pending)
	assert.Subset(t, v.Approximate, []string{"destinations.s2", "delivered", "sink_dead_lettered"})
	assert.False(t, v.Balanced, "never balanced with figures that may miss counts")
}

// outputWithCursor makes project p's output stream (limits l) and a destination cursor
// on it that delivers from the start, as the previous release created them: no start
// entry.
func outputWithCursor(t *testing.T, js jetstream.JetStream, l streams.Limits) jetstream.Consumer {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, streams.Create(ctx, js, streams.OutputConfig("p", l)))
	c, err := js.CreateConsumer(ctx, streams.OutputStream("p"), jetstream.ConsumerConfig{
		Durable: "svc-sink-s1", AckPolicy: jetstream.AckExplicitPolicy, DeliverPolicy: jetstream.DeliverAllPolicy})
	require.NoError(t, err)
	return c
}

func publishResults(t *testing.T, js jetstream.JetStream, k int) {
	t.Helper()
	for i := range k {
		_, err := js.Publish(context.Background(), streams.OutputSubject("p"), fmt.Appendf(nil, `{"n":%d}`, i))
		require.NoError(t, err)
	}
}

// fetch takes k results from the cursor, in order.
func fetch(t *testing.T, c jetstream.Consumer, k int) []jetstream.Msg {
	t.Helper()
	var out []jetstream.Msg
	for len(out) < k {
		b, err := c.Fetch(k-len(out), jetstream.FetchMaxWait(5*time.Second))
		require.NoError(t, err)
		for m := range b.Messages() {
			out = append(out, m)
		}
		require.NoError(t, b.Error())
	}
	return out
}

// A destination cursor a previous release created has
// delivered already and has no start entry. The first sink process to find it records
// one from where the cursor stands (several at once: the first one's stands), and the
// destination's figures are exact from then on, saying since when; before, it stayed
// approximate, and the ledger never balanced again after an upgrade.
func TestDestinationFromAPreviousReleaseIsExactSinceFound(t *testing.T) {
	ctx := context.Background()
	n := testenv.StartNATS(t)
	_, js := testenv.Connect(t, n.URL())
	c := outputWithCursor(t, js, streams.DefaultLimits())
	publishResults(t, js, 10)
	// The previous release's sink: 6 results taken, 4 settled (one of them
	// dead-lettered, which it did not count anywhere), 2 still in its hands.
	held := fetch(t, c, 6)
	for _, m := range held[:4] {
		// Acknowledged by the server before the upgrade (an Ack is sent and not waited
		// for): the cursor then stands where this test says it does.
		require.NoError(t, m.DoubleAck(ctx))
	}
	held = held[4:]

	// Upgraded sink processes find the cursor, all at once.
	errs := make(chan error, 4)
	for range cap(errs) {
		go func() {
			c, err := js.Consumer(ctx, streams.OutputStream("p"), "svc-sink-s1")
			if err == nil {
				err = StartDestination(ctx, js, "p", "s1", c.CachedInfo())
			}
			errs <- err
		}()
	}
	for range cap(errs) {
		require.NoError(t, <-errs)
	}
	found := time.Now()

	v, err := View(ctx, js, "p", ViewOptions{SinkDurable: "svc-sink", Sinks: []string{"s1"}})
	require.NoError(t, err)
	d := v.Destinations["s1"]
	require.True(t, d.Exact, "%+v", d)
	require.NotNil(t, d.Since)
	assert.False(t, d.Since.Before(c.CachedInfo().Created), "since when the cursor was found, not when it was created")
	assert.False(t, d.Since.After(found), "since when the cursor was found")
	assert.Equal(t, int64(6), d.Results, "owed since then: the 2 in hand and the 4 never taken")
	assert.Equal(t, int64(0), d.Delivered+d.DeadLettered)
	assert.Equal(t, int64(6), d.Pending)
	assert.True(t, v.Balanced, "%+v", v)

	// From then on each result settled is counted: the 2 that were in hand, and the
	// rest with 5 more, one of them dead-lettered.
	led, err := OpenLedger(ctx, js, time.Hour)
	require.NoError(t, err)
	t.Cleanup(func() { _ = led.Close(ctx) })
	for _, m := range held {
		require.NoError(t, m.Ack())
	}
	publishResults(t, js, 5)
	for i, m := range fetch(t, c, 9) {
		if i == 2 {
			require.NoError(t, led.AddDestination("p", "s1", Counters{SinkDeadLettered: 1}, Destination{DeadLettered: 1}))
		}
		require.NoError(t, m.Ack())
	}
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		v, err = View(ctx, js, "p", ViewOptions{SinkDurable: "svc-sink", Sinks: []string{"s1"}})
		require.NoError(ct, err)
		assert.Zero(ct, v.Destinations["s1"].Pending) // acks are asynchronous
	}, 10*time.Second, 10*time.Millisecond)
	d = v.Destinations["s1"]
	assert.True(t, d.Exact)
	assert.Equal(t, int64(11), d.Results, "owed since found: 6 then, 5 since")
	assert.Equal(t, int64(10), d.Delivered)
	assert.Equal(t, int64(1), d.DeadLettered)
	assert.True(t, v.Balanced)
}

// A dead letter the ledger cannot count is refused, so the
// caller does not ack the result: acked, it would show as delivered in figures said to
// be exact. Here the ledger bucket is gone when the dead letter comes.
func TestADeadLetterThatCannotBeCountedIsRefused(t *testing.T) {
	ctx := context.Background()
	n := testenv.StartNATS(t)
	_, js := testenv.Connect(t, n.URL())
	c := outputWithCursor(t, js, streams.DefaultLimits())
	require.NoError(t, StartDestination(ctx, js, "p", "s1", c.CachedInfo()))
	led, err := OpenLedger(ctx, js, time.Hour)
	require.NoError(t, err)
	t.Cleanup(func() { led.once.Do(func() { close(led.stop) }); <-led.done })

	require.NoError(t, js.DeleteKeyValue(ctx, LedgerBucket))
	err = led.AddDestination("p", "s1", Counters{SinkDeadLettered: 1}, Destination{DeadLettered: 1})
	require.Error(t, err, "a dead letter that was not counted")
	led.mu.Lock()
	assert.Empty(t, led.pending, "nothing counted for it either")
	led.mu.Unlock()
	require.NoError(t, led.AddDestination("p", "s1", Counters{Delivered: 1}, Destination{Delivered: 1}),
		"a delivery's count is derived from the cursor: never refused")
}

// Results the output stream removed (older than its
// max_age) before the destination settled them are counted as settled by the server;
// the ledger cannot tell them from deliveries, so it says the destination's figures
// are approximate, why and since when, from then on, and is not balanced. Before, they
// counted as delivered in figures said to be exact.
func TestResultsRemovedBeforeDeliveryMakeTheFiguresApproximate(t *testing.T) {
	ctx := context.Background()
	n := testenv.StartNATS(t)
	_, js := testenv.Connect(t, n.URL())
	c := outputWithCursor(t, js, streams.DefaultLimits())
	require.NoError(t, StartDestination(ctx, js, "p", "s1", c.CachedInfo()))
	publishResults(t, js, 5)
	for _, m := range fetch(t, c, 2) {
		require.NoError(t, m.Ack())
	}
	// The destination stalls; all 5 results are removed, the 3 it had not taken among
	// them. Deleted rather than aged out by a short max_age, which on a loaded machine
	// could remove the first 2 before they were fetched; the cursor sees the same
	// either way (the stream's first sequence moves past them, the cursor is not told).
	out, err := js.Stream(ctx, streams.OutputStream("p"))
	require.NoError(t, err)
	for seq := uint64(1); seq <= 5; seq++ {
		require.NoError(t, out.DeleteMsg(ctx, seq))
	}
	view := func() LedgerView {
		v, err := View(ctx, js, "p", ViewOptions{SinkDurable: "svc-sink", Sinks: []string{"s1"}})
		require.NoError(t, err)
		return v
	}
	v := view()
	d := v.Destinations["s1"]
	assert.False(t, d.Exact, "%+v", d)
	assert.Equal(t, ApproxResultsRemoved, d.ApproximateReason)
	assert.NotNil(t, d.ApproximateSince)
	assert.Contains(t, v.Approximate, "destinations.s1")
	assert.False(t, v.Balanced)

	// The destination recovers and the cursor moves past the removed results, which no
	// longer shows in its state: the figures stay approximate.
	publishResults(t, js, 2)
	for _, m := range fetch(t, c, 2) {
		require.NoError(t, m.Ack())
	}
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		v = view()
		assert.Zero(ct, v.Destinations["s1"].Pending)
	}, 10*time.Second, 10*time.Millisecond)
	d = v.Destinations["s1"]
	assert.False(t, d.Exact, "%+v", d)
	assert.Equal(t, ApproxResultsRemoved, d.ApproximateReason)
	assert.False(t, v.Balanced)
}

// A result dead-lettered and counted, whose sink process
// was killed before it acked it, comes again and is dead-lettered again: counted once,
// or the destination would show one delivery fewer than it took.
func TestADeadLetterThatComesAgainIsCountedOnce(t *testing.T) {
	ctx := context.Background()
	n := testenv.StartNATS(t)
	_, js := testenv.Connect(t, n.URL())
	c := outputWithCursor(t, js, streams.DefaultLimits())
	require.NoError(t, StartDestination(ctx, js, "p", "s1", c.CachedInfo()))
	publishResults(t, js, 3)
	killed, err := OpenLedger(ctx, js, time.Hour)
	require.NoError(t, err)
	t.Cleanup(func() { killed.once.Do(func() { close(killed.stop) }); <-killed.done })
	first := fetch(t, c, 1)[0]
	meta, err := first.Metadata()
	require.NoError(t, err)
	require.NoError(t, killed.AddDestinationResult("p", "s1", meta.Sequence.Stream, Counters{SinkDeadLettered: 1}, Destination{DeadLettered: 1}))
	require.NoError(t, first.Nak()) // not acked: the process died; it comes again

	next, err := OpenLedger(ctx, js, time.Hour)
	require.NoError(t, err)
	t.Cleanup(func() { next.once.Do(func() { close(next.stop) }); <-next.done })
	for _, m := range fetch(t, c, 3) {
		meta, err := m.Metadata()
		require.NoError(t, err)
		if meta.Sequence.Stream == 1 {
			require.NoError(t, next.AddDestinationResult("p", "s1", 1, Counters{SinkDeadLettered: 1}, Destination{DeadLettered: 1}))
		}
		require.NoError(t, m.DoubleAck(ctx))
	}
	v, err := View(ctx, js, "p", ViewOptions{SinkDurable: "svc-sink", Sinks: []string{"s1"}})
	require.NoError(t, err)
	d := v.Destinations["s1"]
	assert.True(t, d.Exact, "%+v", d)
	assert.Equal(t, int64(1), d.DeadLettered)
	assert.Equal(t, int64(2), d.Delivered)
	assert.True(t, v.Balanced)
}

// A dead letter whose sink process died before
// the ack comes again only after its ack wait, and meanwhile the cursor hands out up to
// its max ack pending others, here 70 more dead letters. Remembering only the latest
// 64 counted it twice, and the destination showed one delivery short while its figures
// said exact.
func TestADeadLetterThatComesAgainAfterManyOthersIsCountedOnce(t *testing.T) {
	ctx := context.Background()
	n := testenv.StartNATS(t)
	_, js := testenv.Connect(t, n.URL())
	c := outputWithCursor(t, js, streams.DefaultLimits())
	require.NoError(t, StartDestination(ctx, js, "p", "s1", c.CachedInfo()))
	const others, delivered = 70, 29
	publishResults(t, js, 1+others+delivered)
	l, err := OpenLedger(ctx, js, time.Hour)
	require.NoError(t, err)
	t.Cleanup(func() { l.once.Do(func() { close(l.stop) }); <-l.done })
	deadLetter := func(m jetstream.Msg) {
		t.Helper()
		meta, err := m.Metadata()
		require.NoError(t, err)
		require.NoError(t, l.AddDestinationResult("p", "s1", meta.Sequence.Stream, Counters{SinkDeadLettered: 1}, Destination{DeadLettered: 1}))
	}

	first := fetch(t, c, 1)[0]
	deadLetter(first) // counted; its process dies before the ack
	for _, m := range fetch(t, c, others) {
		deadLetter(m)
		require.NoError(t, m.DoubleAck(ctx))
	}
	require.NoError(t, first.Nak()) // its ack wait over: it comes again
	for range 1 + delivered {       // it and the rest, in whatever order the cursor gives
		m := fetch(t, c, 1)[0]
		meta, err := m.Metadata()
		require.NoError(t, err)
		if meta.Sequence.Stream == 1 {
			deadLetter(m)
		}
		require.NoError(t, m.DoubleAck(ctx))
	}

	v, err := View(ctx, js, "p", ViewOptions{SinkDurable: "svc-sink", Sinks: []string{"s1"}})
	require.NoError(t, err)
	d := v.Destinations["s1"]
	assert.True(t, d.Exact, "%+v", d)
	assert.Equal(t, int64(1+others), d.DeadLettered)
	assert.Equal(t, int64(delivered), d.Delivered)
	assert.Equal(t, int64(0), d.Pending)
	assert.True(t, v.Balanced)

	// All settled: the next dead letter prunes what can never come again, so the entry
	// stays small.
	publishResults(t, js, 1)
	deadLetter(fetch(t, c, 1)[0])
	e, err := l.kv.Get(ctx, destKey("p", "s1"))
	require.NoError(t, err)
	var st destStart
	require.NoError(t, json.Unmarshal(e.Value(), &st))
	assert.Equal(t, []uint64{uint64(1 + others + delivered + 1)}, st.Recent)
}
