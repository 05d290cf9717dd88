package jetstreamreceiver

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// At shutdown the batch in the pipeline may finish within drain_timeout, and is acked
// (not sent again); what was fetched behind it goes back to the stream at once. With one
// batch in flight (the sink role) the batch runs on the consumer's own goroutine, and
// the hand-back must not wait for it either.
func TestShutdownLetsTheBatchFinishAndHandsBackTheRest(t *testing.T) {
	for _, inflight := range []int{defaultMaxInflightForTest(), 1} {
		t.Run(fmt.Sprintf("inflight_%d", inflight), func(t *testing.T) {
			shutdownLetsTheBatchFinishAndHandsBackTheRest(t, fmt.Sprintf("prj_drainfinish%d", inflight), inflight)
		})
	}
}

func defaultMaxInflightForTest() int { return createDefaultConfig().(*Config).MaxInflightBatches }

func shutdownLetsTheBatchFinishAndHandsBackTheRest(t *testing.T, prj string, inflight int) {
	p := newGatedPipeline(false, "r1", "r2", "r3")
	r, cons := startGatedWith(t, prj, p, 3, func(c *Config) { c.DrainTimeout, c.MaxInflightBatches = 20*time.Second, inflight })
	require.Eventually(t, func() bool { return len(p.seen()) == 1 }, 20*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool { _, pending := ackState(t, cons); return pending == 3 }, 10*time.Second, 10*time.Millisecond,
		"r2 and r3 are fetched ahead")

	stopped := make(chan error, 1)
	go func() { stopped <- r.Shutdown(context.Background()) }()
	// Another process on the same consumer gets what was fetched ahead at once (ack_wait
	// is a minute), while r1 is still in the pipeline.
	assert.ElementsMatch(t, []string{"r2", "r3"}, takeOver(t, cons, 2), "JetStream redelivers handed-back records in no promised order")
	close(p.release["r1"])
	select {
	case err := <-stopped:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("shutdown did not return once the batch finished")
	}
	require.Eventually(t, func() bool { floor, pending := ackState(t, cons); return floor == 3 && pending == 0 },
		5*time.Second, 10*time.Millisecond, "r1 finished within drain_timeout and is acked")
	assert.Equal(t, []string{"r1"}, p.seen(), "nothing new is taken once the stop began")
}

// A batch still in the pipeline at the end of drain_timeout is interrupted and handed
// back at once: pending for redelivery now, not after ack_wait.
func TestShutdownHandsBackABatchThatDoesNotFinish(t *testing.T) {
	p := newGatedPipeline(false, "r1", "r2")
	r, cons := startGatedWith(t, "prj_drainstuck", p, 2, func(c *Config) { c.DrainTimeout = 200 * time.Millisecond })
	require.Eventually(t, func() bool { return len(p.seen()) == 1 }, 20*time.Second, 10*time.Millisecond)

	began := time.Now()
	require.NoError(t, r.Shutdown(context.Background()))
	took := time.Since(began)
	assert.GreaterOrEqual(t, took, 200*time.Millisecond, "the batch had drain_timeout to finish")
	assert.Less(t, took, 3*time.Second, "then it was interrupted")
	floor, _ := ackState(t, cons)
	assert.Zero(t, floor, "the interrupted batch is not acked")
	assert.ElementsMatch(t, []string{"r1", "r2"}, takeOver(t, cons, 2), "both are there for the next process at once, not after ack_wait")
}

// takeOver plays another process on the same consumer: it fetches up to n records,
// waiting at most 2 s (the consumer's ack_wait is a minute), and acks them.
func takeOver(t *testing.T, cons jetstream.Consumer, n int) []string {
	t.Helper()
	batch, err := cons.Fetch(n, jetstream.FetchMaxWait(2*time.Second))
	require.NoError(t, err)
	var got []string
	for m := range batch.Messages() {
		got = append(got, string(m.Data()))
		require.NoError(t, m.Ack())
	}
	return got
}
