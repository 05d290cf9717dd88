//go:build cluster

// The scale-out deployment, proven: a 3-node NATS cluster, two processes of each role and
// the control plane on PostgreSQL, under load while a NATS node and one process of each
// role crash. Behind the `cluster` tag because it takes minutes: `make test-cluster`.

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/apikey"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

const (
	clusterRate     = 50               // events per second, alternating between the receivers
	clusterDuration = 55 * time.Second // how long the load runs
	clusterDrain    = 3 * time.Minute  // how long delivery may take after the load
	clusterRedisDB  = "7"              // this test's Redis database (window store)
)

// Every event answered 2xx reaches the agent and every result the agent handed in
// reaches the webhook, although the stream leader's NATS node and one receiver, one
// pipeline and one sink process are killed with SIGKILL (and restarted) under load.
func TestClusterScaleOutSurvivesKill9(t *testing.T) {
	cl := testenv.StartNATSCluster(t, 3)
	_, js := testenv.Connect(t, cl.URL())
	cp := testenv.StartControlPlane(t, map[string]string{
		"DATABASE_URL": testenv.PostgresURL(t), "NATS_URL": cl.URL(), "SVC_MIRROR_REPLICAS": "3", "SVC_STREAM_REPLICAS": "3", "SVC_OUTBOUND_ALLOW": "127.0.0.0/8",
		"SVC_DATA_DIR": t.TempDir(),
	})

	// Set up once the control plane is ready (configuration mirror published), as a user
	// told to wait for /readyz would. (Before 7e2447d a key created during that first
	// publish was pruned from the mirror for a minute; this test found it.)
	require.Eventually(t, func() bool {
		resp, err := http.Get(cp.URL + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 30*time.Second, 50*time.Millisecond, "the control plane never became ready")

	// Two processes of each role, with the shipped configs and their default replicas (3).
	// They run before the pipeline is saved: the control plane has a collector check it.
	vars := map[string]string{"NATS_URL": cl.URL(), "SVC_OUTBOUND_ALLOW": "127.0.0.0/8",
		"REDIS_URL": "redis://127.0.0.1:6379/" + clusterRedisDB}
	start := func(config string) *testenv.Collector {
		return testenv.StartCollector(t, testenv.CollectorOptions{Config: config, Env: vars})
	}
	receivers := []*testenv.Collector{start("configs/receiver.yaml"), start("configs/receiver.yaml")}
	pipelines := []*testenv.Collector{start("configs/pipeline.yaml"), start("configs/pipeline.yaml")}
	sinks := []*testenv.Collector{start("configs/sink.yaml"), start("configs/sink.yaml")}

	// The customer's side, set up through the control plane API as a user would.
	agent := testenv.StartNumberAgent(t)
	hook := testenv.StartNumberWebhook(t)
	p := setUpThroughAPI(t, cp.URL, "scale-out",
		map[string]any{"agent_endpoint_url": agent.URL, "batch_size": 10},
		map[string]any{"kind": "webhook", "url": hook.URL})
	projectID, key := p.ID, p.Key
	for _, r := range receivers {
		if !waitKeyAccepted(t, r.HTTP, key) {
			logKeyWatch(t, js, key)
			t.FailNow()
		}
	}
	agent.SetReceivers(key, receivers[0].HTTP, receivers[1].HTTP)

	// A call the agent refuses for good is dead-lettered, and dead letters are replicated
	// like everything else (configs/pipeline.yaml, sink.yaml).
	r := post(t, receivers[0].HTTP+"/v1/events", key, "application/json", []byte(`{"n":`+strconv.Itoa(testenv.Poison)+`}`), nil)
	require.Equal(t, http.StatusAccepted, r.StatusCode, "%s", r.Body)
	require.Eventually(t, func() bool {
		_, err := js.Stream(context.Background(), streams.DeadLetterStream(projectID))
		return err == nil
	}, 60*time.Second, 100*time.Millisecond, "the refused call was never dead-lettered")
	testenv.RequireReplicas(t, js, streams.DeadLetterStream(projectID), 3)

	load := testenv.RunNumberedLoad(key, func(n int) string { return receivers[n%len(receivers)].HTTP }, clusterRate, clusterDuration)

	// The crashes, one after the other while the load runs: from when it flows end to
	// end (results of the load at the webhook).
	require.Eventually(t, func() bool { seen, _ := hook.Snapshot(); return len(seen) > 0 }, 30*time.Second, 50*time.Millisecond,
		"the load never reached the webhook")
	testenv.RequireReplicas(t, js, streams.RawStream(projectID), 3)
	leader := testenv.StreamLeader(t, js, streams.RawStream(projectID))
	node := cl.Node(leader)
	require.NotNil(t, node, "stream leader %q is not one of the cluster's nodes", leader)
	t.Logf("kill -9 NATS node %s, the raw stream's leader", node)
	load.SetPhase("1 nats node down")
	killed := time.Now()
	node.Kill()
	// Down long enough for the other two to elect new leaders (nats-server's raft election
	// timeout is 4-9 s): ingest must resume while the node is still gone.
	for {
		if l := testenv.StreamLeader(t, js, streams.RawStream(projectID)); l != node.Name {
			t.Logf("raw stream leader %s elected %s after the kill", l, time.Since(killed).Round(100*time.Millisecond))
			break
		}
		require.Less(t, time.Since(killed), 30*time.Second, "no new raw stream leader while %s is down", node.Name)
		time.Sleep(200 * time.Millisecond)
	}
	load.SetPhase("1b nats node down, new leader")
	time.Sleep(time.Until(killed.Add(15 * time.Second)))
	node.Start()
	load.SetPhase("2 nats node catching up")
	node.WaitHealthy(60 * time.Second)
	t.Logf("NATS node %s back and current; raw stream leader now %s", node.Name, testenv.StreamLeader(t, js, streams.RawStream(projectID)))
	for _, role := range []struct {
		name string
		c    *testenv.Collector
	}{{"3 receiver", receivers[0]}, {"4 pipeline", pipelines[0]}, {"5 sink", sinks[0]}} {
		load.SetPhase("steady")
		time.Sleep(2 * time.Second)
		t.Logf("kill -9 one %s process", role.name[2:])
		load.SetPhase(role.name + " down")
		role.c.Kill()
		time.Sleep(3 * time.Second)
		role.c.Start()
		load.SetPhase(role.name + " restarted")
	}
	res := load.Wait()
	sent, acked, answers, slowest := res.Sent, res.Acked, res.Answers, res.Slowest
	t.Logf("load done: %d events sent, %d answered 2xx", sent, len(acked))
	for _, k := range slices.Sorted(maps.Keys(answers)) {
		t.Logf("  %-40s %5d", k, answers[k])
	}
	for _, k := range slices.Sorted(maps.Keys(slowest)) {
		t.Logf("  slowest answer, %-24s %s", k, slowest[k].Round(time.Millisecond))
	}
	drainStart := time.Now()
	require.Greater(t, len(acked), sent/2, "most events must be accepted while the cluster has a quorum")
	require.Empty(t, load.BadAnswers(), "a refused event is answered 503 unavailable with Retry-After")
	testenv.RequireReplicas(t, js, streams.OutputStream(projectID), 3)
	for _, b := range []string{mirror.BucketKeys, mirror.BucketProjects, mirror.BucketSettings} {
		testenv.RequireReplicas(t, js, "KV_"+b, 3)
	}

	// Every acked event reaches the agent, every result the agent handed in reaches the
	// webhook. Pipeline work held by the killed process comes back after its ack_wait.
	var lostAgent, lostHook []int
	var lostResults []string
	deadline, lastReport := time.Now().Add(clusterDrain), time.Now()
	for {
		agentSeen, results := agent.Snapshot()
		hookSeen, hookResults := hook.Snapshot()
		lostAgent, lostHook, lostResults = testenv.Missing(acked, agentSeen), testenv.Missing(acked, hookSeen), nil
		for id := range results {
			if hookResults[id] == 0 {
				lostResults = append(lostResults, id)
			}
		}
		if len(lostAgent)+len(lostHook)+len(lostResults) == 0 || time.Now().After(deadline) {
			break
		}
		if time.Since(lastReport) >= 5*time.Second {
			lastReport = time.Now()
			t.Logf("  %s after the load: %d acked events not yet at the agent (%v), %d not yet at the webhook (of 0..%d)",
				time.Since(drainStart).Round(time.Second), len(lostAgent), head(lostAgent), len(lostHook), sent-1)
		}
		time.Sleep(500 * time.Millisecond)
	}
	agentSeen, results := agent.Snapshot()
	hookSeen, hookResults := hook.Snapshot()
	dupAgent, dupHook, dupResults := duplicates(agentSeen), duplicates(hookSeen), duplicates(hookResults)
	t.Logf("delivery settled %s after the load", time.Since(drainStart).Round(100*time.Millisecond))
	t.Logf("agent: %d calls answered 2xx, %d distinct events, %d delivered again; webhook: %d results (%d distinct), %d events delivered again",
		agent.Calls(), len(agentSeen), dupAgent, sum(hookResults), len(hookResults), dupHook)
	require.Empty(t, lostAgent, "%d acked events never reached the agent (first: %v)", len(lostAgent), head(lostAgent))
	require.Empty(t, lostHook, "%d acked events never reached the webhook (first: %v)", len(lostHook), head(lostHook))
	require.Empty(t, lostResults, "%d results accepted by a receiver never reached the webhook", len(lostResults))
	require.Positive(t, len(results))
	t.Logf("cluster scale-out: %d events acked, lost 0; duplicates: agent %d events, webhook %d events (%d results)",
		len(acked), dupAgent, dupHook, dupResults)

	// The ledger adds up after the kills, each record counted once although the killed
	// pipeline's batches were delivered again: received = dropped + sent + dead-lettered +
	// pending, with pending 0 once drained.
	var ledger struct {
		Received, Dropped, AgentCalls, DeadLettered, Pending int64
		Balanced                                             bool
	}
	require.Eventually(t, func() bool {
		r := get(t, receivers[1].HTTP+"/console/v1/projects/"+projectID+"/ledger", map[string]string{"X-API-Key": key})
		require.Equal(t, http.StatusOK, r.StatusCode, "%s", r.Body)
		var raw struct {
			Received     int64 `json:"received"`
			Dropped      int64 `json:"dropped"`
			AgentCalls   int64 `json:"agent_calls"`
			DeadLettered int64 `json:"dead_lettered"`
			Pending      int64 `json:"pending"`
			Balanced     bool  `json:"balanced"`
		}
		require.NoError(t, json.Unmarshal(r.Body, &raw))
		ledger.Received, ledger.Dropped, ledger.AgentCalls, ledger.DeadLettered, ledger.Pending, ledger.Balanced =
			raw.Received, raw.Dropped, raw.AgentCalls, raw.DeadLettered, raw.Pending, raw.Balanced
		return raw.Balanced && raw.Pending == 0
	}, 60*time.Second, 200*time.Millisecond, "the ledger never balanced after the load: %+v", &ledger)
	t.Logf("ledger after the kills: %+v", ledger)
	require.GreaterOrEqual(t, ledger.Received, int64(len(acked)+1), "every acked event and the poison one received")
	require.Equal(t, int64(1), ledger.DeadLettered, "the poison event, once")
	require.Equal(t, ledger.Received-1, ledger.AgentCalls+ledger.Dropped, "every other record sent (no trigger drops none)")
	require.Zero(t, ledger.Dropped)
}

// waitKeyAccepted is waitAccepted that says what the receiver last answered.
func waitKeyAccepted(t *testing.T, base, key string) bool {
	t.Helper()
	var last string
	client := &http.Client{Timeout: 5 * time.Second}
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		req, _ := http.NewRequest(http.MethodPost, base+"/v1/logs", bytes.NewReader([]byte(`{}`)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-API-Key", key)
		resp, err := client.Do(req)
		if err != nil {
			last = err.Error()
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return true
		}
		last = fmt.Sprintf("%d %s", resp.StatusCode, body)
	}
	t.Errorf("receiver %s never accepted the project key; last answer: %s", base, last)
	return false
}

// logKeyWatch shows whether the key is in the mirror and how the watchers of its bucket
// stand, to tell a missing entry from a watcher that does not deliver it.
func logKeyWatch(t *testing.T, js jetstream.JetStream, key string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kv, err := js.KeyValue(ctx, mirror.BucketKeys)
	if err != nil {
		t.Logf("bucket %s: %v", mirror.BucketKeys, err)
		return
	}
	e, err := kv.Get(ctx, apikey.Hash(key))
	if err != nil {
		t.Logf("key entry: %v", err)
	} else {
		t.Logf("key entry: revision %d, created %s: %s", e.Revision(), e.Created(), e.Value())
	}
	s, err := js.Stream(ctx, "KV_"+mirror.BucketKeys)
	if err != nil {
		t.Logf("stream: %v", err)
		return
	}
	info, _ := s.Info(ctx)
	if info != nil {
		t.Logf("stream state %+v cluster %+v", info.State, info.Cluster)
		if info.Cluster != nil {
			for _, r := range info.Cluster.Replicas {
				t.Logf("  replica %+v", *r)
			}
		}
	}
	for ci := range s.ListConsumers(ctx).Info() {
		t.Logf("consumer %s: delivered %+v ack floor %+v pending %d cluster %+v config deliver=%v filter=%q",
			ci.Name, ci.Delivered, ci.AckFloor, ci.NumPending, ci.Cluster, ci.Config.DeliverPolicy, ci.Config.FilterSubject)
	}
}

func sum[K comparable](m map[K]int) int {
	s := 0
	for _, c := range m {
		s += c
	}
	return s
}
