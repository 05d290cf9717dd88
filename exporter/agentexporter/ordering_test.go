package agentexporter

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/otelcol-svc/otelcol-svc/exporter/agentexporter/internal/metadata"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelinedata"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/principal"
	"github.com/otelcol-svc/otelcol-svc/internal/pipelinectx"
)

// windowCalls is a window-mode batch: each name ("A1") is a call of group name[:1].
func windowCalls(names ...string) plog.Logs {
	ld, lrs := pipelinedata.New()
	for i, n := range names {
		pipelinedata.Append(lrs, pipelinedata.Item{Body: fmt.Appendf(nil, `{"trigger":{"call":%q},"window":[]}`, n),
			Signal: "log", Kind: pipelinedata.KindWindowCall, Seq: uint64(i + 1), Group: n[:1]})
	}
	return ld
}

func callName(t *testing.T, body []byte) string {
	var b struct {
		Trigger struct {
			Call string `json:"call"`
		} `json:"trigger"`
	}
	require.NoError(t, json.Unmarshal(body, &b), "%s", body)
	return b.Trigger.Call
}

func names(t *testing.T, got []received) []string {
	out := make([]string, len(got))
	for i, r := range got {
		out[i] = callName(t, r.body)
	}
	return out
}

// namedAgent answers each window call by its name.
func namedAgent(t *testing.T, respond func(name string, w http.ResponseWriter)) *agent {
	var self atomic.Pointer[agent]
	a := newAgent(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		// newAgent read the body already: take it from what it recorded.
		respond(callName(t, self.Load().requests()[n-1].body), w)
	})
	self.Store(a)
	return a
}

// With the agent failing the first call of group A three times
// (503), A's calls arrive in order and group B's calls arrive meanwhile.
func TestGroupWaitsForItsRetriedCallWhileOthersGoAhead(t *testing.T) {
	e := newEnv(t)
	bDone := make(chan struct{})
	var once sync.Once
	var mu sync.Mutex
	a1Attempts, bSeen := 0, 0
	a := namedAgent(t, func(name string, w http.ResponseWriter) {
		mu.Lock()
		switch {
		case name == "A1":
			a1Attempts++
			fail := a1Attempts <= 3
			first := a1Attempts == 1
			mu.Unlock()
			if first {
				// Hold the first failure until B's calls are in (bounded: a sequential
				// exporter never sends them, and the test then fails on the order).
				select {
				case <-bDone:
				case <-time.After(time.Second):
				}
			}
			if fail {
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
		case name[0] == 'B':
			bSeen++
			if bSeen == 3 {
				once.Do(func() { close(bDone) })
			}
			mu.Unlock()
		default:
			mu.Unlock()
		}
		_, _ = io.WriteString(w, `{"status": "accepted"}`)
	})
	e.putProject(t, project("p1", a.srv.URL))
	r := e.start(t, nil)

	ctx := principal.NewContext(context.Background(), principal.Principal{ProjectID: "p1"})
	require.NoError(t, r.exp.ConsumeLogs(ctx, windowCalls("A1", "B1", "A2", "B2", "A3", "B3")))

	got := names(t, a.requests())
	var as []string
	firstASuccess, lastB := -1, -1
	for i, n := range got {
		if n[0] == 'A' {
			as = append(as, n)
			if n == "A1" && len(as) == 4 {
				firstASuccess = i
			}
		} else {
			lastB = i
		}
	}
	assert.Equal(t, []string{"A1", "A1", "A1", "A1", "A2", "A3"}, as, "A's calls in order, the later ones after the retried one: %v", got)
	require.GreaterOrEqual(t, firstASuccess, 0, "%v", got)
	assert.Less(t, lastB, firstASuccess, "B's calls arrive while A's first is retried: %v", got)
}

// A group whose call cannot be settled (here: the batch's context ends while it is
// retried) stops there, so its later calls never overtake it, and fails the batch; the
// other groups' calls are made.
func TestUnsettledGroupFailsTheBatchAndSendsNothingAfter(t *testing.T) {
	e := newEnv(t)
	var mu sync.Mutex
	bSeen := 0
	bDone := make(chan struct{})
	a := namedAgent(t, func(name string, w http.ResponseWriter) {
		if name == "A1" {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, `{"status": "accepted"}`)
		if name[0] == 'B' {
			mu.Lock()
			bSeen++
			if bSeen == 2 {
				close(bDone)
			}
			mu.Unlock()
		}
	})
	e.putProject(t, project("p1", a.srv.URL))
	r := e.start(t, func(c *Config) { c.Retry.MaxElapsedTime = time.Minute })

	ctx, cancel := context.WithCancel(principal.NewContext(context.Background(), principal.Principal{ProjectID: "p1"}))
	defer cancel()
	go func() {
		// Bounded, so a broken exporter fails the test instead of retrying A1 for a minute.
		select {
		case <-bDone:
		case <-time.After(5 * time.Second):
		}
		cancel()
	}()
	err := r.exp.ConsumeLogs(ctx, windowCalls("A1", "B1", "A2", "B2"))
	require.Error(t, err, "the batch is redelivered")
	assert.Contains(t, err.Error(), "will be redelivered")
	got := names(t, a.requests())
	assert.NotContains(t, got, "A2", "nothing of A after its unsettled call")
	assert.Contains(t, got, "B2", "the other group went ahead")
}

// Legacy records that follow cooldowns tell the agent how many triggers were held back,
// summed over the call's records; calls without any send no header.
func TestSuppressedCountHeaderOnLegacyCalls(t *testing.T) {
	e := newEnv(t)
	a := newAgent(t, nil)
	p := project("p1", a.srv.URL)
	p.Pipeline.BatchSize = 2
	e.putProject(t, p)
	r := e.start(t, nil)

	ld, lrs := pipelinedata.New()
	for i, n := range []int64{0, 0, 999, 3, 0} {
		pipelinedata.Append(lrs, pipelinedata.Item{Body: fmt.Appendf(nil, `{"n":%d}`, i), Signal: "log", Seq: uint64(i + 1), Suppressed: n})
	}
	require.NoError(t, r.exp.ConsumeLogs(principal.NewContext(context.Background(), principal.Principal{ProjectID: "p1"}), ld))
	got := a.requests()
	require.Len(t, got, 3)
	assert.Empty(t, got[0].header.Values("X-Suppressed-Count"), "nothing held back before these")
	assert.Equal(t, "1002", got[1].header.Get("X-Suppressed-Count"))
	assert.Empty(t, got[2].header.Values("X-Suppressed-Count"))
}

// windowBatch is windowCalls with the records' stream sequences starting at first, for
// batches that follow one another.
func windowBatch(first uint64, names ...string) plog.Logs {
	ld, lrs := pipelinedata.New()
	for i, n := range names {
		pipelinedata.Append(lrs, pipelinedata.Item{Body: fmt.Appendf(nil, `{"trigger":{"call":%q},"window":[]}`, n),
			Signal: "log", Kind: pipelinedata.KindWindowCall, Seq: first + uint64(i), Group: n[:1]})
	}
	return ld
}

// Across batches: while group A's call of one batch is being retried, a later
// batch hands off as soon as its calls are queued, its B call reaches the agent, and its A
// call waits behind the retried one.
func TestLaterBatchGoesAheadWhileAnEarlierBatchsGroupIsRetried(t *testing.T) {
	e := newEnv(t)
	bSeen := make(chan struct{})
	var once sync.Once
	var mu sync.Mutex
	a1Failures := 0
	a := namedAgent(t, func(name string, w http.ResponseWriter) {
		switch name {
		case "A1":
			mu.Lock()
			a1Failures++
			n := a1Failures
			mu.Unlock()
			select {
			case <-bSeen:
				// B is in: A1 may succeed after one more failure.
				if n > 1 {
					break
				}
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			default:
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
		case "B1":
			once.Do(func() { close(bSeen) })
		}
		_, _ = io.WriteString(w, `{"status": "accepted"}`)
	})
	e.putProject(t, project("p1", a.srv.URL))
	r := e.start(t, func(c *Config) { c.Retry.MaxElapsedTime = 20 * time.Second })

	base := principal.NewContext(context.Background(), principal.Principal{ProjectID: "p1"})
	ctx1, handed1 := pipelinectx.WithHandoff(base)
	first := make(chan error, 1)
	go func() { first <- r.exp.ConsumeLogs(ctx1, windowBatch(1, "A1")) }()
	select {
	case <-handed1:
	case <-time.After(5 * time.Second):
		t.Fatal("the first batch never handed off")
	}
	ctx2, handed2 := pipelinectx.WithHandoff(base)
	second := make(chan error, 1)
	go func() { second <- r.exp.ConsumeLogs(ctx2, windowBatch(2, "B1", "A2")) }()
	select {
	case <-handed2:
	case <-time.After(5 * time.Second):
		t.Fatal("the second batch never handed off")
	}
	select {
	case <-bSeen:
	case err := <-first:
		t.Fatalf("B1 waited for the retried A1's batch (returned %v)", err)
	case <-time.After(10 * time.Second):
		t.Fatal("B1 never reached the agent")
	}
	require.NoError(t, <-first)
	require.NoError(t, <-second)

	got := names(t, a.requests())
	var as []string
	for _, n := range got {
		if n[0] == 'A' {
			as = append(as, n)
		}
	}
	assert.GreaterOrEqual(t, len(as), 3, "A1 was retried: %v", got)
	assert.Equal(t, "A2", as[len(as)-1], "A2 only after A1 was delivered: %v", got)
	for _, n := range as[:len(as)-1] {
		assert.Equal(t, "A1", n, "%v", got)
	}
	assert.Less(t, slices.Index(got, "B1"), slices.Index(got, "A2"), "%v", got)
}

// A call of a group that is not settled fails the calls queued behind it in later
// batches too, so they never overtake it.
func TestUnsettledCallFailsItsGroupInLaterBatches(t *testing.T) {
	e := newEnv(t)
	a := namedAgent(t, func(name string, w http.ResponseWriter) {
		if name == "A1" {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, `{"status": "accepted"}`)
	})
	e.putProject(t, project("p1", a.srv.URL))
	r := e.start(t, func(c *Config) { c.Retry.MaxElapsedTime = time.Minute })

	base := principal.NewContext(context.Background(), principal.Principal{ProjectID: "p1"})
	ctx1, cancel1 := context.WithCancel(base)
	defer cancel1()
	ctx1, handed1 := pipelinectx.WithHandoff(ctx1)
	first := make(chan error, 1)
	go func() { first <- r.exp.ConsumeLogs(ctx1, windowBatch(1, "A1")) }()
	<-handed1
	ctx2, handed2 := pipelinectx.WithHandoff(base)
	second := make(chan error, 1)
	go func() { second <- r.exp.ConsumeLogs(ctx2, windowBatch(2, "B1", "A2")) }()
	<-handed2
	require.Eventually(t, func() bool { return slices.Contains(names(t, a.requests()), "B1") }, 5*time.Second, 5*time.Millisecond)
	cancel1() // shutdown of the first batch while A1 is retried
	require.Error(t, <-first)
	err := <-second
	require.Error(t, err, "A2 cannot go before A1, which is redelivered")
	assert.Contains(t, err.Error(), "will be redelivered")
	assert.NotContains(t, names(t, a.requests()), "A2")
}

// Lanes exist only while they hold calls: group keys are unbounded (pod names), so a
// lane per key ever seen would grow without end.
func TestIdleLanesAreRemoved(t *testing.T) {
	e := newEnv(t)
	var mu sync.Mutex
	inFlight, most := 0, 0
	a := newAgent(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		inFlight++
		most = max(most, inFlight)
		mu.Unlock()
		time.Sleep(20 * time.Millisecond) // a slow agent, so calls overlap
		mu.Lock()
		inFlight--
		mu.Unlock()
		_, _ = io.WriteString(w, `{"status": "accepted"}`)
	})
	e.putProject(t, project("p1", a.srv.URL))
	cfg := defaultConfig()
	cfg.NATS.URL = e.nats.URL()
	cfg.AllowCIDRs = "127.0.0.0/8"
	exp, err := newExporter(cfg, exportertest.NewNopSettings(metadata.Type))
	require.NoError(t, err)
	require.NoError(t, exp.Start(context.Background(), e.host))
	t.Cleanup(func() { _ = exp.Shutdown(context.Background()) })

	var groups []string
	for i := range 40 {
		groups = append(groups, fmt.Sprintf("%c%d", 'a'+i%26, i))
	}
	ctx := principal.NewContext(context.Background(), principal.Principal{ProjectID: "p1"})
	require.NoError(t, exp.pushLogs(ctx, windowBatch(1, groups...)))
	assert.Len(t, a.requests(), 40)
	assert.LessOrEqual(t, most, maxCallsInFlight, "calls in flight per project are bounded")
	assert.Greater(t, most, 1, "different groups go side by side")
	// A lane's goroutine removes it just after answering its last call.
	require.Eventually(t, func() bool {
		exp.lanes.mu.Lock()
		defer exp.lanes.mu.Unlock()
		return len(exp.lanes.byKey) == 0 && len(exp.lanes.slots) == 0
	}, 5*time.Second, 5*time.Millisecond, "no lane left once its calls are settled")
}
