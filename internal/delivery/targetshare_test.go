package delivery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// proc is one exporter process's engine, with its own NATS connection.
type proc struct {
	e    *Engine
	js   jetstream.JetStream
	logs *observer.ObservedLogs
}

func startProc(t *testing.T, n *testenv.NATS, mutate func(*Settings)) *proc {
	t.Helper()
	return startProcAt(t, n.URL(), mutate)
}

func startProcAt(t *testing.T, url string, mutate func(*Settings)) *proc {
	t.Helper()
	nc, js := testenv.Connect(t, url)
	s := DefaultSettings()
	s.AllowCIDRs = "127.0.0.0/8"
	s.Timeout = 30 * time.Second
	s.Retry = RetryConfig{InitialInterval: time.Millisecond, MaxInterval: 5 * time.Millisecond, MaxElapsedTime: time.Minute}
	s.DeliveryLog.Enabled = false
	s.FailureNotices.Enabled = false
	if mutate != nil {
		mutate(&s)
	}
	core, logs := observer.New(zapcore.DebugLevel)
	e := New(Options{Settings: s, Name: "test", Logger: zap.New(core), Telemetry: nopTelemetry{}})
	require.NoError(t, e.Start(nil, nc, js))
	t.Cleanup(func() { e.Shutdown(context.Background()) })
	// Shared once its bucket is watched: until then a process paces on its own.
	require.Eventually(t, func() bool { return e.share.bucket() != nil }, 10*time.Second, 5*time.Millisecond)
	return &proc{e: e, js: js, logs: logs}
}

// state is the process's view of project's target at url.
func (p *proc) state(project, url string) targetState {
	tg := p.e.targets.get(project, url)
	defer p.e.targets.put(tg)
	tg.mu.Lock()
	defer tg.mu.Unlock()
	return tg.state
}

func (p *proc) deliver(project, url string) Result {
	return p.e.Deliver(context.Background(), Request{Who: "agent", Project: project, Target: url, Body: []byte(`{}`)})
}

// due makes the process's target due for its probe now, as if its wait were over: the
// test's clock, so that the wait can be long enough that nothing else is due meanwhile.
func (p *proc) due(project, url string) {
	tg := p.e.targets.get(project, url)
	defer p.e.targets.put(tg)
	tg.mu.Lock()
	defer tg.mu.Unlock()
	tg.until = time.Now()
	tg.wake()
}

func (p *proc) leftProbes() int {
	return p.logs.FilterMessage("probe left to another exporter process").Len()
}

func circuit(failures int, interval time.Duration) func(*Settings) {
	return func(s *Settings) {
		s.Target.Circuit = CircuitConfig{Failures: failures, ProbeInterval: interval}
	}
}

// Two processes with deliveries waiting for an open circuit send one probe in all: the
// one due second leaves it to the first (whose probe the target holds), and the probe's
// answer lets both through.
func TestOneProbeAcrossProcesses(t *testing.T) {
	n := testenv.StartNATS(t)
	var reqs atomic.Int32
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if reqs.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		<-release
	}))
	defer srv.Close()
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	// A minute's interval: the lease the first probe takes outlasts the test.
	long := func(s *Settings) {
		circuit(1, time.Minute)(s)
		s.Retry.MaxElapsedTime = 10 * time.Minute
	}
	a, b := startProc(t, n, long), startProc(t, n, long)

	resA := make(chan Result, 1)
	go func() { resA <- a.deliver("p", srv.URL) }()
	require.Eventually(t, func() bool { return b.state("p", srv.URL) == stateOpen }, 10*time.Second, 5*time.Millisecond,
		"a's failure opens the circuit in b too")
	resB := make(chan Result, 1)
	go func() { resB <- b.deliver("p", srv.URL) }()
	a.due("p", srv.URL)
	b.due("p", srv.URL)

	require.Eventually(t, func() bool { return a.leftProbes()+b.leftProbes() > 0 && reqs.Load() >= 2 }, 20*time.Second, 5*time.Millisecond,
		"the process due second leaves the probe to the one whose probe is out")
	assert.EqualValues(t, 2, reqs.Load(), "the failure and one probe, not one probe per process")

	close(release)
	for _, r := range []Result{<-resA, <-resB} {
		assert.True(t, r.Delivered, r.Reason)
	}
	assert.EqualValues(t, 3, reqs.Load(), "the probe and the other process's delivery")
	assert.Equal(t, stateClosed, a.state("p", srv.URL))
	assert.Equal(t, stateClosed, b.state("p", srv.URL))
}

// A Retry-After answered to one process holds the other's deliveries to that target; it
// does not send at all when its budget ends first. Another project's deliveries to the
// same origin are not held.
func TestRetryAfterSeenByOneHoldsTheOther(t *testing.T) {
	n := testenv.StartNATS(t)
	var reqs atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if reqs.Add(1) == 1 {
			w.Header().Set("Retry-After", "3600")
			w.WriteHeader(http.StatusTooManyRequests)
		}
	}))
	defer srv.Close()
	a, b := startProc(t, n, nil), startProc(t, n, nil)

	r := a.deliver("p", srv.URL)
	require.False(t, r.Delivered)
	require.Eventually(t, func() bool { return b.state("p", srv.URL) == stateThrottled }, 10*time.Second, 5*time.Millisecond,
		"b learns that the target asked to wait")

	r = b.deliver("p", srv.URL)
	assert.False(t, r.Delivered)
	assert.Zero(t, r.Attempts)
	assert.Contains(t, r.Reason, "asked to wait until")
	assert.EqualValues(t, 1, reqs.Load(), "b sent nothing to the target that asked a to wait")

	r = b.deliver("q", srv.URL)
	assert.True(t, r.Delivered, "another project is not held: %s", r.Reason)
	assert.EqualValues(t, 2, reqs.Load())
}

// max_rate is each process's: a second process is not held by the first one's rate.
func TestMaxRateStaysPerProcess(t *testing.T) {
	n := testenv.StartNATS(t)
	var reqs atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reqs.Add(1) }))
	defer srv.Close()
	slow := func(s *Settings) {
		s.Target.MaxRate = 0.001
		s.Retry.MaxElapsedTime = time.Second
	}
	a, b := startProc(t, n, slow), startProc(t, n, slow)

	require.True(t, a.deliver("p", srv.URL).Delivered)
	require.True(t, b.deliver("p", srv.URL).Delivered, "b has its own rate")
	r := a.deliver("p", srv.URL)
	assert.False(t, r.Delivered)
	assert.Contains(t, r.Reason, "max rate", "a's own rate holds a")
	assert.EqualValues(t, 2, reqs.Load())
}

// Without NATS each process paces on its own: its circuit opens and its probe delivers,
// nothing waits on NATS, and the owner is told once that the state is not shared.
func TestWithoutNATSEachProcessPacesAlone(t *testing.T) {
	n := testenv.StartNATS(t)
	var reqs atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if reqs.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	p := startProc(t, n, circuit(1, 100*time.Millisecond))
	// A first bind that failed (slow JetStream) told the owner too, before the outage.
	told := func() int { return p.logs.FilterMessageSnippet("not shared with the other exporter processes").Len() }
	before := told()

	n.Stop()
	require.Eventually(t, func() bool { return p.e.share.bucket() == nil }, 10*time.Second, 5*time.Millisecond)

	r := p.deliver("p", srv.URL)
	assert.True(t, r.Delivered, r.Reason)
	assert.Equal(t, 2, r.Attempts, "the failure opened the circuit, its probe delivered")
	assert.EqualValues(t, 2, reqs.Load())
	assert.Equal(t, stateClosed, p.state("p", srv.URL))
	assert.Equal(t, 1, told()-before, "told once")
}

// The race the first shared version lost: a probe is out when another process records a
// newer throttle; the probe's success must not erase it from the bucket (a blind write
// did, and every process then sent to a target that had asked to wait).
func TestAProbesCloseDoesNotEraseANewerThrottle(t *testing.T) {
	n := testenv.StartNATS(t)
	noCircuit := circuit(0, time.Second)
	a, b := startProc(t, n, noCircuit), startProc(t, n, noCircuit)
	const url = "https://agent.example.com"
	ctx := context.Background()
	ta, tb := a.e.targets.get("p", url), b.e.targets.get("p", url)
	defer a.e.targets.put(ta)
	defer b.e.targets.put(tb)

	a.e.targets.report(ctx, ta, false, attemptResult{class: classRetryable, status: 429, retryAfter: 200 * time.Millisecond, hasRetryAfter: true})
	require.Eventually(t, func() bool { return b.state("p", url) == stateThrottled }, 10*time.Second, 5*time.Millisecond)
	probe, err := a.e.targets.admit(ctx, ta, time.Now().Add(time.Minute))
	require.NoError(t, err)
	require.True(t, probe)

	// While a's probe is out, b is told to wait an hour; a sees it.
	b.e.targets.report(ctx, tb, false, attemptResult{class: classRetryable, status: 503, retryAfter: time.Hour, hasRetryAfter: true})
	require.Eventually(t, func() bool {
		ta.mu.Lock()
		defer ta.mu.Unlock()
		return time.Until(ta.until) > 30*time.Minute
	}, 10*time.Second, 5*time.Millisecond)

	a.e.targets.report(ctx, ta, true, attemptResult{class: classOK, status: 200})
	require.Eventually(t, func() bool {
		ta.mu.Lock()
		defer ta.mu.Unlock()
		return ta.pending == 0
	}, 10*time.Second, 5*time.Millisecond, "a's write was made (or refused)")

	kv, err := a.js.KeyValue(ctx, TargetsBucket)
	require.NoError(t, err)
	e, err := kv.Get(ctx, shareKey("p", targetOrigin(url)))
	require.NoError(t, err)
	var got sharedEntry
	require.NoError(t, json.Unmarshal(e.Value(), &got))
	assert.Equal(t, sharedThrottled, got.State, "the bucket keeps b's newer throttle")
	assert.Equal(t, stateThrottled, b.state("p", url))
	assert.Equal(t, stateThrottled, a.state("p", url), "a keeps it too: its probe's answer is older")
	r := a.deliver("p", url)
	assert.False(t, r.Delivered)
	assert.Zero(t, r.Attempts, "a sends nothing to the target that asked b to wait")
}

func TestShareKeyIsAValidKVKey(t *testing.T) {
	k := shareKey("p_1-x", "https://[::1]:8443")
	assert.Regexp(t, `^p_1-x\.[0-9a-f]{32}$`, k)
	assert.NotEqual(t, k, shareKey("p_1-x", "https://[::1]:8444"))
	assert.NotEqual(t, k, shareKey("p_2", "https://[::1]:8443"))
}

// Entries come from other processes (or anyone who can write to the bucket): only a
// well-formed entry whose key names its own project and origin is applied, and its wait
// is bounded.
func FuzzDecodeShared(f *testing.F) {
	o := "https://agent.example.com:443"
	f.Add(shareKey("p1", o), `{"state":"open","wait_ms":30000,"by":"x","project":"p1","origin":"`+o+`"}`)
	f.Add(shareKey("p1", o), `{"state":"closed","by":"x","project":"p1","origin":"`+o+`"}`)
	f.Add(shareKey("p2", o), `{"state":"throttled","wait_ms":1,"project":"p1","origin":"`+o+`"}`)
	f.Add(shareKey("p1", o), `{"state":"throttled","wait_ms":9223372036854775807,"project":"p1","origin":"`+o+`"}`)
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
			assert.Positive(t, e.wait())
		}
		assert.LessOrEqual(t, e.wait(), maxSharedWait)
	})
}

func TestDecodeSharedRefusesAMismatchedKey(t *testing.T) {
	o := "https://agent.example.com:443"
	v := []byte(`{"state":"open","wait_ms":1000,"project":"p1","origin":"` + o + `"}`)
	_, ok := decodeShared(shareKey("p1", o), v)
	assert.True(t, ok)
	_, ok = decodeShared(shareKey("p2", o), v)
	assert.False(t, ok, "an entry cannot move another project's target")
}

// A bucket made without per-key TTLs (by hand, or an older version) gets them: without
// them no lease could be taken and every process would probe on its own.
func TestABucketWithoutKeyTTLsGetsThem(t *testing.T) {
	n := testenv.StartNATS(t)
	_, js := testenv.Connect(t, n.URL())
	ctx := context.Background()
	_, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: TargetsBucket, History: 1})
	require.NoError(t, err)
	p := startProc(t, n, nil)
	st, err := p.e.share.bucket().Status(ctx)
	require.NoError(t, err)
	assert.Equal(t, markerTTL, st.LimitMarkerTTL())
	assert.Equal(t, targetsTTL, st.TTL(), "entries of targets nobody delivers to go")
	assert.EqualValues(t, 1, st.History())
	assert.EqualValues(t, targetsMaxValue, st.Config().MaxValueSize)
	assert.EqualValues(t, targetsMaxBytes, st.Config().MaxBytes)
	tg := p.e.targets.get("p", "https://agent.example.com")
	defer p.e.targets.put(tg)
	l := p.e.share.lease(ctx, tg, stateThrottled)
	assert.True(t, l.won && l.shared, "the lease is taken through the bucket")
}

// Targets created only because another process saw them fail are dropped once their wait
// is over and nothing here uses them: a process does not keep every target of every
// project another process delivered to. One this process saw fail itself is kept.
func TestTargetsAdoptedFromOthersAreDroppedWhenOver(t *testing.T) {
	ts := testTargets(t, TargetConfig{Circuit: CircuitConfig{Failures: 1, ProbeInterval: time.Hour}})
	const o = "https://agent.example.com:443"
	ts.adopt(sharedEntry{State: sharedOpen, WaitMS: 1, Project: "other", Origin: o}, false, 1, time.Nanosecond, time.Now())
	ts.adopt(sharedEntry{State: sharedOpen, WaitMS: 1, Project: "held", Origin: o}, false, 2, time.Hour, time.Now())
	mine := ts.get("mine", o)
	ts.report(context.Background(), mine, false, attemptResult{class: classRetryable, status: 502})
	ts.put(mine)
	ts.adopt(sharedEntry{State: sharedOpen, WaitMS: 1, Project: "mine", Origin: o}, false, 3, time.Nanosecond, time.Now())

	ts.mu.Lock()
	require.Len(t, ts.m, 3)
	ts.sweep()
	_, other := ts.m["other\x00"+o]
	_, held := ts.m["held\x00"+o]
	_, kept := ts.m["mine\x00"+o]
	ts.mu.Unlock()
	assert.False(t, other, "another process's circuit, over, is dropped")
	assert.True(t, held, "another process's circuit still open is kept")
	assert.True(t, kept, "this process's own open circuit is kept")
}

// With NATS connected but JetStream gone (so no bucket), each process paces on its own:
// the lease cannot be taken, so the probe goes, and delivers.
func TestWithoutJetStreamEachProcessPacesAlone(t *testing.T) {
	n := testenv.StartNATS(t)
	var reqs atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if reqs.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	p := startProc(t, n, circuit(1, 100*time.Millisecond))
	require.NoError(t, n.Server.DisableJetStream())

	r := p.deliver("p", srv.URL)
	assert.True(t, r.Delivered, r.Reason)
	assert.Equal(t, 2, r.Attempts, "the failure opened the circuit, its probe delivered")
	assert.EqualValues(t, 2, reqs.Load())
}

// A delivery whose budget ends before this process would ask for the lease again still
// waits for the answer of the probe another process took, as it would for its own
// process's probe, and goes when that probe finds the target up.
func TestADeliveryWaitsForAProbeElsewhere(t *testing.T) {
	n := testenv.StartNATS(t)
	a, b := startProc(t, n, nil), startProc(t, n, nil)
	const url = "https://agent.example.com"
	ctx := context.Background()
	ta, tb := a.e.targets.get("p", url), b.e.targets.get("p", url)
	defer a.e.targets.put(ta)
	defer b.e.targets.put(tb)

	a.e.targets.report(ctx, ta, false, attemptResult{class: classRetryable, status: 429, retryAfter: time.Hour, hasRetryAfter: true})
	require.Eventually(t, func() bool { return b.state("p", url) == stateThrottled }, 10*time.Second, 5*time.Millisecond)
	a.due("p", url)
	probe, err := a.e.targets.admit(ctx, ta, time.Now().Add(time.Minute))
	require.NoError(t, err)
	require.True(t, probe)

	// b's lease would be asked for again in 5s (a quarter of the 30s attempt timeout,
	// at most 5s); its budget is shorter.
	done := make(chan error, 1)
	b.due("p", url)
	go func() {
		probe, err := b.e.targets.admit(ctx, tb, time.Now().Add(4*time.Second))
		assert.False(t, probe)
		done <- err
	}()
	require.Eventually(t, func() bool { return b.leftProbes() > 0 }, 10*time.Second, 5*time.Millisecond)
	a.e.targets.report(ctx, ta, true, attemptResult{class: classOK, status: 200})
	assert.NoError(t, <-done, "the probe's answer let b's delivery through")
}

// On a replicated bucket (the scale-out default) the processes due together race for a
// lease that was given back or has expired, and the server answers the losers with an
// error nats.go does not map to ErrKeyExists: each must still read it as a lost race, so
// exactly one process probes, not every one "as if alone".
func TestOneLeaseWinnerOnAReplicatedBucket(t *testing.T) {
	c := testenv.StartNATSCluster(t, 3)
	r3 := func(s *Settings) {
		circuit(1, time.Second)(s) // an open circuit's lease lasts the interval: 1s
		s.DeadLetterStream.Replicas = 3
	}
	var procs []*proc
	for range 3 {
		procs = append(procs, startProcAt(t, c.URL(), r3))
	}
	ctx := context.Background()
	st, err := procs[0].e.share.bucket().Status(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, st.Config().Replicas)
	const url = "https://agent.example.com"
	tgs := make([]*target, len(procs))
	for i, p := range procs {
		tgs[i] = p.e.targets.get("p", url)
		defer p.e.targets.put(tgs[i])
	}
	kv := procs[0].e.share.bucket()
	key := leaseKey(tgs[0].key)

	race := func(round int) {
		start := make(chan struct{})
		res := make([]leaseResult, len(procs))
		var wg sync.WaitGroup
		for i, p := range procs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				res[i] = p.e.share.lease(ctx, tgs[i], stateOpen)
			}()
		}
		close(start)
		wg.Wait()
		won := 0
		for i, l := range res {
			assert.False(t, l.won && !l.shared, "round %d: process %d probes as if alone", round, i)
			if l.won {
				won++
			}
		}
		require.Equal(t, 1, won, "round %d: one process probes", round)
	}
	race(0)
	for round := 1; round <= 16; round++ {
		// Given back, as after a throttled target's probe.
		e, err := kv.Get(ctx, key)
		require.NoError(t, err)
		require.NoError(t, kv.Delete(ctx, key, jetstream.LastRevision(e.Revision())))
		race(round)
	}
	for round := 17; round <= 20; round++ {
		// Expired, as after an open circuit's interval.
		require.Eventually(t, func() bool {
			_, err := kv.Get(ctx, key)
			return errors.Is(err, jetstream.ErrKeyNotFound)
		}, 30*time.Second, 20*time.Millisecond)
		race(round)
	}
}

// Over several intervals of an open circuit, on a replicated bucket, three processes
// with deliveries waiting send one probe per interval in all. The interval's end is
// driven by hand (the lease is made to end and every process is made due), so nothing
// depends on timing.
func TestOneProbePerIntervalOnAReplicatedBucket(t *testing.T) {
	c := testenv.StartNATSCluster(t, 3)
	var reqs atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		reqs.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	long := func(s *Settings) {
		circuit(1, time.Hour)(s)
		s.Retry.MaxElapsedTime = 10 * time.Hour
		s.DeadLetterStream.Replicas = 3
	}
	var procs []*proc
	for range 3 {
		procs = append(procs, startProcAt(t, c.URL(), long))
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	// The first failure opens the circuit everywhere.
	wg.Add(1)
	go func() {
		defer wg.Done()
		procs[0].e.Deliver(ctx, Request{Who: "agent", Project: "p", Target: srv.URL, Body: []byte(`{}`)})
	}()
	for _, p := range procs {
		require.Eventually(t, func() bool { return p.state("p", srv.URL) == stateOpen }, 20*time.Second, 5*time.Millisecond)
	}
	require.EqualValues(t, 1, reqs.Load())
	for _, p := range procs[1:] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.e.Deliver(ctx, Request{Who: "agent", Project: "p", Target: srv.URL, Body: []byte(`{}`)})
		}()
	}
	tg := procs[0].e.targets.get("p", srv.URL)
	procs[0].e.targets.put(tg)
	kv := procs[0].e.share.bucket()
	key := leaseKey(tg.key)
	// held: every process holds the target for most of the hour again, with no probe out.
	held := func(p *proc) bool {
		tg := p.e.targets.get("p", srv.URL)
		defer p.e.targets.put(tg)
		tg.mu.Lock()
		defer tg.mu.Unlock()
		return !tg.probing && tg.state == stateOpen && time.Until(tg.until) > 30*time.Minute
	}
	for round := 1; round <= 6; round++ {
		if e, err := kv.Get(ctx, key); err == nil {
			require.NoError(t, kv.Delete(ctx, key, jetstream.LastRevision(e.Revision())))
		}
		for _, p := range procs {
			p.due("p", srv.URL)
		}
		require.Eventually(t, func() bool {
			if reqs.Load() < int32(1+round) {
				return false
			}
			for _, p := range procs {
				if !held(p) {
					return false
				}
			}
			return true
		}, 30*time.Second, 5*time.Millisecond, "round %d: the probe failed and every process holds the target again", round)
		require.EqualValues(t, 1+round, reqs.Load(), "round %d: one probe in all", round)
	}
}

// A 429 storm on a throttled target (every delivery in flight answered 429 with a
// Retry-After, each moving the end of the wait a little) is not a write to the bucket,
// fanned out to every process, per failed delivery: only a move past a tenth of the wait
// is shared.
func TestA429StormIsNotAWritePerResponse(t *testing.T) {
	n := testenv.StartNATS(t)
	a := startProc(t, n, circuit(0, time.Second))
	const url = "https://agent.example.com"
	ctx := context.Background()
	ta := a.e.targets.get("p", url)
	defer a.e.targets.put(ta)
	written := func() uint64 {
		require.Eventually(t, func() bool {
			ta.mu.Lock()
			defer ta.mu.Unlock()
			return ta.pending == 0
		}, 10*time.Second, 5*time.Millisecond)
		st, err := a.e.share.bucket().Status(ctx)
		require.NoError(t, err)
		return st.(*jetstream.KeyValueBucketStatus).StreamInfo().State.LastSeq
	}
	throttled := attemptResult{class: classRetryable, status: 429, retryAfter: time.Hour, hasRetryAfter: true}
	a.e.targets.report(ctx, ta, false, throttled)
	first := written()
	for range 100 {
		a.e.targets.report(ctx, ta, false, throttled)
	}
	assert.Equal(t, first, written(), "the stragglers' answers moved the wait by less than a tenth")
	assert.Equal(t, stateThrottled, a.state("p", url))
}

// A process does not keep every target another process saw throttled (a throttle can
// last a year): past maxAdopted targets, one only another process delivered to is not
// created.
func TestAdoptedTargetsAreBounded(t *testing.T) {
	ts := testTargets(t, TargetConfig{})
	for i := range maxAdopted + 10 {
		ts.adopt(sharedEntry{State: sharedThrottled, WaitMS: 1, Project: "p", Origin: fmt.Sprintf("https://h%d.example.com:443", i)}, false, 1, time.Hour, time.Now())
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	assert.Len(t, ts.m, maxAdopted)
}

// A Retry-After longer than the bucket keeps entries (a throttle makes no probe that
// would write it again) is written again before it expires from the bucket, so a process
// starting later still finds it; once over, it is not.
func TestALongThrottleIsRenewedInTheBucket(t *testing.T) {
	n := testenv.StartNATS(t)
	a := startProc(t, n, circuit(0, time.Second))
	const url = "https://agent.example.com"
	ctx := context.Background()
	ta := a.e.targets.get("p", url)
	defer a.e.targets.put(ta)
	kv := a.e.share.bucket()
	key := shareKey("p", targetOrigin(url))
	written := func() (uint64, sharedEntry) {
		require.Eventually(t, func() bool {
			ta.mu.Lock()
			defer ta.mu.Unlock()
			return ta.pending == 0
		}, 10*time.Second, 5*time.Millisecond)
		e, err := kv.Get(ctx, key)
		require.NoError(t, err)
		var got sharedEntry
		require.NoError(t, json.Unmarshal(e.Value(), &got))
		return e.Revision(), got
	}
	a.e.targets.report(ctx, ta, false, attemptResult{class: classRetryable, status: 429, retryAfter: 24 * time.Hour, hasRetryAfter: true})
	first, _ := written()

	a.e.targets.renew(time.Now().Add(renewAfter / 2))
	rev, _ := written()
	assert.Equal(t, first, rev, "written recently: not again")

	later := time.Now().Add(renewAfter + time.Minute)
	a.e.targets.renew(later)
	rev, got := written()
	assert.Greater(t, rev, first, "written again before the bucket's TTL ends")
	assert.Equal(t, sharedThrottled, got.State)
	assert.InDelta(t, (24*time.Hour - renewAfter - time.Minute).Seconds(), got.wait().Seconds(), 60, "what is left of the wait")

	a.e.targets.renew(time.Now().Add(48 * time.Hour))
	again, _ := written()
	assert.Equal(t, rev, again, "over: not written")
}
