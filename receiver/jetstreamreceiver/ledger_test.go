package jetstreamreceiver

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/lifecyclehost"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/mirrorcache"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/natsclient"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelinedata"
	"github.com/otelcol-svc/otelcol-svc/internal/deliverylog"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/pipelinectx"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// agentLike stands in for the pipeline after the receiver: every third record is
// "sent", every fifth dead-lettered, the rest dropped, as the agent exporter reports
// them; its first batch fails after reporting, so that batch comes again: a failed batch
// counts nothing, its redelivery counts once. (A batch settled and then not acked, a crash
// in between, is deduplicated by the ledger: internal/deliverylog's
// TestSettleCountsARedeliveredBatchOnce.)
type agentLike struct {
	failed atomic.Bool
}

func (a *agentLike) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }

func (a *agentLike) ConsumeLogs(ctx context.Context, ld plog.Logs) error {
	o := pipelinectx.OutcomeFrom(ctx)
	for lr := range pipelinedata.All(ld) {
		seq := pipelinedata.Read(lr).Seq
		switch {
		case seq%3 == 0:
			o.Call([]uint64{seq}, false)
		case seq%5 == 0:
			o.Call([]uint64{seq}, true)
		}
	}
	if a.failed.CompareAndSwap(false, true) {
		return fmt.Errorf("interrupted")
	}
	return nil
}

func TestBatchesAreCountedInTheLedgerOnceBeforeTheirAck(t *testing.T) {
	const prj, total = "prj_ledger", 100
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
	cfg.RetryDelay = 10 * time.Millisecond
	require.NoError(t, streams.Create(ctx, js, streams.RawConfig(prj, cfg.Stream)))
	for i := range total {
		_, err := js.Publish(ctx, streams.RawSubject(prj), fmt.Appendf(nil, `{"n":%d}`, i))
		require.NoError(t, err)
	}
	r, err := newReceiver(cfg, receivertest.NewNopSettings(NewFactory().Type()), &agentLike{})
	require.NoError(t, err)
	require.NoError(t, r.Start(ctx, host))
	t.Cleanup(func() { require.NoError(t, r.Shutdown(context.Background())) })

	var v deliverylog.LedgerView
	require.Eventually(t, func() bool {
		v, err = deliverylog.View(ctx, js, prj, deliverylog.ViewOptions{PipelineDurable: cfg.Durable})
		require.NoError(t, err)
		return v.Pending == 0 && v.Balanced
	}, 30*time.Second, 20*time.Millisecond, "all records settled and the ledger balanced")
	sent, dl := 0, 0
	for s := 1; s <= total; s++ {
		switch {
		case s%3 == 0:
			sent++
		case s%5 == 0:
			dl++
		}
	}
	require.Equal(t, int64(total), v.Received)
	require.Equal(t, int64(sent), v.AgentCalls, "sent records counted once, the failed batch included")
	require.Equal(t, int64(dl), v.DeadLettered)
	require.Equal(t, int64(total-sent-dl), v.Dropped)
}

// A destination cursor the previous release created has
// delivered already and has no start entry in the ledger. The upgraded sink role records
// one when it opens the cursor, from where the cursor has settled to, so the
// destination's figures are exact from then on and say since when, and the ledger can
// balance again; before, they stayed counted, approximate, for good.
func TestSinkRoleAdoptsACursorFromAPreviousRelease(t *testing.T) {
	const prj = "prj_upgrade"
	host := lifecyclehost.New(t)
	url := host[natsclient.DefaultExtension].(natsclient.Embedded).ClientURL()
	m, err := mirrorcache.FromHost(host, mirrorcache.DefaultExtension)
	require.NoError(t, err)
	_, js := testenv.Connect(t, url)
	ctx := context.Background()
	cfg := createDefaultConfig().(*Config)
	cfg.Consume = ConsumeOutput
	cfg.RetryDelay = 10 * time.Millisecond

	// As the previous release left it: 10 results, 4 settled, 2 taken by a sink
	// process that went away with them (they come again after the ack wait), 4 never
	// taken.
	require.NoError(t, streams.Create(ctx, js, streams.OutputConfig(prj, cfg.Stream)))
	for i := range 10 {
		_, err := js.Publish(ctx, streams.OutputSubject(prj), fmt.Appendf(nil, `{"n":%d}`, i))
		require.NoError(t, err)
	}
	old, err := js.CreateConsumer(ctx, streams.OutputStream(prj), jetstream.ConsumerConfig{
		Durable: cfg.Durable + "-s1", AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Second,
		DeliverPolicy: jetstream.DeliverAllPolicy, MaxDeliver: -1})
	require.NoError(t, err)
	b, err := old.FetchNoWait(6)
	require.NoError(t, err)
	taken := 0
	for msg := range b.Messages() {
		if taken < 4 {
			require.NoError(t, msg.DoubleAck(ctx))
		}
		taken++
	}
	require.Equal(t, 6, taken)

	store, err := mirror.Open(ctx, js, 1)
	require.NoError(t, err)
	require.Eventually(t, m.Ready, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, store.PutProject(ctx, mirror.Project{ID: prj, Version: 1,
		Sinks: []mirror.Sink{{ID: "s1", Kind: "webhook", URL: "https://hook.example.com/", Enabled: true}}}))
	require.Eventually(t, func() bool { _, ok := m.Project(prj); return ok }, 10*time.Second, 10*time.Millisecond)
	r, err := newReceiver(cfg, receivertest.NewNopSettings(NewFactory().Type()), consumertest.NewNop())
	require.NoError(t, err)
	require.NoError(t, r.Start(ctx, host))
	t.Cleanup(func() { require.NoError(t, r.Shutdown(context.Background())) })

	var v deliverylog.LedgerView
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		v, err = deliverylog.View(ctx, js, prj, deliverylog.ViewOptions{SinkDurable: cfg.Durable, Sinks: []string{"s1"}})
		require.NoError(ct, err)
		assert.Zero(ct, v.Destinations["s1"].Pending)
		assert.True(ct, v.Destinations["s1"].Exact)
	}, 30*time.Second, 20*time.Millisecond, "the cursor's figures, exact once found: %+v", &v)
	d := v.Destinations["s1"]
	require.NotNil(t, d.Since)
	assert.True(t, d.Since.After(old.CachedInfo().Created), "since the upgrade, not since the cursor was created")
	assert.Equal(t, int64(6), d.Results, "owed since found: the 2 in the lost process's hands and the 4 never taken")
	assert.Equal(t, int64(6), d.Delivered)
	assert.ElementsMatch(t, []string{"unmatched", "replayed"}, v.Approximate, "only the figures that are always counted")
	assert.True(t, v.Balanced)
}

// Results the output stream removed (older than its
// max_age) before a destination took them count as settled on its cursor, and would
// show as delivered. The sink role sees it when it opens the cursor and marks the
// destination's figures approximate, so the ledger says so even when nobody looked
// while it showed (the cursor moves past them at its next delivery).
func TestSinkRoleMarksResultsRemovedBeforeDelivery(t *testing.T) {
	const prj = "prj_aged"
	host := lifecyclehost.New(t)
	url := host[natsclient.DefaultExtension].(natsclient.Embedded).ClientURL()
	m, err := mirrorcache.FromHost(host, mirrorcache.DefaultExtension)
	require.NoError(t, err)
	_, js := testenv.Connect(t, url)
	ctx := context.Background()
	cfg := createDefaultConfig().(*Config)
	cfg.Consume = ConsumeOutput
	cfg.RetryDelay = 10 * time.Millisecond

	require.NoError(t, streams.Create(ctx, js, streams.OutputConfig(prj, cfg.Stream)))
	cur, err := js.CreateConsumer(ctx, streams.OutputStream(prj), jetstream.ConsumerConfig{
		Durable: cfg.Durable + "-s1", AckPolicy: jetstream.AckExplicitPolicy, DeliverPolicy: jetstream.DeliverAllPolicy, MaxDeliver: -1})
	require.NoError(t, err)
	require.NoError(t, deliverylog.StartDestination(ctx, js, prj, "s1", cur.CachedInfo()))
	for i := range 5 {
		_, err := js.Publish(ctx, streams.OutputSubject(prj), fmt.Appendf(nil, `{"n":%d}`, i))
		require.NoError(t, err)
	}
	// No sink process runs while the stream removes the first 3 results. Deleting
	// them removes them the way max_age does (the stream's first sequence moves past
	// them, the cursor is not told) without a race against the clock: with a short
	// max_age the 2 left could age out too on a loaded machine before the sink took
	// them. (A purge would not do: it moves the cursors past what it removes.)
	out, err := js.Stream(ctx, streams.OutputStream(prj))
	require.NoError(t, err)
	for seq := uint64(1); seq <= 3; seq++ {
		require.NoError(t, out.DeleteMsg(ctx, seq))
	}

	store, err := mirror.Open(ctx, js, 1)
	require.NoError(t, err)
	require.Eventually(t, m.Ready, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, store.PutProject(ctx, mirror.Project{ID: prj, Version: 1,
		Sinks: []mirror.Sink{{ID: "s1", Kind: "webhook", URL: "https://hook.example.com/", Enabled: true}}}))
	r, err := newReceiver(cfg, receivertest.NewNopSettings(NewFactory().Type()), consumertest.NewNop())
	require.NoError(t, err)
	require.NoError(t, r.Start(ctx, host))
	t.Cleanup(func() { require.NoError(t, r.Shutdown(context.Background())) })

	// The ledger is read only once the sink has moved the cursor past the removed
	// results, when its state no longer shows them.
	require.Eventually(t, func() bool {
		ci, err := cur.Info(ctx)
		require.NoError(t, err)
		return ci.NumPending == 0 && ci.NumAckPending == 0 && ci.Delivered.Stream >= 5
	}, 30*time.Second, 20*time.Millisecond)
	v, err := deliverylog.View(ctx, js, prj, deliverylog.ViewOptions{SinkDurable: cfg.Durable, Sinks: []string{"s1"}})
	require.NoError(t, err)
	d := v.Destinations["s1"]
	assert.False(t, d.Exact, "%+v", d)
	assert.Equal(t, deliverylog.ApproxResultsRemoved, d.ApproximateReason)
	assert.Contains(t, v.Approximate, "destinations.s1")
	assert.False(t, v.Balanced)
}
