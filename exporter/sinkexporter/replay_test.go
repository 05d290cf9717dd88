package sinkexporter

import (
	"context"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelinedata"
	"github.com/otelcol-svc/otelcol-svc/internal/deliverylog"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
)

// replayAll does what the console does for "Replay all" (POST .../deliveries/replay with
// {"state": "dead_lettered"}): it queues, as one bulk replay, every dead letter no replay
// stands for yet, and answers how many it queued.
func (e *env) replayAll(t *testing.T, project, replayID string) int {
	t.Helper()
	ctx := context.Background()
	s, err := e.js.Stream(ctx, deliverylog.StreamName)
	require.NoError(t, err)
	ds, err := deliverylog.NewReader(s).ListForReplay(ctx, project, deliverylog.Filter{State: deliverylog.StateDeadLettered})
	require.NoError(t, err)
	var jobs []deliverylog.Job
	for _, d := range ds {
		if d.ReplayedBy == "" {
			jobs = append(jobs, deliverylog.Job{Project: project, DeliveryID: d.ID, ReplayID: replayID, Bulk: true, RequestedAt: time.Now()})
		}
	}
	if len(jobs) > 0 {
		require.NoError(t, deliverylog.Enqueue(ctx, e.js, jobs))
	}
	e.replaysDone(t)
	return len(jobs)
}

// replaysDone waits until the replay queue holds no job, queued or running.
func (e *env) replaysDone(t *testing.T) {
	t.Helper()
	require.Eventually(t, func() bool {
		c, err := e.js.Consumer(context.Background(), deliverylog.ReplayStream, deliverylog.ReplayDurable)
		if err != nil {
			return false
		}
		info, err := c.Info(context.Background())
		return err == nil && info.NumPending == 0 && info.NumAckPending == 0
	}, 10*time.Second, 10*time.Millisecond)
}

func (e *env) list(t *testing.T, project string, f deliverylog.Filter) []deliverylog.Delivery {
	t.Helper()
	s, err := e.js.Stream(context.Background(), deliverylog.StreamName)
	require.NoError(t, err)
	ds, err := deliverylog.NewReader(s).List(context.Background(), project, f)
	require.NoError(t, err)
	return ds
}

// "Replay all" clicked three times over a dead letter whose destination is disabled adds
// one dead letter saying why, not one per click: the old one is marked replayed by it, and
// the later clicks find it still cannot be sent and log nothing new. Once the destination
// is enabled, replaying that one sends what the first delivery's dead letter holds.
func TestReplayAllOfAnUnreplayableDeliveryLogsItOnce(t *testing.T) {
	e := newEnv(t)
	var fixed atomic.Bool
	hook := newAgent(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		if !fixed.Load() {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		_, _ = io.WriteString(w, "ok")
	})
	p := e.putProject(t, sinkProject("ru", mirror.Sink{ID: "s_hook", Kind: "webhook", URL: hook.srv.URL}))
	r := e.start(t, nil)
	require.NoError(t, consumeResult(r, "ru", "s_hook", `{"text":"hello"}`))
	oldID := sinkDeliveryID(pipelinedata.Item{MsgID: "out:req_1:abc"}, "s_hook")
	old := e.delivery(t, "ru", oldID, inState(deliverylog.StateDeadLettered))
	require.Len(t, hook.requests(), 1)

	p.Sinks[0].Enabled = false
	e.putProject(t, p)

	assert.Equal(t, 1, e.replayAll(t, "ru", "rp1"), "the first click queues the dead letter")
	superseded := e.delivery(t, "ru", oldID, func(d deliverylog.Delivery) bool { return d.ReplayedBy != "" })
	first := e.delivery(t, "ru", superseded.ReplayedBy, inState(deliverylog.StateDeadLettered))
	assert.Equal(t, oldID, first.ReplayOf)
	assert.Equal(t, errSinkDisabled, first.Error)
	assert.Equal(t, old.DeadLetterSeq, first.DeadLetterSeq, "the replay points at what a later replay sends")

	// The console's answer counts what it queued: the one dead letter standing for the
	// result, never the old one again.
	assert.Equal(t, 1, e.replayAll(t, "ru", "rp2"))
	assert.Equal(t, 1, e.replayAll(t, "ru", "rp3"))

	// A replay by id is always logged; once it is visible, everything the clicks before
	// it logged is too (one writer, in order).
	fixed.Store(true)
	p.Sinks[0].Enabled = true
	e.putProject(t, p)
	require.NoError(t, deliverylog.Enqueue(context.Background(), e.js, []deliverylog.Job{
		{Project: "ru", DeliveryID: first.ID, ReplayID: "by-id", RequestedAt: time.Now()}}))
	require.Eventually(t, func() bool { return len(hook.requests()) == 2 }, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, `{"text":"hello"}`, string(hook.requests()[1].body), "sent from the first delivery's dead letter")
	e.delivery(t, "ru", first.ID, func(d deliverylog.Delivery) bool { return d.ReplayedBy != "" })

	dead := e.list(t, "ru", deliverylog.Filter{State: deliverylog.StateDeadLettered})
	ids := make([]string, 0, len(dead))
	for _, d := range dead {
		ids = append(ids, d.ID)
	}
	assert.ElementsMatch(t, []string{oldID, first.ID}, ids, "exactly one new dead letter for three clicks")
	assert.Zero(t, e.replayAll(t, "ru", "rp4"), "nothing is left to replay")
	require.Eventually(t, func() bool { return e.ledger(t, "ru").Replayed == 1 }, 10*time.Second, 20*time.Millisecond)
}
