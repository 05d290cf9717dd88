package containers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
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

	agent := startNumberAgent(t)
	hook := startNumberWebhook(t)
	p := setUp(t, cp, map[string]any{"agent_endpoint_url": agent.URL, "batch_size": 10}, map[string]any{"kind": "webhook", "url": hook.URL})
	for _, r := range receivers {
		waitKeyAccepted(t, r, p.Key)
	}
	agent.setReceivers(p.Key, receivers...)
	load := runNumberedLoad(p.Key, receivers, scaleOutRate)

	require.Eventually(t, func() bool { seen, _ := hook.snapshot(); return len(seen) > 0 }, 60*time.Second, 50*time.Millisecond,
		"the load never reached the webhook")
	raw := streams.RawStream(p.ID)
	requireReplicas(t, js, raw, 3)
	leader := streamLeader(t, js, raw)
	node := map[string]string{"n1": "nats1", "n2": "nats2", "n3": "nats3"}[leader]
	require.NotEmpty(t, node, "stream leader %q is not one of the cluster's nodes", leader)
	t.Logf("docker kill %s, the raw stream's leader", node)
	load.setPhase("nats node down")
	id := c.container(node)
	killed := time.Now()
	docker(t, "kill", id)
	// Ingest must resume on the other two before the node comes back.
	require.Eventually(t, func() bool { l := leaderOf(js, raw); return l != "" && l != leader }, 30*time.Second, 200*time.Millisecond,
		"no new raw stream leader while %s is down", node)
	t.Logf("new raw stream leader %s after %s", streamLeader(t, js, raw), time.Since(killed).Round(100*time.Millisecond))
	docker(t, "start", id)
	load.setPhase("nats node catching up")
	waitOK(t, 60*time.Second, "http://127.0.0.1:"+env[map[string]string{"nats1": "NATS1", "nats2": "NATS2", "nats3": "NATS3"}[node]+"_MONITOR_PORT"]+"/healthz")
	health["CONTROLPLANE"] = cp + "/readyz"
	for _, s := range []string{"receiver1", "pipeline1", "sink1", "controlplane"} {
		load.setPhase("steady")
		load.waitAcked(t, 50)
		t.Logf("docker kill %s", s)
		load.setPhase(s + " killed")
		c.killAndStart(s)
		waitOK(t, 60*time.Second, health[map[string]string{"receiver1": "RECEIVER1", "pipeline1": "PIPELINE1", "sink1": "SINK1", "controlplane": "CONTROLPLANE"}[s]])
		load.setPhase(s + " restarted")
	}
	// The restarted control plane has the account, its session and the project (on
	// PostgreSQL), and takes a change.
	got := api(t, "GET", cp+"/api/v1/projects/"+p.ID, p.Token, nil, http.StatusOK)
	require.Equal(t, p.ID, got["id"])
	api(t, "POST", cp+"/api/v1/projects/"+p.ID+"/keys", p.Token, map[string]string{"name": "after restart"}, http.StatusCreated)
	load.waitAcked(t, 50)
	sent, acked, answers := load.stop()
	t.Logf("load done: %d events sent, %d answered 2xx", sent, len(acked))
	for _, k := range slices.Sorted(maps.Keys(answers)) {
		t.Logf("  %-40s %5d", k, answers[k])
	}
	require.Greater(t, len(acked), sent/2, "most events must be accepted while the cluster has a quorum")
	require.Empty(t, load.badAnswers(), "a refused event is answered 503 unavailable with Retry-After")

	var lostAgent, lostHook []int
	var lostResults []string
	drain := time.Now()
	for {
		agentSeen, results := agent.snapshot()
		hookSeen, hookResults := hook.snapshot()
		lostAgent, lostHook, lostResults = missing(acked, agentSeen), missing(acked, hookSeen), nil
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

// numberAgent is the customer's agent: it notes the number of each record it is called
// with and, before answering 2xx, hands a result carrying those numbers to a receiver.
// When no receiver takes the result it answers 503, so the pipeline calls again.
type numberAgent struct {
	*httptest.Server
	mu        sync.Mutex
	key       string
	receivers []string
	next      int
	seen      map[int]int
	results   map[string]int
}

func startNumberAgent(t *testing.T) *numberAgent {
	a := &numberAgent{seen: map[int]int{}, results: map[string]int{}}
	client := &http.Client{Timeout: 3 * time.Second}
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var recs []struct {
			N int `json:"n"`
		}
		body, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(body, &recs); err != nil {
			t.Errorf("agent body is not a JSON array of records: %v: %s", err, body)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		ns := make([]int, 0, len(recs))
		for _, rec := range recs {
			ns = append(ns, rec.N)
		}
		id := r.Header.Get("X-Request-Id")
		result, _ := json.Marshal(map[string]any{"request_id": id, "payload": map[string]any{"ns": ns}})
		// Within the pipeline's call timeout: try the receivers in turn for ~7 s.
		for end := time.Now().Add(7 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
			a.mu.Lock()
			to, key := a.receivers[a.next%len(a.receivers)], a.key
			a.next++
			a.mu.Unlock()
			req, _ := http.NewRequest(http.MethodPost, to+"/internal/agent-output", bytes.NewReader(result))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-API-Key", key)
			req.Header.Set("X-Request-Id", id)
			resp, err := client.Do(req)
			if err != nil {
				continue
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusAccepted {
				a.mu.Lock()
				for _, n := range ns {
					a.seen[n]++
				}
				a.results[id] = len(ns)
				a.mu.Unlock()
				_, _ = w.Write([]byte(`{"status":"accepted"}`))
				return
			}
		}
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(a.Close)
	return a
}

func (a *numberAgent) setReceivers(key string, urls ...string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.key, a.receivers = key, urls
}

func (a *numberAgent) snapshot() (map[int]int, map[string]int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return maps.Clone(a.seen), maps.Clone(a.results)
}

// numberWebhook is the customer's webhook: the numbers in each result, and the request
// id of the agent call each result answers.
type numberWebhook struct {
	*httptest.Server
	mu      sync.Mutex
	seen    map[int]int
	results map[string]int
}

func startNumberWebhook(t *testing.T) *numberWebhook {
	h := &numberWebhook{seen: map[int]int{}, results: map[string]int{}}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p struct{ Ns []int }
		body, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(body, &p); err != nil {
			t.Errorf("webhook body is not the agent's result: %v: %s", err, body)
		}
		h.mu.Lock()
		for _, n := range p.Ns {
			h.seen[n]++
		}
		h.results[r.Header.Get("X-Request-Id")]++
		h.mu.Unlock()
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *numberWebhook) snapshot() (map[int]int, map[string]int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return maps.Clone(h.seen), maps.Clone(h.results)
}

// numberedLoad sends {"n": <i>} over /v1/events at a steady pace, alternating between the
// receivers, until stopped, and remembers which numbers were answered 2xx.
type numberedLoad struct {
	mu      sync.Mutex
	sent    int
	acked   map[int]bool
	phase   string
	answers map[string]int // "<phase>: <status, or the error>" → count
	bad     []string       // refusals not in the contract's shape
	stopped chan struct{}
	done    chan struct{}
}

func runNumberedLoad(key string, receivers []string, perSecond int) *numberedLoad {
	l := &numberedLoad{phase: "steady", acked: map[int]bool{}, answers: map[string]int{}, stopped: make(chan struct{}), done: make(chan struct{})}
	client := &http.Client{Timeout: 20 * time.Second}
	go func() {
		defer close(l.done)
		var wg sync.WaitGroup
		defer wg.Wait()
		sem := make(chan struct{}, 64)
		tick := time.NewTicker(time.Second / time.Duration(perSecond))
		defer tick.Stop()
		for n := 0; ; n++ {
			select {
			case <-l.stopped:
				return
			case <-tick.C:
			}
			sem <- struct{}{}
			wg.Add(1)
			url := receivers[n%len(receivers)] + "/v1/events"
			l.mu.Lock()
			l.sent++
			phase := l.phase
			l.mu.Unlock()
			go func() {
				defer func() { <-sem; wg.Done() }()
				req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader([]byte(`{"n":`+strconv.Itoa(n)+`}`)))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("X-API-Key", key)
				resp, err := client.Do(req)
				l.mu.Lock()
				defer l.mu.Unlock()
				if err != nil {
					var ne net.Error
					switch {
					case errors.As(err, &ne) && ne.Timeout():
						l.answers[phase+": client timeout"]++
					case errors.Is(err, syscall.ECONNREFUSED):
						l.answers[phase+": connection refused"]++
					default:
						l.answers[phase+": connection lost"]++
					}
					return
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				l.answers[phase+": "+strconv.Itoa(resp.StatusCode)]++
				if resp.StatusCode/100 == 2 {
					l.acked[n] = true
					return
				}
				var e struct {
					Error struct{ Code, Message string }
				}
				_ = json.Unmarshal(body, &e)
				if resp.StatusCode != http.StatusServiceUnavailable || e.Error.Code != "unavailable" || e.Error.Message == "" || resp.Header.Get("Retry-After") == "" {
					l.bad = append(l.bad, fmt.Sprintf("event %d: %d %s (Retry-After %q)", n, resp.StatusCode, body, resp.Header.Get("Retry-After")))
				}
			}()
		}
	}()
	return l
}

// waitAcked waits until n more events have been answered 2xx: the cluster is taking load
// again before the next crash.
func (l *numberedLoad) waitAcked(t *testing.T, n int) {
	t.Helper()
	l.mu.Lock()
	want := len(l.acked) + n
	l.mu.Unlock()
	require.Eventually(t, func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return len(l.acked) >= want
	}, 60*time.Second, 20*time.Millisecond, "the receivers stopped accepting events")
}

func (l *numberedLoad) stop() (sent int, acked map[int]bool, answers map[string]int) {
	close(l.stopped)
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sent, maps.Clone(l.acked), maps.Clone(l.answers)
}

func (l *numberedLoad) setPhase(p string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.phase = p
}

func (l *numberedLoad) badAnswers() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.bad)
}

// streamLeader is the server name of the stream's current leader.
func streamLeader(t *testing.T, js jetstream.JetStream, name string) string {
	t.Helper()
	var leader string
	require.Eventually(t, func() bool { leader = leaderOf(js, name); return leader != "" },
		30*time.Second, 100*time.Millisecond, "stream %s has no leader", name)
	return leader
}

// leaderOf is the stream's leader, "" while it has none or NATS does not answer.
func leaderOf(js jetstream.JetStream, name string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, name)
	if err != nil {
		return ""
	}
	info, err := s.Info(ctx)
	if err != nil || info.Cluster == nil {
		return ""
	}
	return info.Cluster.Leader
}

func requireReplicas(t *testing.T, js jetstream.JetStream, name string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, name)
	require.NoError(t, err, "stream %s", name)
	require.Equal(t, n, s.CachedInfo().Config.Replicas, "replicas of stream %s", name)
}

func missing(want map[int]bool, have map[int]int) []int {
	var out []int
	for n := range want {
		if have[n] == 0 {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}
