package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/records"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// The pipeline role alone (configs/pipeline.yaml) is killed with SIGKILL in the middle of
// a 20k-record run and restarted: every record reaches the agent at least once.
func TestPipelineKill9LosesNothing(t *testing.T) {
	const n = 20000
	nt := testenv.StartNATS(t)
	js, m := connectMirror(t, nt.URL())
	ctx := context.Background()
	agent := startAgent(t)
	require.NoError(t, m.PutProject(ctx, mirror.Project{ID: "crash", Version: 1, Pipeline: mirror.Pipeline{
		Trigger: `kind == "order"`, AgentEndpointURL: agent.URL, BatchSize: 100,
	}}))

	// The records are on the stream before the pipeline starts, as after an outage.
	require.NoError(t, streams.Ensure(ctx, js, streams.RawConfig("crash", streams.DefaultLimits())))
	futures := make([]jetstream.PubAckFuture, 0, n)
	for i := 0; i < n; i++ {
		msg := &nats.Msg{Subject: streams.RawSubject("crash"), Data: []byte(`{"kind":"order","id":` + strconv.Itoa(i) + `}`),
			Header: nats.Header{streams.HeaderSignal: []string{records.SignalEvent}}}
		f, err := js.PublishMsgAsync(msg)
		require.NoError(t, err)
		futures = append(futures, f)
	}
	for _, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			t.Fatal(err)
		case <-time.After(30 * time.Second):
			t.Fatal("publish not acknowledged")
		}
	}

	col := testenv.StartCollector(t, testenv.CollectorOptions{Config: "configs/pipeline.yaml", Env: map[string]string{
		"NATS_URL": nt.URL(), "SVC_OUTBOUND_ALLOW": "127.0.0.0/8", "SVC_STREAM_REPLICAS": "1",
	}})
	ids := func() (unique, total int) {
		seen := map[int]bool{}
		for _, b := range batchRecords(t, agent.delivered()) {
			for _, r := range b {
				var rec struct{ ID int }
				require.NoError(t, json.Unmarshal(r, &rec))
				seen[rec.ID] = true
				total++
			}
		}
		return len(seen), total
	}
	require.Eventually(t, func() bool { u, _ := ids(); return u > n/4 }, 60*time.Second, 20*time.Millisecond)
	col.Kill()
	before, _ := ids()
	col.Start()
	require.Eventually(t, func() bool { u, _ := ids(); return u == n }, 120*time.Second, 100*time.Millisecond,
		"every record must reach the agent after the restart")
	unique, total := ids()
	t.Logf("killed after %d records; %d delivered in all, %d unique, %d duplicates", before, total, unique, total-unique)
	// Redelivered at most: what was in flight at the kill, the consumer's unacked window
	// (MaxAckPending = 4 x the receiver's batch size).
	assert.LessOrEqual(t, total-unique, 4*1000, "duplicates are bounded by the records in flight")
}

// Two pipeline processes share each project's durable consumer: both do part of the work
// and every record reaches the agent.
func TestPipelineProcessesShareTheWork(t *testing.T) {
	const n = 4000
	nt := testenv.StartNATS(t)
	nc, js := testenv.Connect(t, nt.URL())
	ctx := context.Background()
	m, err := mirror.Open(ctx, js, 1)
	require.NoError(t, err)
	agent := startAgent(t)
	agent.setRespond(func(int, *http.Request) (int, time.Duration) { return http.StatusOK, 2 * time.Millisecond })
	require.NoError(t, m.PutProject(ctx, mirror.Project{ID: "shared", Version: 1, Pipeline: mirror.Pipeline{AgentEndpointURL: agent.URL, BatchSize: 20}}))

	vars := map[string]string{"NATS_URL": nt.URL(), "SVC_OUTBOUND_ALLOW": "127.0.0.0/8", "SVC_STREAM_REPLICAS": "1", "SVC_PIPELINE_FETCH": "50"}
	a := testenv.StartCollector(t, testenv.CollectorOptions{Config: "configs/pipeline.yaml", Env: vars})
	b := testenv.StartCollector(t, testenv.CollectorOptions{Config: "configs/pipeline.yaml", Env: vars})

	require.NoError(t, streams.Ensure(ctx, js, streams.RawConfig("shared", streams.DefaultLimits())))
	for i := 0; i < n; i++ {
		_, err := js.PublishMsg(ctx, &nats.Msg{Subject: streams.RawSubject("shared"), Data: []byte(`{"id":` + strconv.Itoa(i) + `}`),
			Header: nats.Header{streams.HeaderSignal: []string{records.SignalEvent}}})
		require.NoError(t, err)
	}
	// Whoever stores records other than through the exporter wakes the consumers itself
	// (idle consumers are not pulled from).
	require.NoError(t, nc.Publish(streams.WakeSubject(streams.WakeRaw, "shared"), nil))
	seen := func() int {
		ids := map[string]bool{}
		for _, batch := range batchRecords(t, agent.delivered()) {
			for _, r := range batch {
				ids[string(r)] = true
			}
		}
		return len(ids)
	}
	require.Eventually(t, func() bool { return seen() == n }, 60*time.Second, 50*time.Millisecond)
	handled := func(c *testenv.Collector) int {
		v, _ := strconv.Atoi(metric(t, c.Metrics, "otelcol_receiver_accepted_log_records"))
		return v
	}
	ha, hb := handled(a), handled(b)
	t.Logf("process A handled %d records, process B %d", ha, hb)
	assert.Positive(t, ha, "both processes take part")
	assert.Positive(t, hb, "both processes take part")
}
