package agentexporter

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-svc/otelcol-svc/components/pipelinedata"
	"github.com/otelcol-svc/otelcol-svc/components/tenant"
	"github.com/otelcol-svc/otelcol-svc/exporter/agentexporter/internal/metadata"
)

// process is one exporter process's worth of state, reached directly so a test can watch
// its targets.
type process struct {
	exp  *agentExporter
	logs *observer.ObservedLogs
}

func (e *env) startProcess(t *testing.T, mutate func(*Config)) *process {
	t.Helper()
	cfg := defaultConfig()
	cfg.NATS.URL = e.nats.URL()
	cfg.AllowCIDRs = "127.0.0.0/8"
	cfg.Timeout = 2 * time.Second
	cfg.Retry = RetryConfig{InitialInterval: 10 * time.Millisecond, MaxInterval: 50 * time.Millisecond, MaxElapsedTime: 20 * time.Second}
	cfg.DeliveryLog.Enabled = false
	if mutate != nil {
		mutate(cfg)
	}
	require.NoError(t, cfg.Validate())
	core, logs := observer.New(zapcore.DebugLevel)
	set := exportertest.NewNopSettings(metadata.Type)
	set.Logger = zap.New(core)
	exp, err := newExporter(cfg, set)
	require.NoError(t, err)
	require.NoError(t, exp.Start(context.Background(), e.host))
	t.Cleanup(func() { _ = exp.Shutdown(context.Background()) })
	p := &process{exp: exp, logs: logs}
	// Shared once its bucket is watched: until then a process paces on its own, which is
	// not what these tests are about.
	require.Eventually(t, func() bool { return exp.targets.share.bucket() != nil }, 10*time.Second, 5*time.Millisecond)
	return p
}

// send hands the process one call of project carrying body.
func (p *process) send(project, body string) error {
	ld, lrs := pipelinedata.New()
	pipelinedata.Append(lrs, pipelinedata.Item{Body: []byte(body), Signal: "event", Seq: 1})
	return p.exp.pushLogs(tenant.NewContext(context.Background(), tenant.Principal{ProjectID: project}), ld)
}

// state is the process's view of project's target at url.
func (p *process) state(project, url string) targetState {
	tg := p.exp.targets.get(project, url)
	defer p.exp.targets.put(tg)
	tg.mu.Lock()
	defer tg.mu.Unlock()
	return tg.state
}

// Issue 17: a target failing without Retry-After, with deliveries waiting in two
// processes, gets one probe per interval in all once its circuit is open, not one per
// process; the probe that finds it up closes the circuit in both.
func TestSharedCircuitOneProbePerIntervalAcrossProcesses(t *testing.T) {
	e := newEnv(t)
	var up atomic.Bool
	a := newAgent(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		if !up.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, `{}`)
	})
	e.putProject(t, project("down", a.srv.URL))
	const interval = time.Second
	short := func(c *Config) {
		c.Target.Circuit = CircuitConfig{Failures: 3, MinDuration: 0, ProbeInterval: interval}
	}
	procs := []*process{e.startProcess(t, short), e.startProcess(t, short)}

	var wg sync.WaitGroup
	for _, p := range procs {
		for range 2 {
			wg.Add(1)
			go func() { defer wg.Done(); assert.NoError(t, p.send("down", `{"n":1}`)) }()
		}
	}
	require.Eventually(t, func() bool {
		return procs[0].state("down", a.srv.URL) == stateOpen && procs[1].state("down", a.srv.URL) == stateOpen
	}, 10*time.Second, 5*time.Millisecond, "the circuit opens in both processes")

	from, began := len(a.requests()), time.Now()
	const probes = 3
	require.Eventually(t, func() bool { return len(a.requests()) >= from+probes }, 10*time.Second, 5*time.Millisecond)
	span, got := time.Since(began), len(a.requests())-from
	t.Logf("%d probes in %s with two processes (interval %s)", got, span, interval)
	// Each process probing on its own would make two per interval: 3 within ~1s.
	assert.LessOrEqual(t, got, int(span/interval)+1, "one probe per interval across both processes")

	up.Store(true)
	wg.Wait()
	assert.Empty(t, e.deadLetters(t, "down"), "every call delivered once the target was up")
	require.Eventually(t, func() bool {
		return procs[0].state("down", a.srv.URL) == stateClosed && procs[1].state("down", a.srv.URL) == stateClosed
	}, 5*time.Second, 5*time.Millisecond, "the probe's answer closes the circuit in both")
}

// A 429 with Retry-After answered to one process holds the other's deliveries to that
// target until then; another project's deliveries to the same origin are not held.
func TestRetryAfterToOneProcessHoldsTheOthers(t *testing.T) {
	e := newEnv(t)
	a := newAgent(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n == 1 {
			w.Header().Set("Retry-After", "2")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		_, _ = io.WriteString(w, `{}`)
	})
	e.putProject(t, project("p1", a.srv.URL))
	e.putProject(t, project("p2", a.srv.URL+"/other"))
	pa, pb := e.startProcess(t, nil), e.startProcess(t, nil)

	done := make(chan error, 1)
	go func() { done <- pa.send("p1", `{"who":"a"}`) }()
	require.Eventually(t, func() bool { return pb.state("p1", a.srv.URL) == stateThrottled }, 5*time.Second, 5*time.Millisecond,
		"the other process learns the target asked to wait")
	refused := a.requests()[0].at

	require.NoError(t, pb.send("p2", `{"who":"b2"}`))
	require.NoError(t, pb.send("p1", `{"who":"b"}`))
	require.NoError(t, <-done)

	first := map[string]time.Time{}
	for _, r := range a.requests() {
		for _, who := range []string{"a", "b", "b2"} {
			if _, seen := first[who]; !seen && strings.Contains(string(r.body), `"who":"`+who+`"`) {
				first[who] = r.at
			}
		}
	}
	require.Len(t, first, 3)
	assert.False(t, first["b"].Before(refused.Add(2*time.Second)),
		"b's first request waited for the Retry-After answered to a (%s after it)", first["b"].Sub(refused))
	assert.True(t, first["b2"].Before(refused.Add(2*time.Second)),
		"another project's delivery to the same origin is not held (%s after)", first["b2"].Sub(refused))
}

// Without NATS each process paces on its own: deliveries still flow, and the owner is
// told once that the state is not shared.
func TestWithoutNATSTargetsArePerProcess(t *testing.T) {
	e := newEnv(t)
	a := newAgent(t, statusThen(http.StatusServiceUnavailable, http.StatusServiceUnavailable))
	e.putProject(t, project("p1", a.srv.URL))
	p := e.startProcess(t, func(c *Config) {
		c.Target.Circuit = CircuitConfig{Failures: 2, MinDuration: 0, ProbeInterval: 200 * time.Millisecond}
	})

	e.nats.Stop()
	// Back up before the cleanups, which stop the mirror cache faster when it can reach NATS.
	defer e.nats.Start(t)
	require.Eventually(t, func() bool { return p.exp.targets.share.bucket() == nil }, 10*time.Second, 5*time.Millisecond)

	began := time.Now()
	require.NoError(t, p.send("p1", `{"n":1}`))
	assert.Len(t, a.requests(), 3, "two failures open the circuit, the probe delivers")
	assert.Less(t, time.Since(began), 5*time.Second, "no wait on NATS")
	assert.Equal(t, stateClosed, p.state("p1", a.srv.URL))
	require.NoError(t, p.send("p1", `{"n":2}`))
	assert.Len(t, a.requests(), 4)
	assert.Equal(t, 1, p.logs.FilterMessageSnippet("not shared with the other exporter processes").Len(), "told once")
}

func TestShareKeyIsAValidKVKey(t *testing.T) {
	k := shareKey("p_1-x", "https://[::1]:8443")
	assert.Regexp(t, `^p_1-x\.[0-9a-f]{32}$`, k)
	assert.NotEqual(t, k, shareKey("p_1-x", "https://[::1]:8444"))
	assert.NotEqual(t, k, shareKey("p_2", "https://[::1]:8443"))
}

// Entries come from other processes (or anyone who can write to the bucket): only a
// well-formed entry whose key names its own project and origin is applied.
func FuzzDecodeShared(f *testing.F) {
	o := "https://agent.example.com:443"
	f.Add(shareKey("p1", o), `{"state":"open","until":"2026-11-23T19:00:00Z","by":"x","at":"2026-11-23T18:59:00Z","project":"p1","origin":"`+o+`"}`)
	f.Add(shareKey("p1", o), `{"state":"closed","by":"x","project":"p1","origin":"`+o+`"}`)
	f.Add(shareKey("p2", o), `{"state":"throttled","until":"2026-11-23T19:00:00Z","project":"p1","origin":"`+o+`"}`)
	f.Add("p1.x", `{"state":"open"}`)
	f.Add("", `not json`)
	f.Fuzz(func(t *testing.T, key, value string) {
		e, ok := decodeShared(key, []byte(value))
		if !ok {
			return
		}
		assert.Equal(t, key, shareKey(e.Project, e.Origin))
		assert.Contains(t, []string{sharedOpen, sharedThrottled, sharedClosed}, e.State)
		if e.State != sharedClosed {
			assert.False(t, e.Until.IsZero())
		}
	})
}

func TestDecodeSharedRefusesAMismatchedKey(t *testing.T) {
	o := "https://agent.example.com:443"
	v := []byte(`{"state":"open","until":"2026-11-23T19:00:00Z","project":"p1","origin":"` + o + `"}`)
	_, ok := decodeShared(shareKey("p1", o), v)
	assert.True(t, ok)
	_, ok = decodeShared(shareKey("p2", o), v)
	assert.False(t, ok, "an entry cannot move another project's target")
}

// What another process saw is taken as is, except a close older than this process's own
// failure: that probe's answer says nothing about the failure seen since.
func TestAdoptTakesThrottlesAndOnlyNewerCloses(t *testing.T) {
	ts := testTargets(t, TargetConfig{Circuit: CircuitConfig{Failures: 1, ProbeInterval: time.Hour}})
	const o = "https://agent.example.com:443"
	now := time.Now()
	ts.adopt(sharedEntry{State: sharedClosed, At: now, Project: "p", Origin: o}, now)
	ts.mu.Lock()
	assert.Empty(t, ts.m, "a close creates nothing")
	ts.mu.Unlock()
	ts.adopt(sharedEntry{State: sharedOpen, Until: now.Add(-time.Second), At: now, Project: "p", Origin: o}, now)
	ts.mu.Lock()
	assert.Empty(t, ts.m, "an interval already over creates nothing")
	ts.mu.Unlock()

	ts.adopt(sharedEntry{State: sharedThrottled, Until: now.Add(time.Minute), At: now, Project: "p", Origin: o}, now)
	tg := ts.get("p", "https://agent.example.com/x")
	defer ts.put(tg)
	_, err := ts.admit(context.Background(), tg, time.Now().Add(10*time.Millisecond))
	var w *waitError
	require.ErrorAs(t, err, &w, "another process's Retry-After holds this one")
	assert.Equal(t, throttleRetryAfter, w.reason)
	other := ts.get("q", "https://agent.example.com/x")
	probe, err := ts.admit(context.Background(), other, time.Now().Add(10*time.Millisecond))
	assert.NoError(t, err, "another project to the same origin is not held")
	assert.False(t, probe)
	ts.put(other)

	ts.report(context.Background(), tg, false, attemptResult{class: classRetryable, status: 502})
	require.True(t, tg.isOpen())
	ts.adopt(sharedEntry{State: sharedClosed, At: now, Project: "p", Origin: o}, time.Now())
	assert.True(t, tg.isOpen(), "a close from before this process's failure is outdated")
	ts.adopt(sharedEntry{State: sharedClosed, At: time.Now(), Project: "p", Origin: o}, time.Now())
	assert.False(t, tg.isOpen(), "a probe answered since closes it here too")
}
