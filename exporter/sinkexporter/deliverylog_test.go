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

// A webhook that is down shows its delivery retrying, with the failed attempt, until it
// takes it; then delivered, counted for the destination.
func TestSinkDeliveryShowsRetryingThenDelivered(t *testing.T) {
	e := newEnv(t)
	release := make(chan struct{})
	hook := newAgent(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, "down for maintenance")
			return
		}
		<-release
		_, _ = io.WriteString(w, "ok")
	})
	e.putProject(t, sinkProject("sk", mirror.Sink{ID: "s_hook", Kind: "webhook", URL: hook.srv.URL}))
	r := e.start(t, nil)

	done := make(chan error, 1)
	go func() { done <- consumeResult(r, "sk", "s_hook", `{"text":"hello"}`) }()
	id := sinkDeliveryID(pipelinedata.Item{MsgID: "out:req_1:abc"}, "s_hook")
	d := e.delivery(t, "sk", id, inState(deliverylog.StateRetrying))
	assert.Equal(t, deliverylog.KindSink, d.Kind)
	assert.Equal(t, "s_hook", d.SinkID)
	assert.Equal(t, "webhook", d.SinkKind)
	assert.Equal(t, "req_1", d.RequestID)
	assert.Equal(t, uint64(7), d.SourceSeq)
	assert.Equal(t, `{"text":"hello"}`, string(d.RequestBody))
	require.Len(t, d.AttemptLog, 1)
	assert.Equal(t, 503, d.AttemptLog[0].StatusCode)
	assert.Equal(t, "down for maintenance", string(d.Answer))

	close(release)
	require.NoError(t, <-done)
	d = e.delivery(t, "sk", id, inState(deliverylog.StateDelivered))
	assert.Len(t, d.AttemptLog, 2)
	assert.Equal(t, 200, d.StatusCode)
	assert.Regexp(t, `^snk_[0-9a-f]{32}$`, id)
	assert.NotEqual(t, id, sinkDeliveryID(pipelinedata.Item{MsgID: "out:req_1:abc"}, "s_other"), "one delivery per destination")
	require.Eventually(t, func() bool { return e.ledger(t, "sk").Delivered == 1 }, 10*time.Second, 20*time.Millisecond)
}

// A dead-lettered sink delivery is replayed from its dead letter once the destination
// takes it; a replay to a destination removed since is logged dead-lettered, saying so.
func TestSinkReplay(t *testing.T) {
	e := newEnv(t)
	var fixed atomic.Bool
	hook := newAgent(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		if !fixed.Load() {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		_, _ = io.WriteString(w, "ok")
	})
	p := e.putProject(t, sinkProject("sr", mirror.Sink{ID: "s_hook", Kind: "webhook", URL: hook.srv.URL}))
	r := e.start(t, nil)

	require.NoError(t, consumeResult(r, "sr", "s_hook", `{"text":"hello"}`))
	oldID := sinkDeliveryID(pipelinedata.Item{MsgID: "out:req_1:abc"}, "s_hook")
	old := e.delivery(t, "sr", oldID, inState(deliverylog.StateDeadLettered))
	assert.Positive(t, old.DeadLetterSeq)

	fixed.Store(true)
	require.NoError(t, deliverylog.Enqueue(context.Background(), e.js, []deliverylog.Job{
		{Project: "sr", DeliveryID: oldID, ReplayID: "rp1", RequestedAt: time.Now()}}))
	require.Eventually(t, func() bool { return len(hook.requests()) == 2 }, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, `{"text":"hello"}`, string(hook.requests()[1].body))
	assert.NotEqual(t, hook.requests()[0].header.Get("webhook-id"), hook.requests()[1].header.Get("webhook-id"))

	// The destination is removed; a second replay cannot be sent and says why.
	p.Sinks = nil
	e.putProject(t, p)
	require.NoError(t, deliverylog.Enqueue(context.Background(), e.js, []deliverylog.Job{
		{Project: "sr", DeliveryID: oldID, ReplayID: "rp2", RequestedAt: time.Now()}}))
	var gone deliverylog.Delivery
	require.Eventually(t, func() bool {
		s, err := e.js.Stream(context.Background(), deliverylog.StreamName)
		if err != nil {
			return false
		}
		ds, err := deliverylog.NewReader(s).List(context.Background(), "sr", deliverylog.Filter{State: deliverylog.StateDeadLettered})
		if err != nil {
			return false
		}
		for _, d := range ds {
			if d.ReplayOf == oldID {
				gone = d
				return true
			}
		}
		return false
	}, 10*time.Second, 20*time.Millisecond)
	assert.Equal(t, errSinkGone, gone.Error)
	assert.Len(t, hook.requests(), 2)
	assert.Len(t, e.deadLetters(t, "sr"), 1, "the dead letter is kept")
}
