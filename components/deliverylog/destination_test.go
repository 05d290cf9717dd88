package deliverylog

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/components/streams"
	"github.com/otelcol-svc/otelcol-svc/components/testenv"
)

// Issue 22, finding 7: a sink process killed before its counts were written (here: a
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
			require.NoError(t, m.Ack())
		case i < 10:
			crashed.AddDestination("p", "s1", Counters{Delivered: 1}, Destination{Delivered: 1})
			require.NoError(t, m.Ack())
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
