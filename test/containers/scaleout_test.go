package containers

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/streams"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

const (
	scaleOutRate  = 50              // events per second, alternating between the receivers
	scaleOutDrain = 3 * time.Minute // how long delivery may take after the load
)

// deploy/compose/scale-out.yaml, the layout of docs/deployment.md in containers: every
// event a receiver answered 2xx reaches the agent and every result the agent handed in
// reaches the webhook, although the raw stream leader's NATS node and one receiver,
// pipeline, sink and control plane container are killed (SIGKILL) and started again under load. The
// processes' version of this is test/e2e/cluster_e2e_test.go.
func TestComposeScaleOutSurvivesKill(t *testing.T) {
	images(t)
	t.Parallel()
	port := func() string { return strconv.Itoa(testenv.FreePort(t)) }
	env := map[string]string{
		"LISTEN_HOST":        "127.0.0.1",
		"NATS_IMAGE":         natsImage,
		"DATABASE_URL":       testenv.PostgresURL(t),
		"REDIS_URL":          "redis://127.0.0.1:6379/9",
		"SVC_OUTBOUND_ALLOW": "127.0.0.0/8",
		"SVC_JWT_SECRET":     secret(),
		// The file's stores ask for credentials: NATS is the file's own; PostgreSQL's is
		// the machine's (in DATABASE_URL), but compose requires the variable anyway.
		"NATS_PASSWORD":     secret(),
		"POSTGRES_PASSWORD": "unused-the-machines-postgresql",
		// The killed pipeline's records come back after this rather than the default
		// minute: what the test waits for after the load.
		"SVC_PIPELINE_ACK_WAIT": "10s",
	}
	for _, v := range []string{"NATS1_PORT", "NATS2_PORT", "NATS3_PORT", "NATS1_CLUSTER_PORT", "NATS2_CLUSTER_PORT", "NATS3_CLUSTER_PORT",
		"NATS1_MONITOR_PORT", "NATS2_MONITOR_PORT", "NATS3_MONITOR_PORT", "CONTROLPLANE_PORT"} {
		env[v] = port()
	}
	health := map[string]string{}
	for _, s := range []string{"RECEIVER1", "RECEIVER2", "PIPELINE1", "PIPELINE2", "SINK1", "SINK2"} {
		env[s+"_HEALTH_PORT"], env[s+"_METRICS_PORT"] = port(), port()
		health[s] = "http://127.0.0.1:" + env[s+"_HEALTH_PORT"] + "/"
	}
	for _, s := range []string{"RECEIVER1", "RECEIVER2"} {
		env[s+"_HTTP_PORT"], env[s+"_GRPC_PORT"] = port(), port()
	}
	receivers := []string{"http://127.0.0.1:" + env["RECEIVER1_HTTP_PORT"], "http://127.0.0.1:" + env["RECEIVER2_HTTP_PORT"]}
	cp := "http://127.0.0.1:" + env["CONTROLPLANE_PORT"]
	natsURL := fmt.Sprintf("nats://otelcol-svc:%[4]s@127.0.0.1:%[1]s,nats://otelcol-svc:%[4]s@127.0.0.1:%[2]s,nats://otelcol-svc:%[4]s@127.0.0.1:%[3]s",
		env["NATS1_PORT"], env["NATS2_PORT"], env["NATS3_PORT"], env["NATS_PASSWORD"])

	// The machine's PostgreSQL and Redis stand in for the file's own: every service
	// but those two.
	began := time.Now()
	c := composeUp(t, "scale-out.yaml", env, "nats1", "nats2", "nats3", "receiver1", "receiver2", "pipeline1", "pipeline2", "sink1", "sink2", "controlplane")
	waitOK(t, 2*time.Minute, cp+"/readyz")
	waitOK(t, 30*time.Second, slices.Collect(maps.Values(health))...)
	t.Logf("scale-out ready %s after docker-compose up", time.Since(began).Round(100*time.Millisecond))
	// NATS refuses a client without the file's credentials.
	_, err := nats.Connect(fmt.Sprintf("nats://127.0.0.1:%s", env["NATS1_PORT"]), nats.Timeout(5*time.Second))
	require.ErrorIs(t, err, nats.ErrAuthorization, "NATS without credentials")
	_, js := testenv.Connect(t, natsURL)

	agent := testenv.StartNumberAgent(t)
	hook := testenv.StartNumberWebhook(t)
	p := setUp(t, cp, map[string]any{"agent_endpoint_url": agent.URL, "batch_size": 10}, map[string]any{"kind": "webhook", "url": hook.URL})
	for _, r := range receivers {
		waitKeyAccepted(t, r, p.Key)
	}
	agent.SetReceivers(p.Key, receivers...)
	load := testenv.RunNumberedLoad(p.Key, func(n int) string { return receivers[n%len(receivers)] }, scaleOutRate, 0)

	require.Eventually(t, func() bool { seen, _ := hook.Snapshot(); return len(seen) > 0 }, 60*time.Second, 50*time.Millisecond,
		"the load never reached the webhook")
	raw := streams.RawStream(p.ID)
	testenv.RequireReplicas(t, js, raw, 3)
	leader := testenv.StreamLeader(t, js, raw)
	node := map[string]string{"n1": "nats1", "n2": "nats2", "n3": "nats3"}[leader]
	require.NotEmpty(t, node, "stream leader %q is not one of the cluster's nodes", leader)
	t.Logf("docker kill %s, the raw stream's leader", node)
	load.SetPhase("nats node down")
	id := c.container(node)
	killed := time.Now()
	docker(t, "kill", id)
	// Ingest must resume on the other two before the node comes back.
	require.Eventually(t, func() bool { l := testenv.LeaderOf(js, raw); return l != "" && l != leader }, 30*time.Second, 200*time.Millisecond,
		"no new raw stream leader while %s is down", node)
	t.Logf("new raw stream leader %s after %s", testenv.StreamLeader(t, js, raw), time.Since(killed).Round(100*time.Millisecond))
	docker(t, "start", id)
	load.SetPhase("nats node catching up")
	waitOK(t, 60*time.Second, "http://127.0.0.1:"+env[map[string]string{"nats1": "NATS1", "nats2": "NATS2", "nats3": "NATS3"}[node]+"_MONITOR_PORT"]+"/healthz")
	health["CONTROLPLANE"] = cp + "/readyz"
	for _, s := range []string{"receiver1", "pipeline1", "sink1", "controlplane"} {
		load.SetPhase("steady")
		load.WaitAcked(t, 50)
		t.Logf("docker kill %s", s)
		load.SetPhase(s + " killed")
		c.killAndStart(s)
		waitOK(t, 60*time.Second, health[map[string]string{"receiver1": "RECEIVER1", "pipeline1": "PIPELINE1", "sink1": "SINK1", "controlplane": "CONTROLPLANE"}[s]])
		load.SetPhase(s + " restarted")
	}
	// The restarted control plane has the account, its session and the project (on
	// PostgreSQL), and takes a change.
	got := api(t, "GET", cp+"/api/v1/projects/"+p.ID, p.Token, nil, http.StatusOK)
	require.Equal(t, p.ID, got["id"])
	api(t, "POST", cp+"/api/v1/projects/"+p.ID+"/keys", p.Token, map[string]string{"name": "after restart"}, http.StatusCreated)
	load.WaitAcked(t, 50)
	res := load.Stop()
	sent, acked, answers := res.Sent, res.Acked, res.Answers
	t.Logf("load done: %d events sent, %d answered 2xx", sent, len(acked))
	for _, k := range slices.Sorted(maps.Keys(answers)) {
		t.Logf("  %-40s %5d", k, answers[k])
	}
	require.Greater(t, len(acked), sent/2, "most events must be accepted while the cluster has a quorum")
	require.Empty(t, load.BadAnswers(), "a refused event is answered 503 unavailable with Retry-After")

	var lostAgent, lostHook []int
	var lostResults []string
	drain := time.Now()
	for {
		agentSeen, results := agent.Snapshot()
		hookSeen, hookResults := hook.Snapshot()
		lostAgent, lostHook, lostResults = testenv.Missing(acked, agentSeen), testenv.Missing(acked, hookSeen), nil
		for id := range results {
			if hookResults[id] == 0 {
				lostResults = append(lostResults, id)
			}
		}
		if len(lostAgent)+len(lostHook)+len(lostResults) == 0 || time.Since(drain) > scaleOutDrain {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("delivery settled %s after the load", time.Since(drain).Round(100*time.Millisecond))
	require.Empty(t, lostAgent, "%d acked events never reached the agent", len(lostAgent))
	require.Empty(t, lostHook, "%d acked events never reached the webhook", len(lostHook))
	require.Empty(t, lostResults, "%d results accepted by a receiver never reached the webhook", len(lostResults))
}
