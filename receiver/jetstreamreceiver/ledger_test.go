package jetstreamreceiver

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/otelcol-svc/otelcol-svc/components/deliverylog"
	"github.com/otelcol-svc/otelcol-svc/components/lifecyclehost"
	"github.com/otelcol-svc/otelcol-svc/components/mirror"
	"github.com/otelcol-svc/otelcol-svc/components/mirror/mirrorcache"
	"github.com/otelcol-svc/otelcol-svc/components/natsclient"
	"github.com/otelcol-svc/otelcol-svc/components/pipelinedata"
	"github.com/otelcol-svc/otelcol-svc/components/streams"
	"github.com/otelcol-svc/otelcol-svc/components/testenv"
)

// agentLike stands in for the pipeline after the receiver: every third record is
// "sent", every fifth dead-lettered, the rest dropped, as the agent exporter reports
// them; its first batch fails after reporting, so that batch comes again: a failed batch
// counts nothing, its redelivery counts once. (A batch settled and then not acked, a crash
// in between, is deduplicated by the ledger: components/deliverylog's
// TestSettleCountsARedeliveredBatchOnce.)
type agentLike struct {
	failed atomic.Bool
}

func (a *agentLike) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }

func (a *agentLike) ConsumeLogs(ctx context.Context, ld plog.Logs) error {
	o := deliverylog.OutcomeFrom(ctx)
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
	require.NoError(t, store.PutProject(ctx, mirror.Project{ID: prj, Version: 1,
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
