package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/apikey"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/webhooksig"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// outage is how long NATS is away: 10 s, longer than the health check's
// recovery_duration (5 s), so every role has reported unhealthy before NATS returns.
const outage = 10 * time.Second

// After a NATS outage every role (receiver, pipeline, sink) answers
// 200 on its health port again within 10 s of NATS's return, and nothing accepted under
// load before, during or after it is lost. Before the fix the JetStream receiver replaced
// the connection's reconnect handler, so the pipeline and sink roles answered 500 for good.
func TestEveryRoleHealthyAgainAfterNATSOutage(t *testing.T) {
	nt := testenv.StartNATS(t)
	_, m := connectMirror(t, nt.URL())
	agent, hook := startAgent(t), startAgent(t)
	vars := map[string]string{"NATS_URL": nt.URL(), "SVC_OUTBOUND_ALLOW": "127.0.0.0/8", "SVC_STREAM_REPLICAS": "1",
		// Its results come under made-up request ids, hundreds of them: past the hourly
		// allowance for those (100) they would be refused.
		"SVC_UNMATCHED_RESULTS_PER_HOUR": "0"}
	recv := testenv.StartCollector(t, testenv.CollectorOptions{Config: "configs/receiver.yaml", Env: vars})
	key := fullProject(t, m, recv.HTTP, "blip", mirror.Pipeline{AgentEndpointURL: agent.URL, BatchSize: 50},
		mirror.Sink{ID: "s_hook", Kind: "webhook", URL: hook.URL})
	pipe := testenv.StartCollector(t, testenv.CollectorOptions{Config: "configs/pipeline.yaml", Env: vars})
	sink := testenv.StartCollector(t, testenv.CollectorOptions{Config: "configs/sink.yaml", Env: vars})
	roles := map[string]*testenv.Collector{"receiver": recv, "pipeline": pipe, "sink": sink}

	// Load: events for the agent and results for the webhook, each remembered once the
	// receiver answered 202 (what it refuses during the outage is the client's to resend).
	var mu sync.Mutex
	events, results := map[string]bool{}, map[string]bool{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var stopOnce sync.Once
	stopLoad := func() { stopOnce.Do(func() { close(stop) }); wg.Wait() }
	defer stopLoad()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			ev := fmt.Sprintf(`{"id":%d}`, i)
			if postOK(recv.HTTP+"/v1/events", key, ev) {
				mu.Lock()
				events[ev] = true
				mu.Unlock()
			}
			id := fmt.Sprintf("req_blip_%05d", i)
			if postOK(recv.HTTP+"/internal/agent-output", key, fmt.Sprintf(`{"request_id": %q, "payload": {"text": "r %d"}}`, id, i)) {
				mu.Lock()
				results[id] = true
				mu.Unlock()
			}
		}
	}()
	require.Eventually(t, func() bool { return len(hook.delivered()) > 20 && len(agent.delivered()) > 2 }, 30*time.Second, 20*time.Millisecond,
		"the load flows before the outage")
	for name, c := range roles {
		require.Equal(t, http.StatusOK, healthStatus(t, c), "%s healthy before the outage", name)
	}

	nt.Stop()
	down := time.Now()
	// Each role says what it waits for while NATS is away (the health check shows it).
	for name, c := range roles {
		require.Eventually(t, func() bool { return healthStatus(t, c) >= 500 }, outage, 100*time.Millisecond,
			"%s stayed healthy without NATS", name)
		assert.Contains(t, healthBody(t, c), "waiting for NATS", "%s names what it waits for", name)
	}
	time.Sleep(time.Until(down.Add(outage))) // the outage itself, not a wait for an outcome
	nt.Start(t)
	back := time.Now()

	deadline := back.Add(10 * time.Second)
	for {
		var sick []string
		for name, c := range roles {
			if s := healthStatus(t, c); s != http.StatusOK {
				sick = append(sick, fmt.Sprintf("%s %d: %s", name, s, healthBody(t, c)))
			}
		}
		if len(sick) == 0 {
			t.Logf("every role healthy %s after NATS came back", time.Since(back).Round(10*time.Millisecond))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not healthy within 10 s of NATS's return:\n%s", strings.Join(sick, "\n"))
		}
		time.Sleep(100 * time.Millisecond)
	}

	// The load goes on a moment after the return, then nothing accepted may be missing.
	mu.Lock()
	before := len(results)
	mu.Unlock()
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(results) > before+20 }, 20*time.Second, 20*time.Millisecond,
		"results are accepted again after the outage")
	stopLoad()

	mu.Lock()
	defer mu.Unlock()
	missing := func() (ev, res int) {
		got := map[string]bool{}
		for _, b := range batchRecords(t, agent.delivered()) {
			for _, r := range b {
				var rec map[string]any
				require.NoError(t, json.Unmarshal(r, &rec))
				got[fmt.Sprintf(`{"id":%v}`, rec["id"])] = true
			}
		}
		for e := range events {
			if !got[e] {
				ev++
			}
		}
		delivered := byRequest(hook.delivered())
		for id := range results {
			if delivered[id] == 0 {
				res++
			}
		}
		return ev, res
	}
	require.Eventually(t, func() bool { ev, res := missing(); return ev == 0 && res == 0 }, 60*time.Second, 100*time.Millisecond,
		"accepted records or results were lost (missing events, results): %v", fmt.Sprint(missing()))
	t.Logf("%d events and %d results accepted, all delivered", len(events), len(results))
}

// fullProject publishes a project with a pipeline calling an agent and destinations, and
// returns a key the receiver at base accepts.
func fullProject(t *testing.T, m *mirror.Store, base, id string, p mirror.Pipeline, sinks ...mirror.Sink) string {
	t.Helper()
	since := time.Now().UTC()
	for i := range sinks {
		sinks[i].Enabled, sinks[i].Since = true, since
	}
	require.NoError(t, m.PutProject(context.Background(), mirror.Project{ID: id, Version: 1, Pipeline: p,
		SigningSecret: webhooksig.NewSecret(), Sinks: sinks}))
	key := apikey.Generate(apikey.KindProject)
	require.NoError(t, m.PutKey(context.Background(), apikey.Hash(key), mirror.KeyEntry{KeyID: "k-" + id, ProjectID: id, Scope: mirror.ScopeProject}))
	waitAccepted(t, base, key)
	return key
}

// postOK posts a JSON body with the key and reports whether it was accepted (202).
func postOK(url, key, body string) bool {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return false
	}
	req.Header.Set("X-API-Key", key)
	req.Header.Set("Content-Type", "application/json")
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusAccepted
}
