package jetstreamreceiver

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// A message fetched ahead waits behind batches that take longer than AckWait (an agent
// being retried), and the batches in flight wait too: none may be delivered a second time
// meanwhile.
func TestQueuedMessagesAndBatchesInFlightOutliveSlowBatches(t *testing.T) {
	n := testenv.StartNATS(t)
	_, js := testenv.Connect(t, n.URL())
	ctx := context.Background()
	_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "slow", Subjects: []string{"slow.in"}})
	require.NoError(t, err)
	for _, b := range []string{"first", "second", "third"} {
		_, err := js.Publish(ctx, "slow.in", []byte(b))
		require.NoError(t, err)
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, "slow", jetstream.ConsumerConfig{
		Durable: "d", AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Second, MaxDeliver: -1,
	})
	require.NoError(t, err)
	it, err := cons.Messages(jetstream.PullMaxMessages(3))
	require.NoError(t, err)
	defer it.Stop()

	in := newInbox()
	go in.fill(it)
	kctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go in.keepAlive(kctx, 300*time.Millisecond)

	first, firstSeqs, firstID, err := in.take(ctx, 1, 0)
	require.NoError(t, err)
	require.Equal(t, "first", string(first[0].Data()))
	assert.Equal(t, []uint64{1}, firstSeqs, "each message comes with its stream sequence")
	second, _, secondID, err := in.take(ctx, 1, 0)
	require.NoError(t, err)
	require.Equal(t, "second", string(second[0].Data()))
	time.Sleep(2500 * time.Millisecond) // the slow batches: 2.5 x AckWait
	// Settled out of order: each batch is acked on its own.
	require.NoError(t, second[0].Ack())
	in.settled(secondID)
	require.NoError(t, first[0].Ack())
	in.settled(firstID)

	third, thirdSeqs, _, err := in.take(ctx, 1, 0)
	require.NoError(t, err)
	require.Equal(t, "third", string(third[0].Data()))
	meta, err := third[0].Metadata()
	require.NoError(t, err)
	assert.Equal(t, uint64(1), meta.NumDelivered, "delivered once: kept alive while it waited")
	assert.Equal(t, []uint64{meta.Sequence.Stream}, thirdSeqs)
	require.NoError(t, third[0].Ack())

	info, err := cons.Info(ctx)
	require.NoError(t, err)
	assert.Zero(t, info.NumRedelivered, "nothing was delivered twice")
}

func TestTakeWaitsForTheLingerToFillABatch(t *testing.T) {
	n := testenv.StartNATS(t)
	_, js := testenv.Connect(t, n.URL())
	ctx := context.Background()
	_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "linger", Subjects: []string{"linger.in"}})
	require.NoError(t, err)
	cons, err := js.CreateOrUpdateConsumer(ctx, "linger", jetstream.ConsumerConfig{Durable: "d", AckPolicy: jetstream.AckExplicitPolicy})
	require.NoError(t, err)
	it, err := cons.Messages(jetstream.PullMaxMessages(10))
	require.NoError(t, err)
	defer it.Stop()
	in := newInbox()
	go in.fill(it)

	_, err = js.Publish(ctx, "linger.in", []byte("a"))
	require.NoError(t, err)
	go func() {
		time.Sleep(100 * time.Millisecond)
		_, _ = js.Publish(ctx, "linger.in", []byte("b"))
	}()
	batch, _, _, err := in.take(ctx, 5, 2*time.Second)
	require.NoError(t, err)
	assert.Len(t, batch, 2, "a record arriving within the linger joins the batch")

	_, err = js.Publish(ctx, "linger.in", []byte("c"))
	require.NoError(t, err)
	batch, _, _, err = in.take(ctx, 5, 0)
	require.NoError(t, err)
	assert.Len(t, batch, 1, "no linger: what is there, at once")

	cctx, cancelTake := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancelTake()
	_, _, _, err = in.take(cctx, 5, 0)
	assert.ErrorIs(t, err, context.DeadlineExceeded, "nothing there: wait until the context ends")
}

// When a keep-alive comes too late (a process starved of CPU for longer than AckWait) the
// server sends again what the inbox still holds. The copy must not be handed out a second
// time, and acking the copy held must settle the message.
func TestARedeliveryOfAHeldMessageIsNotHandedOutTwice(t *testing.T) {
	n := testenv.StartNATS(t)
	_, js := testenv.Connect(t, n.URL())
	ctx := context.Background()
	_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "late", Subjects: []string{"late.in"}})
	require.NoError(t, err)
	for _, b := range []string{"first", "second"} {
		_, err := js.Publish(ctx, "late.in", []byte(b))
		require.NoError(t, err)
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, "late", jetstream.ConsumerConfig{
		Durable: "d", AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Second, MaxDeliver: -1,
	})
	require.NoError(t, err)
	it, err := cons.Messages(jetstream.PullMaxMessages(10))
	require.NoError(t, err)
	defer it.Stop()

	// No keep-alive: the starved process.
	in := newInbox()
	go in.fill(it)
	first, _, firstID, err := in.take(ctx, 1, 0)
	require.NoError(t, err)
	require.Equal(t, "first", string(first[0].Data()))
	require.Eventually(t, func() bool {
		info, err := cons.Info(ctx)
		return err == nil && info.NumRedelivered >= 2
	}, 10*time.Second, 20*time.Millisecond, "the server sends both again after AckWait")
	// Published after the redeliveries were sent, so it arrives after them.
	_, err = js.Publish(ctx, "late.in", []byte("marker"))
	require.NoError(t, err)

	// The first is still being worked on while the copies and the marker arrive.
	queued := func() []string {
		in.mu.Lock()
		defer in.mu.Unlock()
		var q []string
		for _, m := range in.queued {
			q = append(q, string(m.Data()))
		}
		return q
	}
	require.Eventually(t, func() bool { q := queued(); return len(q) > 0 && q[len(q)-1] == "marker" },
		10*time.Second, 10*time.Millisecond)
	assert.Equal(t, []string{"second", "marker"}, queued(), "neither held message is queued again")
	require.NoError(t, first[0].Ack())
	in.settled(firstID)
	rest, restSeqs, restID, err := in.take(ctx, 10, 0)
	require.NoError(t, err)
	assert.Equal(t, []uint64{2, 3}, restSeqs, "the second and the marker, each once")
	for _, m := range rest {
		require.NoError(t, m.Ack())
	}
	in.settled(restID)
	require.Eventually(t, func() bool {
		info, err := cons.Info(ctx)
		return err == nil && info.NumAckPending == 0 && info.NumPending == 0
	}, 10*time.Second, 20*time.Millisecond, "acking the copies held settles every message")
}
