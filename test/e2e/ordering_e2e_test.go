package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
)

// groupAgent is an agent that knows window calls by their trigger's body and answers
// each attempt as fail says; it records every attempt in order of arrival, then tells
// recorded.
type groupAgent struct {
	*httptest.Server
	mu       sync.Mutex
	attempts []groupAttempt
	fail     func(name string) bool
	recorded func(name string)
}

type groupAttempt struct {
	name string
	ok   bool
}

func startGroupAgent(t *testing.T, fail func(name string) bool, recorded func(name string)) *groupAgent {
	t.Helper()
	a := &groupAgent{fail: fail, recorded: recorded}
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var call struct {
			Trigger struct {
				Body string `json:"body"`
			} `json:"trigger"`
		}
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &call); err != nil {
			t.Errorf("not a window call: %v: %s", err, b)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		name := call.Trigger.Body
		ok := !a.fail(name)
		a.mu.Lock()
		a.attempts = append(a.attempts, groupAttempt{name: name, ok: ok})
		a.mu.Unlock()
		a.recorded(name)
		if !ok {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"status":"accepted"}`)
	}))
	t.Cleanup(a.Close)
	return a
}

func (a *groupAgent) log() []groupAttempt {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]groupAttempt(nil), a.attempts...)
}

// delivered lists the calls answered 2xx, in order of arrival.
func (a *groupAgent) delivered() []string {
	var out []string
	for _, at := range a.log() {
		if at.ok {
			out = append(out, at.name)
		}
	}
	return out
}

func (a *groupAgent) failures(name string) int {
	n := 0
	for _, at := range a.log() {
		if at.name == name && !at.ok {
			n++
		}
	}
	return n
}

// End to end: pod A's first call fails with 503 while later batches bring pod
// B's triggers and more of A's. B's calls reach the agent while A's is still retried,
// A's calls arrive in order after it, each call once, and the ledger balances.
func TestRetriedGroupDoesNotHoldUpLaterBatches(t *testing.T) {
	e := startEmbedded(t, map[string]string{"SVC_AGENT_RETRY_BUDGET": "60s"})
	var bDone sync.WaitGroup
	bDone.Add(2)
	var seen sync.Map
	bothB := make(chan struct{})
	go func() { bDone.Wait(); close(bothB) }()
	var failing sync.Mutex
	failedSince, a1Failures := time.Time{}, 0
	agent := startGroupAgent(t, func(name string) bool {
		switch name {
		case "A1":
			failing.Lock()
			defer failing.Unlock()
			if failedSince.IsZero() {
				failedSince = time.Now()
			}
			fail := a1Failures < 3
			select {
			case <-bothB:
			default:
				// Bounded: a pipeline that holds B back behind A1 fails the test on the
				// order below rather than hang until the retry budget is spent.
				fail = fail || time.Since(failedSince) < 15*time.Second
			}
			if fail {
				a1Failures++
			}
			return fail
		}
		return false
	}, func(name string) {
		if name == "B1" || name == "B2" {
			if _, dup := seen.LoadOrStore(name, true); !dup {
				bDone.Done()
			}
		}
	})
	id := fmt.Sprintf("order%d", time.Now().UnixNano())
	key, _ := e.pipelineProject(t, id, mirror.Pipeline{
		WindowEnabled: true, GroupKey: "traceId", Trigger: "severity_number >= 17",
		WindowDurationSeconds: 60, AgentEndpointURL: agent.URL,
	})
	podA, podB := "pod-aaaaaaaaaaaa", "pod-bbbbbbbbbbbb"

	sendLogs(t, e.col.HTTP, key, logSpec{17, podA, "A1"})
	require.Eventually(t, func() bool { return agent.failures("A1") >= 1 }, 20*time.Second, 10*time.Millisecond,
		"A1 never reached the agent")
	// Each request below is stored after A1's batch was taken: later batches.
	sendLogs(t, e.col.HTTP, key, logSpec{17, podB, "B1"}, logSpec{17, podA, "A2"})
	require.Eventually(t, func() bool { return slices.Contains(agent.delivered(), "B1") }, 10*time.Second, 10*time.Millisecond,
		"B1 waited behind A1's retries: %v", agent.log())
	sendLogs(t, e.col.HTTP, key, logSpec{17, podA, "A3"}, logSpec{17, podB, "B2"})
	require.Eventually(t, func() bool { return slices.Contains(agent.delivered(), "B2") }, 10*time.Second, 10*time.Millisecond,
		"B2 waited behind A1's retries: %v", agent.log())

	pipelineSettled(t, e.js, id)
	got := agent.delivered()
	var as, bs []string
	for _, n := range got {
		if n[0] == 'A' {
			as = append(as, n)
		} else {
			bs = append(bs, n)
		}
	}
	assert.Equal(t, []string{"A1", "A2", "A3"}, as, "A's calls in order, each once: %v", agent.log())
	assert.Equal(t, []string{"B1", "B2"}, bs, "B's calls in order, each once: %v", agent.log())
	// A1 is answered 2xx only once both B calls are recorded: B went ahead while A1 was
	// being retried.
	assert.Less(t, slices.Index(got, "B2"), slices.Index(got, "A1"), "%v", agent.log())
	assert.GreaterOrEqual(t, agent.failures("A1"), 3, "A1 was retried meanwhile: %v", agent.log())
	for _, at := range agent.log() {
		if at.name != "A1" {
			assert.True(t, at.ok, "only A1 failed: %v", agent.log())
		}
	}

	byKey := map[string]string{"X-API-Key": key}
	require.Eventually(t, func() bool {
		l := readLedger(t, e.col.HTTP, id, byKey)
		return l.Balanced && l.Received == 5 && l.AgentCalls == 5 && l.Pending == 0 && l.Dropped == 0 && l.DeadLettered == 0
	}, 20*time.Second, 50*time.Millisecond, "the ledger: %+v", readLedger(t, e.col.HTTP, id, byKey))
}
