package agentexporter

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelinedata"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/principal"
	"github.com/otelcol-svc/otelcol-svc/internal/deliverylog"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
)

// The agent and sink exporters share the one replay queue, each replaying its own kind
// of delivery: a job taken by the other exporter's loop is put back for it, never
// dropped. Three dead-lettered calls and three dead-lettered results, all replayed at
// once with both exporters running: every one is sent again, once.
func TestEachExporterReplaysItsOwnKindFromTheSharedQueue(t *testing.T) {
	e := newEnv(t)
	var fixed atomic.Bool
	respond := func(_ int, w http.ResponseWriter, _ *http.Request) {
		if !fixed.Load() {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		_, _ = io.WriteString(w, `{}`)
	}
	ag, hook := newAgent(t, respond), newAgent(t, respond)
	p := sinkProject("kinds", mirror.Sink{ID: "s_hook", Kind: "webhook", URL: hook.srv.URL})
	p.Pipeline.AgentEndpointURL = ag.srv.URL
	p.Pipeline.BatchSize = 1
	e.putProject(t, p)
	agent := e.start(t, nil)
	sink := e.startSink(t)

	require.NoError(t, consume(agent, "kinds", records(3)))
	for n := range 3 {
		ld, lrs := pipelinedata.New()
		pipelinedata.Append(lrs, pipelinedata.Item{Body: []byte(`{"n":` + strconv.Itoa(n) + `}`), Kind: pipelinedata.KindResult,
			Seq: uint64(n + 1), SinkID: "s_hook", RequestID: "req_" + strconv.Itoa(n), MsgID: "out:" + strconv.Itoa(n)})
		require.NoError(t, sink.ConsumeLogs(principal.NewContext(context.Background(), principal.Principal{ProjectID: "kinds"}), ld))
	}
	var jobs []deliverylog.Job
	require.Eventually(t, func() bool {
		s, err := e.js.Stream(context.Background(), deliverylog.StreamName)
		if err != nil {
			return false
		}
		ds, err := deliverylog.NewReader(s).List(context.Background(), "kinds", deliverylog.Filter{State: deliverylog.StateDeadLettered})
		if err != nil || len(ds) != 6 {
			return false
		}
		jobs = jobs[:0]
		for _, d := range ds {
			jobs = append(jobs, deliverylog.Job{Project: "kinds", DeliveryID: d.ID, ReplayID: "rp", RequestedAt: time.Now()})
		}
		return true
	}, 10*time.Second, 20*time.Millisecond, "three calls and three results dead-lettered")
	require.Len(t, ag.requests(), 3)
	require.Len(t, hook.requests(), 3)

	fixed.Store(true)
	require.NoError(t, deliverylog.Enqueue(context.Background(), e.js, jobs))
	require.Eventually(t, func() bool { return len(ag.requests()) == 6 && len(hook.requests()) == 6 },
		15*time.Second, 10*time.Millisecond, "every call and result sent again")
	require.Eventually(t, func() bool {
		c, err := e.js.Consumer(context.Background(), deliverylog.ReplayStream, deliverylog.ReplayDurable)
		if err != nil {
			return false
		}
		info, err := c.Info(context.Background())
		return err == nil && info.NumPending == 0 && info.NumAckPending == 0
	}, 10*time.Second, 10*time.Millisecond, "every job settled")
	assert.Len(t, ag.requests(), 6, "each call replayed once")
	assert.Len(t, hook.requests(), 6, "each result replayed once")
}
