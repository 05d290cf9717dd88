package jetstreamreceiver

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/lifecyclehost"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/mirrorcache"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/natsclient"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelinedata"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/pipelinectx"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// gatedPipeline plays the pipeline after the receiver: each batch (one record here) hands
// off (as the agent exporter does once its calls are queued) when its handoff gate opens,
// if handsOff, and returns when its release gate opens or its context ends.
type gatedPipeline struct {
	handsOff bool
	mu       sync.Mutex
	entered  []string
	handoff  map[string]chan struct{}
	release  map[string]chan struct{}
}

func newGatedPipeline(handsOff bool, names ...string) *gatedPipeline {
	p := &gatedPipeline{handsOff: handsOff, handoff: map[string]chan struct{}{}, release: map[string]chan struct{}{}}
	for _, n := range names {
		p.handoff[n], p.release[n] = make(chan struct{}), make(chan struct{})
	}
	return p
}

func (p *gatedPipeline) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }

func (p *gatedPipeline) ConsumeLogs(ctx context.Context, ld plog.Logs) error {
	var name string
	for lr := range pipelinedata.All(ld) {
		name = string(pipelinedata.Read(lr).Body)
	}
	p.mu.Lock()
	p.entered = append(p.entered, name)
	p.mu.Unlock()
	if p.handsOff {
		select {
		case <-p.handoff[name]:
			pipelinectx.Handoff(ctx)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	select {
	case <-p.release[name]:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *gatedPipeline) seen() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.entered)
}

// startGated starts a receiver, batches of one record, on a project with the records
// r1..rn already stored.
func startGated(t *testing.T, prj string, p *gatedPipeline, n int) (*jsReceiver, jetstream.Consumer) {
	t.Helper()
	return startGatedWith(t, prj, p, n, nil)
}

func startGatedWith(t *testing.T, prj string, p *gatedPipeline, n int, mutate func(*Config)) (*jsReceiver, jetstream.Consumer) {
	t.Helper()
	host := lifecyclehost.New(t)
	url := host[natsclient.DefaultExtension].(natsclient.Embedded).ClientURL()
	m, err := mirrorcache.FromHost(host, mirrorcache.DefaultExtension)
	require.NoError(t, err)
	_, js := testenv.Connect(t, url)
	ctx := context.Background()
	store, err := mirror.Open(ctx, js, 1)
	require.NoError(t, err)
	require.Eventually(t, m.Ready, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, store.PutProject(ctx, mirror.Project{ID: prj, Version: 1, AgentSince: time.Now(),
		Pipeline: mirror.Pipeline{AgentEndpointURL: "https://agent.example.com/"}}))
	require.Eventually(t, func() bool { _, ok := m.Project(prj); return ok }, 10*time.Second, 10*time.Millisecond)
	cfg := createDefaultConfig().(*Config)
	cfg.BatchSize, cfg.Linger, cfg.Ledger = 1, 0, false
	if mutate != nil {
		mutate(cfg)
	}
	require.NoError(t, streams.Create(ctx, js, streams.RawConfig(prj, cfg.Stream)))
	for i := 1; i <= n; i++ {
		_, err := js.Publish(ctx, streams.RawSubject(prj), fmt.Appendf(nil, "r%d", i))
		require.NoError(t, err)
	}
	r, err := newReceiver(cfg, receivertest.NewNopSettings(NewFactory().Type()), p)
	require.NoError(t, err)
	require.NoError(t, r.Start(ctx, host))
	var cons jetstream.Consumer
	require.Eventually(t, func() bool {
		cons, err = js.Consumer(ctx, streams.RawStream(prj), cfg.Durable)
		return err == nil
	}, 10*time.Second, 10*time.Millisecond)
	return r, cons
}

func ackState(t *testing.T, c jetstream.Consumer) (floor uint64, pending int) {
	t.Helper()
	info, err := c.Info(context.Background())
	require.NoError(t, err)
	return info.AckFloor.Stream, info.NumAckPending
}

// Batches after one that is still in the pipeline go in once it handed off, each acked
// on its own; a shutdown hands the one still held back to the stream.
func TestLaterBatchesGoInOnceTheEarlierHandedOffAndAreAckedOnTheirOwn(t *testing.T) {
	p := newGatedPipeline(true, "r1", "r2", "r3")
	r, cons := startGated(t, "prj_inflight", p, 3)
	shut := false
	t.Cleanup(func() {
		if !shut {
			_ = r.Shutdown(context.Background())
		}
	})

	require.Eventually(t, func() bool { return len(p.seen()) == 1 }, 20*time.Second, 10*time.Millisecond)
	assert.Never(t, func() bool { return len(p.seen()) > 1 }, 300*time.Millisecond, 10*time.Millisecond,
		"the next batch waits until the first one handed off: the processors see one batch at a time")
	close(p.handoff["r1"])
	close(p.handoff["r2"])
	close(p.handoff["r3"])
	require.Eventually(t, func() bool { return len(p.seen()) == 3 }, 10*time.Second, 10*time.Millisecond,
		"r2 and r3 go in while r1 is still in the pipeline")
	assert.Equal(t, []string{"r1", "r2", "r3"}, p.seen(), "in stream order")

	close(p.release["r2"])
	close(p.release["r3"])
	require.Eventually(t, func() bool { _, pending := ackState(t, cons); return pending == 1 }, 10*time.Second, 10*time.Millisecond,
		"r2 and r3 acked while r1 is still held")
	floor, _ := ackState(t, cons)
	assert.Zero(t, floor, "r1 is not acked")

	require.NoError(t, r.Shutdown(context.Background()))
	shut = true
	floor, _ = ackState(t, cons)
	assert.Zero(t, floor, "the interrupted batch is left for redelivery, not acked")
	info, err := cons.Info(context.Background())
	require.NoError(t, err)
	assert.Equal(t, uint64(3), info.Delivered.Stream)
}

// A pipeline that never hands off (the sink role's) gets one batch at a time, whatever
// max_inflight_batches says.
func TestWithoutHandoffBatchesGoOneAtATime(t *testing.T) {
	p := newGatedPipeline(false, "r1", "r2")
	r, _ := startGated(t, "prj_onebyone", p, 2)
	t.Cleanup(func() { _ = r.Shutdown(context.Background()) })

	require.Eventually(t, func() bool { return len(p.seen()) == 1 }, 20*time.Second, 10*time.Millisecond)
	assert.Never(t, func() bool { return len(p.seen()) > 1 }, 300*time.Millisecond, 10*time.Millisecond,
		"r2 waits until r1 returned")
	close(p.release["r1"])
	require.Eventually(t, func() bool { return len(p.seen()) == 2 }, 10*time.Second, 10*time.Millisecond)
	close(p.release["r2"])
}
