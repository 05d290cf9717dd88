package agentexporter

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/otelcol-svc/otelcol-svc/components/pipelinedata"
	"github.com/otelcol-svc/otelcol-svc/components/tenant"
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

// Issue 17's must-hold: with the agent failing the first call of group A three times
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

	ctx := tenant.NewContext(context.Background(), tenant.Principal{ProjectID: "p1"})
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

	ctx, cancel := context.WithCancel(tenant.NewContext(context.Background(), tenant.Principal{ProjectID: "p1"}))
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

func TestGroupCallsKeepsOrderWithinAndFirstAppearanceAcross(t *testing.T) {
	in := []call{{group: "b", records: 1}, {group: "a", records: 2}, {group: "b", records: 3}, {records: 4}, {group: "a", records: 5}}
	var got [][]int
	for _, g := range groupCalls(in) {
		var rs []int
		for _, c := range g {
			rs = append(rs, c.records)
		}
		got = append(got, rs)
	}
	assert.Equal(t, [][]int{{1, 3}, {2, 5}, {4}}, got)
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
	require.NoError(t, r.exp.ConsumeLogs(tenant.NewContext(context.Background(), tenant.Principal{ProjectID: "p1"}), ld))
	got := a.requests()
	require.Len(t, got, 3)
	assert.Empty(t, got[0].header.Values("X-Suppressed-Count"), "nothing held back before these")
	assert.Equal(t, "1002", got[1].header.Get("X-Suppressed-Count"))
	assert.Empty(t, got[2].header.Values("X-Suppressed-Count"))
}
