//go:build cluster

package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/apikey"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// At full size: 100,000 numbered records sent unpaced by 16 clients
// that retry each batch without an Idempotency-Key until it is answered 2xx, through one
// receiver, pipeline and sink process each (the shipped configs, streams with 3 replicas
// on a 3-node NATS cluster), while each of the three is killed with SIGKILL in turn and
// restarted. Every record reaches the stream, the agent and (as the agent's result) the
// webhook; the test prints how many were stored twice (a keyless retry of a request
// stored whole whose answer the kill cut off) and how many the agent and the webhook got
// again (the killed pipeline's unacknowledged batches, delivered again after ack_wait).
func TestClusterUnpacedKeylessLoadSurvivesKill9OfEachRole(t *testing.T) {
	const records, batch, workers = 100_000, 100, 16
	cl := testenv.StartNATSCluster(t, 3)
	cl.WaitReady(60 * time.Second)
	js, m := connectMirror(t, cl.URL())
	agent := testenv.StartNumberAgent(t)
	hook := testenv.StartNumberWebhook(t)
	ctx := context.Background()
	const project = "unpaced"
	key := apikey.Generate(apikey.KindProject)
	// The mirror's buckets were just created: their streams may still be electing a leader.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.NoError(c, m.PutProject(ctx, mirror.Project{ID: project, Version: 1,
			Pipeline: mirror.Pipeline{AgentEndpointURL: agent.URL, BatchSize: 100},
			Sinks:    []mirror.Sink{{ID: "hook", Kind: "webhook", Enabled: true, URL: hook.URL}},
		}))
		require.NoError(c, m.PutKey(ctx, apikey.Hash(key), mirror.KeyEntry{KeyID: "k-" + project, ProjectID: project, Scope: mirror.ScopeProject}))
	}, 30*time.Second, 200*time.Millisecond)

	vars := map[string]string{"NATS_URL": cl.URL(), "SVC_OUTBOUND_ALLOW": "127.0.0.0/8", "SVC_USAGE_METERING": "false"}
	start := func(config string) *testenv.Collector {
		return testenv.StartCollector(t, testenv.CollectorOptions{Config: config, Env: vars})
	}
	receiver, pipeline, sink := start("configs/receiver.yaml"), start("configs/pipeline.yaml"), start("configs/sink.yaml")
	waitAccepted(t, receiver.HTTP, key)
	agent.SetReceivers(key, receiver.HTTP)

	began := time.Now()
	load := runKeylessLoad(t, key, func() string { return receiver.HTTP }, records, batch, workers)
	for _, kill := range []struct {
		role string
		c    *testenv.Collector
		at   int
	}{{"receiver", receiver, records / 5}, {"pipeline", pipeline, records * 45 / 100}, {"sink", sink, records * 7 / 10}} {
		require.Eventually(t, func() bool { return load.acked.Load() >= int64(kill.at) }, 5*time.Minute, 5*time.Millisecond,
			"the load stalled at %d records answered 2xx", load.acked.Load())
		kill.c.Kill()
		t.Logf("%s killed with %d records answered 2xx", kill.role, load.acked.Load())
		kill.c.Start()
	}
	load.wait(t, 10*time.Minute)
	t.Logf("load done in %s: %d requests sent again", time.Since(began).Round(100*time.Millisecond), load.retried.Load())

	stored := countNumbers(t, js, streams.RawStream(project), records)
	lost, dups := load.tally(stored)
	require.Empty(t, lost, "records answered 2xx (after retries) missing from the stream: %v", head(lost))

	// Pipeline work the killed process held comes back after its consumer's ack_wait.
	var atAgent, atHook map[int]int
	for deadline := time.Now().Add(4 * time.Minute); ; time.Sleep(time.Second) {
		atAgent, _ = agent.Snapshot()
		atHook, _ = hook.Snapshot()
		if len(atAgent) == records && len(atHook) == records {
			break
		}
		if time.Now().After(deadline) {
			want := make(map[int]bool, records)
			for n := range records {
				want[n] = true
			}
			dead := 0
			if s, err := js.Stream(ctx, streams.DeadLetterStream(project)); err == nil {
				dead = int(s.CachedInfo().State.Msgs)
			}
			t.Fatalf("records missing downstream after 4 minutes: %d not at the agent (first %v), %d not at the webhook (first %v); %d agent calls answered; %d dead letters",
				records-len(atAgent), head(testenv.Missing(want, atAgent)), records-len(atHook), head(testenv.Missing(want, atHook)), agent.Calls(), dead)
		}
	}
	t.Logf("unpaced keyless load, receiver, pipeline and sink each killed once: %d records, lost 0; stored twice %d (%.3f%%); "+
		"agent got %d again (%.2f%%), webhook %d again",
		records, dups, 100*float64(dups)/records, duplicates(atAgent), 100*float64(duplicates(atAgent))/records, duplicates(atHook))
	// Stored twice only when the killed receiver had committed a whole request and not
	// answered: at most the one batch it keeps in flight per stream
	// (exporter/jetstreamexporter/internal/atomicbatch.InFlight).
	assert.LessOrEqual(t, dups, batch)
}
