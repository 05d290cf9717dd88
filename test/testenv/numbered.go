package testenv

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

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// The numbered load and its customer-side stand-ins prove that nothing is lost while
// processes or containers are killed: every event is {"n": <i>}, and the agent and the
// webhook note each number they are handed. The process cluster test
// (test/e2e/cluster_e2e_test.go) and the compose one (test/containers) share them.

// Poison is a number the NumberAgent refuses for good (400): its call is dead-lettered.
const Poison = -1

// NumberAgent is the customer's agent in legacy batch mode: it notes the number of each
// record it is called with and, before answering 2xx, hands a result carrying those
// numbers to a receiver, as an agent built on the SDK does. When no receiver takes the
// result it answers 503, so the pipeline calls again.
type NumberAgent struct {
	*httptest.Server
	mu        sync.Mutex
	key       string
	receivers []string
	next      int
	seen      map[int]int    // number → times in a call answered 2xx
	results   map[string]int // request id → numbers in the result a receiver accepted
	answered  int
}

// StartNumberAgent starts the agent; SetReceivers says where it hands its results.
func StartNumberAgent(t *testing.T) *NumberAgent {
	t.Helper()
	a := &NumberAgent{seen: map[int]int{}, results: map[string]int{}}
	client := &http.Client{Timeout: 3 * time.Second}
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var recs []struct {
			N *int `json:"n"`
		}
		body, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(body, &recs); err != nil {
			t.Errorf("agent body is not a JSON array of records: %v: %s", err, body)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		var ns []int
		for _, rec := range recs {
			if rec.N == nil {
				t.Errorf("record without its number: %s", body)
				continue
			}
			ns = append(ns, *rec.N)
		}
		if slices.Contains(ns, Poison) {
			w.WriteHeader(http.StatusBadRequest) // final: the call is dead-lettered
			return
		}
		id := r.Header.Get("X-Request-Id")
		result, _ := json.Marshal(map[string]any{"request_id": id, "payload": map[string]any{"ns": ns}})
		// Within the pipeline's 10 s call timeout: try the receivers in turn for ~7 s.
		for end := time.Now().Add(7 * time.Second); time.Now().Before(end); {
			a.mu.Lock()
			to, key := a.receivers[a.next%len(a.receivers)], a.key
			a.next++
			a.mu.Unlock()
			req, _ := http.NewRequest(http.MethodPost, to+"/internal/agent-output", bytes.NewReader(result))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-API-Key", key)
			req.Header.Set("X-Request-Id", id)
			resp, err := client.Do(req)
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusAccepted {
					a.mu.Lock()
					for _, n := range ns {
						a.seen[n]++
					}
					a.results[id] = len(ns)
					a.answered++
					a.mu.Unlock()
					w.Header().Set("Content-Type", "application/json")
					_, _ = w.Write([]byte(`{"status":"accepted"}`))
					return
				}
			}
			time.Sleep(200 * time.Millisecond)
		}
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(a.Close)
	return a
}

// SetReceivers is where results go (in turn), with the project's key.
func (a *NumberAgent) SetReceivers(key string, urls ...string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.key, a.receivers = key, urls
}

// Snapshot is how often each number was in an answered call, and each result's size by
// request id.
func (a *NumberAgent) Snapshot() (map[int]int, map[string]int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return maps.Clone(a.seen), maps.Clone(a.results)
}

// Calls is how many calls were answered 2xx.
func (a *NumberAgent) Calls() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.answered
}

// NumberWebhook is the customer's webhook: it notes the numbers in each result and the
// request id of the agent call the result answers.
type NumberWebhook struct {
	*httptest.Server
	mu      sync.Mutex
	seen    map[int]int
	results map[string]int
}

// StartNumberWebhook starts the webhook.
func StartNumberWebhook(t *testing.T) *NumberWebhook {
	t.Helper()
	h := &NumberWebhook{seen: map[int]int{}, results: map[string]int{}}
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
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(h.Close)
	return h
}

// Snapshot is how often each number arrived, and each request id's results.
func (h *NumberWebhook) Snapshot() (map[int]int, map[string]int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return maps.Clone(h.seen), maps.Clone(h.results)
}

// NumberedLoad sends {"n": <i>} over /v1/events at a steady pace and remembers which
// numbers were answered 2xx, and how every answer went, by phase (what is being done to
// the deployment meanwhile).
type NumberedLoad struct {
	mu      sync.Mutex
	sent    int
	acked   map[int]bool
	phase   string
	answers map[string]int // "<phase>: <status code, or the error>" → count
	slowest map[string]time.Duration
	bad     []string // refusals not in the contract's shape
	stopped chan struct{}
	done    chan struct{}
}

// LoadResult is what a numbered load saw.
type LoadResult struct {
	Sent    int
	Acked   map[int]bool
	Answers map[string]int
	Slowest map[string]time.Duration
}

// RunNumberedLoad sends perSecond events a second, event n to receiver(n) (a base URL),
// for d (0: until Stop).
func RunNumberedLoad(key string, receiver func(n int) string, perSecond int, d time.Duration) *NumberedLoad {
	l := &NumberedLoad{phase: "steady", acked: map[int]bool{}, answers: map[string]int{}, slowest: map[string]time.Duration{},
		stopped: make(chan struct{}), done: make(chan struct{})}
	client := &http.Client{Timeout: 20 * time.Second}
	go func() {
		defer close(l.done)
		var wg sync.WaitGroup
		defer wg.Wait()
		sem := make(chan struct{}, 64) // bounds the requests waiting on a slow receiver
		tick := time.NewTicker(time.Second / time.Duration(perSecond))
		defer tick.Stop()
		end := time.Now().Add(d)
		for n := 0; d == 0 || time.Now().Before(end); n++ {
			select {
			case <-l.stopped:
				return
			case <-tick.C:
			}
			sem <- struct{}{}
			wg.Add(1)
			url := receiver(n) + "/v1/events"
			l.mu.Lock()
			l.sent++
			phase := l.phase
			l.mu.Unlock()
			go func() {
				defer func() { <-sem; wg.Done() }()
				l.send(client, url, key, n, phase)
			}()
		}
	}()
	return l
}

func (l *NumberedLoad) send(client *http.Client, url, key string, n int, phase string) {
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader([]byte(`{"n":`+strconv.Itoa(n)+`}`)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-API-Key", key)
	began := time.Now()
	resp, err := client.Do(req)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.slowest[phase] = max(l.slowest[phase], time.Since(began))
	if err != nil {
		var ne net.Error
		switch {
		case errors.As(err, &ne) && ne.Timeout():
			l.answers[phase+": client timeout"]++
		case errors.Is(err, syscall.ECONNREFUSED):
			l.answers[phase+": connection refused"]++ // the receiver is down
		default:
			l.answers[phase+": connection lost"]++ // killed while answering
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
}

// WaitAcked waits until n more events have been answered 2xx: the deployment is taking
// load again before the next crash.
func (l *NumberedLoad) WaitAcked(t *testing.T, n int) {
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

// Stop ends the load now and waits for the answers.
func (l *NumberedLoad) Stop() LoadResult {
	close(l.stopped)
	return l.Wait()
}

// Wait waits for the load to end (its duration) and for the answers.
func (l *NumberedLoad) Wait() LoadResult {
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	return LoadResult{Sent: l.sent, Acked: maps.Clone(l.acked), Answers: maps.Clone(l.answers), Slowest: maps.Clone(l.slowest)}
}

// SetPhase labels the answers to the events sent from now on.
func (l *NumberedLoad) SetPhase(p string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.phase = p
}

// BadAnswers are the refusals not in the contract's shape (503 unavailable with a
// message and Retry-After).
func (l *NumberedLoad) BadAnswers() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.bad)
}

// StreamLeader is the server name of the stream's current leader.
func StreamLeader(t *testing.T, js jetstream.JetStream, name string) string {
	t.Helper()
	var leader string
	require.Eventually(t, func() bool { leader = LeaderOf(js, name); return leader != "" },
		30*time.Second, 100*time.Millisecond, "stream %s has no leader", name)
	return leader
}

// LeaderOf is the stream's leader, "" while it has none or NATS does not answer.
func LeaderOf(js jetstream.JetStream, name string) string {
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

// RequireReplicas checks that a stream is kept on that many nodes, so losing one loses
// nothing of it.
func RequireReplicas(t *testing.T, js jetstream.JetStream, name string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, name)
	require.NoError(t, err, "stream %s", name)
	require.Equal(t, n, s.CachedInfo().Config.Replicas, "replicas of stream %s", name)
}

// Missing are the numbers of want that have has not seen, in order.
func Missing(want map[int]bool, have map[int]int) []int {
	var out []int
	for n := range want {
		if have[n] == 0 {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}
