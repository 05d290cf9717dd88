package delivery

import (
	"context"
	"errors"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func testTargets(t *testing.T, cfg TargetConfig) *targets {
	t.Helper()
	return newTargets(cfg, nopTelemetry{})
}

// nopTelemetry records nothing: these tests read the targets' state, not the metrics
// (the exporters' tests read those).
type nopTelemetry struct{}

func (nopTelemetry) Attempt(context.Context, string, string) {}
func (nopTelemetry) ThrottledWait(context.Context, string)   {}
func (nopTelemetry) CircuitChange(context.Context, string)   {}
func (nopTelemetry) ObserveLog(_, _, _ func() int64) error   { return nil }

func TestTargetOrigin(t *testing.T) {
	for raw, want := range map[string]string{
		"https://Agent.Example.com/hook?token=x":   "https://agent.example.com:443",
		"https://agent.example.com:443/other":      "https://agent.example.com:443",
		"HTTP://u:p@10.0.0.1:8080/a":               "http://10.0.0.1:8080",
		"http://[::1]/x":                           "http://[::1]:80",
		"https://hooks.slack.com/services/T0/B0/s": "https://hooks.slack.com:443",
	} {
		assert.Equal(t, want, targetOrigin(raw), raw)
	}
	assert.True(t, strings.HasPrefix(targetOrigin("not a url"), "invalid:"))
}

// Origins are built from user URLs: whatever the input, the result names no path, query
// or credentials, and two spellings of one origin agree.
func FuzzTargetOrigin(f *testing.F) {
	for _, s := range []string{"https://a.example/x?t=1", "http://u:p@[::1]:80/", "https://A.example:443", "::", "http://%zz"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		o := targetOrigin(raw)
		if strings.HasPrefix(o, "invalid:") {
			return
		}
		u, err := url.Parse(raw)
		require.NoError(t, err)
		assert.NotContains(t, o, "?")
		assert.NotContains(t, o, "@")
		if u.Scheme != "" {
			// (Delivery refuses a URL without a scheme before it needs a target.)
			assert.Equal(t, o, targetOrigin(strings.ToUpper(u.Scheme)+"://"+u.Host+"/else?q=1"), "the origin alone names the target")
		}
	})
}

func TestTargetsAreKeyedByProjectAndOrigin(t *testing.T) {
	ts := testTargets(t, TargetConfig{})
	a := ts.get("p_a", "https://agent.example.com/one")
	assert.Same(t, a, ts.get("p_a", "https://AGENT.example.com:443/two?x=1"), "one origin, one target")
	assert.NotSame(t, a, ts.get("p_b", "https://agent.example.com/one"), "another project's target is its own")
	assert.NotSame(t, a, ts.get("p_a", "https://agent.example.com:8443/one"), "another port is another target")
}

func TestIdleTargetsAreDroppedUnhealthyOnesKept(t *testing.T) {
	ts := testTargets(t, TargetConfig{Circuit: CircuitConfig{Failures: 1, ProbeInterval: time.Hour}})
	sick := ts.get("p", "https://sick.example")
	ts.report(context.Background(), sick, false, attemptResult{class: classRetryable, status: 500})
	ts.put(sick)
	held := ts.get("p", "https://held.example")
	for i := range 2 * minSweep {
		ts.put(ts.get("p", "https://h"+strconv.Itoa(i)+".example"))
	}
	ts.mu.Lock()
	n := len(ts.m)
	_, sickKept := ts.m["p\x00https://sick.example:443"]
	_, heldKept := ts.m["p\x00https://held.example:443"]
	ts.mu.Unlock()
	assert.LessOrEqual(t, n, minSweep+1, "bounded by what is in use or unhealthy")
	assert.True(t, sickKept, "an open circuit is remembered")
	assert.True(t, heldKept, "a target in use is kept")
	ts.put(held)
}

// After a 429 with Retry-After, deliveries wait for the target, not each on its own
// schedule: one goes first when the time is up, the others follow its answer.
func TestRetryAfterHoldsEveryDeliveryAndOneGoesFirst(t *testing.T) {
	ts := testTargets(t, TargetConfig{})
	tg := ts.get("p", "https://agent.example.com")
	ctx := context.Background()
	probe, err := ts.admit(ctx, tg, time.Now().Add(time.Minute))
	require.NoError(t, err)
	require.False(t, probe, "a healthy target lets everyone through")
	ts.report(ctx, tg, false, attemptResult{class: classRetryable, status: 429, retryAfter: 200 * time.Millisecond, hasRetryAfter: true})

	var admitted, probes atomic.Int32
	release := make(chan struct{})
	var wg sync.WaitGroup
	for range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			probe, err := ts.admit(ctx, tg, time.Now().Add(time.Minute))
			assert.NoError(t, err)
			admitted.Add(1)
			if probe {
				probes.Add(1)
				<-release
				ts.report(ctx, tg, true, attemptResult{class: classOK, status: 200})
			}
		}()
	}
	require.Eventually(t, func() bool { return admitted.Load() == 1 }, 5*time.Second, time.Millisecond, "the wait ends for one")
	assert.Equal(t, int32(1), probes.Load(), "the first is the probe")
	close(release)
	wg.Wait()
	assert.Equal(t, int32(5), admitted.Load(), "its success lets the rest through")
	assert.Equal(t, int32(1), probes.Load())
}

func TestWaitBeyondTheBudgetEndsAtOnce(t *testing.T) {
	ts := testTargets(t, TargetConfig{})
	tg := ts.get("p", "https://agent.example.com")
	ts.report(context.Background(), tg, false, attemptResult{class: classRetryable, status: 503, retryAfter: time.Hour, hasRetryAfter: true})
	_, err := ts.admit(context.Background(), tg, time.Now().Add(time.Minute))
	var w *waitError
	require.ErrorAs(t, err, &w)
	assert.Contains(t, w.Error(), "https://agent.example.com:443 asked to wait until")
}

func TestCircuitOpensAfterSustainedFailureAndAProbeClosesIt(t *testing.T) {
	ts := testTargets(t, TargetConfig{Circuit: CircuitConfig{Failures: 3, MinDuration: 50 * time.Millisecond, ProbeInterval: 100 * time.Millisecond}})
	tg := ts.get("p", "https://agent.example.com")
	ctx := context.Background()
	fail := attemptResult{class: classRetryable, reason: "timeout after 10s"}
	for range 5 {
		ts.report(ctx, tg, false, fail)
	}
	assert.False(t, tg.isOpen(), "many failures in an instant are not sustained failure")
	require.Eventually(t, func() bool {
		ts.report(ctx, tg, false, fail)
		return tg.isOpen()
	}, 5*time.Second, 10*time.Millisecond)

	_, err := ts.admit(ctx, tg, time.Now().Add(10*time.Millisecond))
	var w *waitError
	require.ErrorAs(t, err, &w, "an open circuit sends nothing before its probe")
	assert.Contains(t, w.Error(), "the circuit to https://agent.example.com:443 was open")

	probe, err := ts.admit(ctx, tg, time.Now().Add(time.Minute))
	require.NoError(t, err)
	require.True(t, probe, "after the interval one request goes")
	ts.report(ctx, tg, true, fail)
	assert.True(t, tg.isOpen(), "a failed probe opens it for another interval")
	_, err = ts.admit(ctx, tg, time.Now().Add(10*time.Millisecond))
	require.ErrorAs(t, err, &w, "no probe before the interval")

	probe, err = ts.admit(ctx, tg, time.Now().Add(time.Minute))
	require.NoError(t, err)
	require.True(t, probe)
	ts.report(ctx, tg, true, attemptResult{class: classFinal, status: 400})
	assert.False(t, tg.isOpen(), "any answer closes it: the target is up")
	probe, err = ts.admit(ctx, tg, time.Now().Add(time.Minute))
	require.NoError(t, err)
	assert.False(t, probe)
}

func TestAProbeAskedToWaitLongerWaits(t *testing.T) {
	ts := testTargets(t, TargetConfig{Circuit: CircuitConfig{Failures: 1, ProbeInterval: time.Millisecond}})
	tg := ts.get("p", "https://agent.example.com")
	ctx := context.Background()
	ts.report(ctx, tg, false, attemptResult{class: classRetryable, status: 502})
	probe, err := ts.admit(ctx, tg, time.Now().Add(time.Minute))
	require.NoError(t, err)
	require.True(t, probe)
	ts.report(ctx, tg, true, attemptResult{class: classRetryable, status: 503, retryAfter: time.Hour, hasRetryAfter: true})
	_, err = ts.admit(ctx, tg, time.Now().Add(time.Minute))
	var w *waitError
	require.ErrorAs(t, err, &w, "the next probe is the target's Retry-After away, not the interval")
	assert.Contains(t, w.Error(), "circuit")
}

func TestAProbeNotSentIsTakenByTheNext(t *testing.T) {
	ts := testTargets(t, TargetConfig{Circuit: CircuitConfig{Failures: 1, ProbeInterval: time.Millisecond}})
	tg := ts.get("p", "https://agent.example.com")
	ctx := context.Background()
	ts.report(ctx, tg, false, attemptResult{class: classRetryable, status: 502})
	require.True(t, tg.isOpen())
	probe, err := ts.admit(ctx, tg, time.Now().Add(time.Minute))
	require.NoError(t, err)
	require.True(t, probe)
	ts.report(ctx, tg, true, attemptResult{class: classAborted})
	probe, err = ts.admit(ctx, tg, time.Now().Add(time.Minute))
	require.NoError(t, err)
	assert.True(t, probe, "shutdown mid-probe does not leave the target stuck")

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = ts.admit(cctx, tg, time.Now().Add(time.Minute))
	assert.True(t, errors.Is(err, context.Canceled), "a waiting delivery ends with its context")
}

func TestMaxRateWaitsWithinTheBudget(t *testing.T) {
	ts := testTargets(t, TargetConfig{MaxRate: 0.5})
	tg := ts.get("p", "https://agent.example.com")
	ctx := context.Background()
	_, err := ts.admit(ctx, tg, time.Now().Add(time.Minute))
	require.NoError(t, err, "the first request is within the burst")
	_, err = ts.admit(ctx, tg, time.Now().Add(100*time.Millisecond))
	var w *waitError
	require.ErrorAs(t, err, &w, "the next is 2s away, beyond the budget")
	assert.Contains(t, w.Error(), "max rate of 0.5 requests/s")
}
