package jetstreamreceiver

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.uber.org/zap/zaptest"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/lifecyclehost"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/mirrorcache"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/natsclient"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelinedata"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// seenRecords is a pipeline that remembers which stream sequences it was handed.
type seenRecords struct {
	mu   sync.Mutex
	seqs map[uint64]bool
}

func (s *seenRecords) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }

func (s *seenRecords) ConsumeLogs(_ context.Context, ld plog.Logs) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for lr := range pipelinedata.All(ld) {
		s.seqs[pipelinedata.Read(lr).Seq] = true
	}
	return nil
}

func (s *seenRecords) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.seqs)
}

// A consumer whose connection stalls for longer than two heartbeats (the client reports
// "no heartbeat received" while staying connected) must consume every record once the
// connection flows again: the records stored before, during and after the stall. What the
// server sent during the stall arrives late, on the subscription it was sent to; a receiver
// that had given up on that subscription, or whose buffer overflowed when everything came
// at once, left those records "delivered" to no one until AckWait (bench/pipeline saw it).
func TestConsumingResumesAfterMissedHeartbeats(t *testing.T) {
	const expiry = 2 * time.Second // heartbeats every second, missed after two
	prev := pullExpiry
	pullExpiry = expiry
	t.Cleanup(func() { pullExpiry = prev })

	host := lifecyclehost.New(t)
	url := host[natsclient.DefaultExtension].(natsclient.Embedded).ClientURL()
	m, err := mirrorcache.FromHost(host, mirrorcache.DefaultExtension)
	require.NoError(t, err)
	_, js := testenv.Connect(t, url)
	ctx := context.Background()
	store, err := mirror.Open(ctx, js, 1)
	require.NoError(t, err)
	const id = "prj_stall"
	require.NoError(t, store.PutProject(ctx, mirror.Project{ID: id, Version: 1, AgentSince: time.Now(),
		Pipeline: mirror.Pipeline{AgentEndpointURL: "https://agent.example.com/"}}))
	require.Eventually(t, func() bool { _, ok := m.Project(id); return ok }, 10*time.Second, 10*time.Millisecond)

	cfg := createDefaultConfig().(*Config)
	cfg.BatchSize = 10
	require.NoError(t, streams.Create(ctx, js, streams.RawConfig(id, cfg.Stream)))
	publish := func(from, to int) {
		for i := from; i < to; i++ {
			_, err := js.Publish(ctx, streams.RawSubject(id), fmt.Appendf(nil, `{"n":%d}`, i))
			require.NoError(t, err)
		}
	}
	publish(0, 50)

	proxy := startStallProxy(t, url[len("nats://"):])
	cfg.NATS.URL = proxy.URL()
	sink := &seenRecords{seqs: map[uint64]bool{}}
	set := receivertest.NewNopSettings(NewFactory().Type())
	set.Logger = zaptest.NewLogger(t)
	r, err := newReceiver(cfg, set, sink)
	require.NoError(t, err)
	require.NoError(t, r.Start(ctx, host))
	defer func() { require.NoError(t, r.Shutdown(context.Background())) }()
	require.Eventually(t, func() bool { return sink.count() == 50 }, 20*time.Second, 10*time.Millisecond,
		"the records stored before the stall are consumed")

	proxy.pause()
	publish(50, 100)
	// The outage itself: long enough for the client to miss two heartbeats.
	time.Sleep(3 * expiry)
	proxy.resume()
	publish(100, 150)

	// Within AckWait: a record the receiver lost track of comes back only after it.
	const within = 20 * time.Second
	require.Less(t, within, cfg.AckWait)
	if !assert.Eventually(t, func() bool { return sink.count() == 150 }, within, 10*time.Millisecond) {
		c, err := js.Consumer(ctx, streams.RawStream(id), cfg.Durable)
		require.NoError(t, err)
		info, err := c.Info(ctx)
		require.NoError(t, err)
		t.Fatalf("%d of 150 records consumed after the stall; the consumer has %d pending, %d delivered and not acked",
			sink.count(), info.NumPending, info.NumAckPending)
	}
}
