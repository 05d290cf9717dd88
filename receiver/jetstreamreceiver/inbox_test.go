package jetstreamreceiver

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/components/testenv"
)

// A message fetched ahead waits behind a batch that takes longer than AckWait (an agent
// being retried): it must not be delivered a second time meanwhile.
func TestQueuedMessagesOutliveASlowBatch(t *testing.T) {
	n := testenv.StartNATS(t)
	_, js := testenv.Connect(t, n.URL())
	ctx := context.Background()
	_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "slow", Subjects: []string{"slow.in"}})
	require.NoError(t, err)
	for _, b := range []string{"first", "second"} {
		_, err := js.Publish(ctx, "slow.in", []byte(b))
		require.NoError(t, err)
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, "slow", jetstream.ConsumerConfig{
		Durable: "d", AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Second, MaxDeliver: -1,
	})
	require.NoError(t, err)
	it, err := cons.Messages(jetstream.PullMaxMessages(2))
	require.NoError(t, err)
	defer it.Stop()

	in := newInbox()
	go in.fill(it)
	kctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go in.keepAlive(kctx, 300*time.Millisecond)

	first, err := in.take(ctx, 1, 0)
	require.NoError(t, err)
	require.Equal(t, "first", string(first[0].Data()))
	time.Sleep(2500 * time.Millisecond) // the slow batch: 2.5 x AckWait
	require.NoError(t, first[0].Ack())
	in.settled()

	second, err := in.take(ctx, 1, 0)
	require.NoError(t, err)
	require.Equal(t, "second", string(second[0].Data()))
	meta, err := second[0].Metadata()
	require.NoError(t, err)
	assert.Equal(t, uint64(1), meta.NumDelivered, "delivered once: kept alive while it waited")
	require.NoError(t, second[0].Ack())

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
	batch, err := in.take(ctx, 5, 2*time.Second)
	require.NoError(t, err)
	assert.Len(t, batch, 2, "a record arriving within the linger joins the batch")

	_, err = js.Publish(ctx, "linger.in", []byte("c"))
	require.NoError(t, err)
	batch, err = in.take(ctx, 5, 0)
	require.NoError(t, err)
	assert.Len(t, batch, 1, "no linger: what is there, at once")

	cctx, cancelTake := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancelTake()
	_, err = in.take(cctx, 5, 0)
	assert.ErrorIs(t, err, context.DeadlineExceeded, "nothing there: wait until the context ends")
}

func relayConsumer(t *testing.T, name string, n int, ackWait time.Duration) (jetstream.Consumer, jetstream.MessagesContext) {
	t.Helper()
	ns := testenv.StartNATS(t)
	_, js := testenv.Connect(t, ns.URL())
	ctx := context.Background()
	_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{name + ".in"}})
	require.NoError(t, err)
	for i := 0; i < n; i++ {
		_, err := js.PublishAsync(name+".in", []byte(strconv.Itoa(i)))
		require.NoError(t, err)
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(10 * time.Second):
		t.Fatal("publishing timed out")
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, name, jetstream.ConsumerConfig{
		Durable: "d", AckPolicy: jetstream.AckExplicitPolicy, AckWait: ackWait, MaxDeliver: -1,
	})
	require.NoError(t, err)
	it, err := cons.Messages(jetstream.PullMaxMessages(20))
	require.NoError(t, err)
	t.Cleanup(it.Stop)
	return cons, it
}

// Two relays share a destination's consumer: every message is delivered once, in stream
// order, and never two at a time, whichever goroutine read it.
func TestRelayDeliversOneAtATimeInOrder(t *testing.T) {
	const n = 300
	_, it := relayConsumer(t, "relay", n, 30*time.Second)
	in := newInbox()
	var (
		mu       sync.Mutex
		got      []int
		busy     atomic.Int32
		overlaps atomic.Int32
	)
	deliver := func(m jetstream.Msg) {
		if busy.Add(1) > 1 {
			overlaps.Add(1)
		}
		i, _ := strconv.Atoi(string(m.Data()))
		if i%50 == 0 {
			time.Sleep(20 * time.Millisecond) // a slow delivery: what arrives meanwhile queues
		}
		mu.Lock()
		got = append(got, i)
		mu.Unlock()
		busy.Add(-1)
		_ = m.Ack()
	}
	errs := make(chan error, 2)
	for range 2 {
		go func() { errs <- in.relay(it, deliver) }()
	}
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(got) >= n }, 20*time.Second, 10*time.Millisecond)
	it.Stop()
	for range 2 {
		select {
		case err := <-errs:
			assert.ErrorIs(t, err, jetstream.ErrMsgIteratorClosed)
		case <-time.After(5 * time.Second):
			t.Fatal("a relay did not return after the iterator stopped")
		}
	}
	want := make([]int, n)
	for i := range want {
		want[i] = i
	}
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, want, got, "each once, in order")
	assert.Zero(t, overlaps.Load(), "two deliveries ran at once")
}

// While one delivery takes longer than AckWait, what the other relay reads meanwhile is
// kept alive: it is not delivered a second time.
func TestRelayKeepsQueuedMessagesAliveBehindASlowDelivery(t *testing.T) {
	cons, it := relayConsumer(t, "relayslow", 3, time.Second)
	in := newInbox()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go in.keepAlive(ctx, 300*time.Millisecond)
	var (
		mu        sync.Mutex
		delivered []uint64 // NumDelivered of each delivery
	)
	deliver := func(m jetstream.Msg) {
		if string(m.Data()) == "0" {
			time.Sleep(2500 * time.Millisecond) // 2.5 x AckWait
		}
		meta, err := m.Metadata()
		if !assert.NoError(t, err) {
			return
		}
		mu.Lock()
		delivered = append(delivered, meta.NumDelivered)
		mu.Unlock()
		assert.NoError(t, m.Ack())
	}
	for range 2 {
		go func() { _ = in.relay(it, deliver) }()
	}
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(delivered) >= 3 }, 15*time.Second, 20*time.Millisecond)
	time.Sleep(1500 * time.Millisecond) // a redelivery would come within AckWait
	mu.Lock()
	assert.Equal(t, []uint64{1, 1, 1}, delivered, "each delivered once")
	mu.Unlock()
	info, err := cons.Info(context.Background())
	require.NoError(t, err)
	assert.Zero(t, info.NumRedelivered)
}
