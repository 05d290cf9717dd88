package delivery

import (
	"context"
	"fmt"
	"math"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"golang.org/x/time/rate"
)

// A target is one project's view of one origin (scheme, host, port) it sends to: its agent
// endpoint or a destination. Deliveries to a target share its pace, so a target that asks
// to slow down (429 or 503 with Retry-After) or keeps failing is slowed once for all of
// them rather than by each message on its own schedule. The key includes the project: one
// project's slow or failing target never holds up another project's deliveries, even to
// the same origin, and one project cannot make another's requests wait.
//
// The throttle and the circuit are shared by every exporter process through NATS
// (targetshare.go): a Retry-After answered to one process holds the others' deliveries
// too, an open circuit opens everywhere, and one probe per interval goes across all of
// them. max_rate stays per process: N processes send up to N times max_rate. Without
// NATS each process keeps its own state, as if it were alone.

// Throttle reasons and circuit states, the metrics' attribute values.
const (
	throttleRetryAfter  = "retry_after"
	throttleCircuitOpen = "circuit_open"
	throttleMaxRate     = "max_rate"
	circuitOpen         = "open"
	circuitHalfOpen     = "half_open"
	circuitClosed       = "closed"
)

type targetState int

const (
	// stateClosed: every delivery may send.
	stateClosed targetState = iota
	// stateThrottled: the target asked to wait until `until` (Retry-After); then one
	// request goes first, and the rest follow its answer.
	stateThrottled
	// stateOpen: the circuit is open after sustained failure; at `until` one probe goes.
	stateOpen
)

// targets holds the state of every target in use.
type targets struct {
	cfg TargetConfig
	tel Telemetry
	// share is nil while the state is not shared (targetshare.go).
	share atomic.Pointer[targetShare]

	mu sync.Mutex
	m  map[string]*target
	// sweepAt is the size at which idle healthy targets are dropped, so the map is bounded
	// by what is in use or unhealthy, not by every URL ever configured.
	sweepAt int
}

// minSweep is the number of targets kept before any is dropped.
const minSweep = 1024

func newTargets(cfg TargetConfig, tel Telemetry) *targets {
	return &targets{cfg: cfg, tel: tel, m: map[string]*target{}, sweepAt: minSweep}
}

type target struct {
	project string
	origin  string
	// key names the target in the shared bucket (shareKey).
	key string
	cfg TargetConfig
	// limiter is nil without max_rate.
	limiter *rate.Limiter

	// Guarded by targets.mu.
	users int

	mu           sync.Mutex
	state        targetState
	until        time.Time
	probing      bool
	failures     int
	failingSince time.Time
	// changed is closed (and replaced) when a probe ends, waking the deliveries waiting
	// for its answer.
	changed chan struct{}

	// Sharing (targetshare.go). seenRev is the newest revision of the target's entry this
	// process wrote or applied; pending counts its writes not yet made.
	seenRev uint64
	pending int
	// lease is the probe's lease while this process holds it through the bucket.
	lease leaseResult
	// sharedUntil is the end of the wait the others last heard of (written or adopted).
	sharedUntil time.Time
	// sharedAt is when the target's entry was last written or adopted (renew).
	sharedAt time.Time
	// remote: the state is another process's (adopted), not moved by this one's attempts.
	remote bool
	// probeElsewhere: until then another process's probe is presumed out (the lease was
	// its); its answer comes through the bucket, and the lease is asked for again after.
	probeElsewhere time.Time
}

// get returns the target of project's raw URL, held until put.
func (ts *targets) get(project, raw string) *target {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	t := ts.lookup(project, targetOrigin(raw))
	t.users++
	return t
}

// lookup returns the target of project and origin o, creating it. Called with ts.mu.
func (ts *targets) lookup(project, o string) *target {
	key := project + "\x00" + o
	t, ok := ts.m[key]
	if !ok {
		if len(ts.m) >= ts.sweepAt {
			ts.sweep()
		}
		t = &target{project: project, origin: o, key: shareKey(project, o), cfg: ts.cfg, changed: make(chan struct{})}
		if r := ts.cfg.MaxRate; r > 0 {
			t.limiter = rate.NewLimiter(rate.Limit(r), burst(r))
		}
		ts.m[key] = t
	}
	return t
}

func (ts *targets) put(t *target) {
	ts.mu.Lock()
	t.users--
	ts.mu.Unlock()
}

// sweep drops the targets nobody uses that have nothing to remember. Called with ts.mu.
func (ts *targets) sweep() {
	for k, t := range ts.m {
		if t.users == 0 && t.idle() {
			delete(ts.m, k)
		}
	}
	ts.sweepAt = max(minSweep, 2*len(ts.m))
}

func (t *target) idle() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.pending > 0 || t.failures > 0 || t.probing {
		return false
	}
	// Held only by what another process saw, and over: nothing of this process's own to
	// remember, or every process would keep every target another one saw fail.
	if t.state != stateClosed && !(t.remote && !time.Now().Before(t.until)) {
		return false
	}
	// A limiter with spent tokens still paces; dropping it would grant a fresh burst.
	return t.limiter == nil || t.limiter.Tokens() >= float64(t.limiter.Burst())
}

// burst lets a fraction of a request per second still send one request.
func burst(r float64) int {
	return int(max(1, math.Ceil(r)))
}

// waitError says why a delivery stopped waiting for its target: its budget would end
// before the target lets it through.
type waitError struct {
	reason string
	origin string
	until  time.Time
	rate   float64
	probe  time.Duration
}

func (w *waitError) Error() string {
	switch w.reason {
	case throttleRetryAfter:
		return fmt.Sprintf("%s asked to wait until %s (Retry-After)", w.origin, w.until.UTC().Format(time.RFC3339))
	case throttleMaxRate:
		return fmt.Sprintf("waiting for the max rate of %g requests/s to %s", w.rate, w.origin)
	}
	return fmt.Sprintf("the circuit to %s was open after sustained failure (one probe every %s)", w.origin, w.probe)
}

// admit waits until the target lets one request through, or returns a *waitError when
// deadline (the delivery's retry budget) comes first, or ctx's error. probe reports that
// this request is the one that decides the target's state: report must be called with its
// outcome.
func (ts *targets) admit(ctx context.Context, t *target, deadline time.Time) (probe bool, err error) {
	counted := false
	count := func(reason string) {
		if !counted {
			counted = true
			ts.tel.ThrottledWait(ctx, reason)
		}
	}
	for {
		t.mu.Lock()
		now := time.Now()
		state, until, probing, ch := t.state, t.until, t.probing, t.changed
		// Another process's probe decides as this process's own would.
		elsewhere := now.Before(t.probeElsewhere)
		admitted := state == stateClosed
		if !admitted && !probing && !now.Before(until) {
			t.probing, probe, admitted = true, true, true
		}
		t.mu.Unlock()
		if probe {
			// The other processes may be due to probe this target too: one probe goes
			// across all of them. A loser waits for the winner's answer, which the shared
			// state brings, or asks again a little later.
			l := ts.share.Load().lease(ctx, t, state)
			t.mu.Lock()
			if !l.won {
				t.probing, probe = false, false
				t.probeElsewhere = time.Now().Add(l.retry)
				if t.probeElsewhere.After(t.until) {
					t.until = t.probeElsewhere
				}
				t.wake()
				t.mu.Unlock()
				ts.share.Load().logger.Debug("probe left to another exporter process", zap.String("target", t.origin))
				continue
			}
			t.lease = l
			t.mu.Unlock()
		}
		if admitted {
			if probe && state == stateOpen {
				ts.tel.CircuitChange(ctx, circuitHalfOpen)
			}
			break
		}
		reason := throttleRetryAfter
		if state == stateOpen {
			reason = throttleCircuitOpen
		}
		count(reason)
		werr := &waitError{reason: reason, origin: t.origin, until: until, probe: t.cfg.Circuit.ProbeInterval}
		// Nothing can let this delivery through before until except a probe's answer.
		if !probing && !elsewhere && until.After(deadline) || !now.Before(deadline) {
			return false, werr
		}
		// While a probe is out its answer decides; otherwise the wait ends at until.
		wait := deadline.Sub(now)
		if !probing {
			wait = min(wait, until.Sub(now))
		}
		tm := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			tm.Stop()
			return false, ctx.Err()
		case <-tm.C:
		case <-ch:
			tm.Stop()
		}
		if !time.Now().Before(deadline) {
			return false, werr
		}
	}
	if t.limiter == nil {
		return probe, nil
	}
	r := t.limiter.Reserve()
	d := r.Delay()
	if d == 0 {
		return probe, nil
	}
	count(throttleMaxRate)
	if d > time.Until(deadline) {
		r.Cancel()
		ts.release(t, probe)
		return false, &waitError{reason: throttleMaxRate, origin: t.origin, rate: t.cfg.MaxRate}
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		r.Cancel()
		ts.release(t, probe)
		return false, ctx.Err()
	case <-tm.C:
	}
	return probe, nil
}

// release gives up a probe that was not sent: the next waiting delivery takes it.
func (ts *targets) release(t *target, probe bool) {
	if !probe {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.probing = false
	ts.unlease(t, false)
	t.wake()
}

// wake tells the waiting deliveries to look again. Called with t.mu.
func (t *target) wake() {
	close(t.changed)
	t.changed = make(chan struct{})
}

// report updates the target with how an attempt ended, and says whether its circuit
// opened or closed (circuitOpen, circuitClosed, or ""). Only a probe's answer lifts a
// throttle or closes a circuit: a request sent before the target slowed down says
// nothing about whether it recovered.
func (ts *targets) report(ctx context.Context, t *target, probe bool, a attemptResult) string {
	t.mu.Lock()
	now := time.Now()
	before, beforeUntil := t.state, t.until
	answered := a.status != 0
	nothingLearnt := a.class == classAborted || a.class == classFinal && !answered
	switch {
	case nothingLearnt:
		// Never reached the target (shutdown, refused address): nothing learnt.
		if probe {
			t.probing = false
		}
	case a.class == classOK || a.class == classFinal:
		// The target answered: it is up, whatever it thought of the request.
		t.failures = 0
		if probe {
			t.probing = false
			// A throttle or failure another process recorded while the probe was out is
			// newer than this answer: the close's compare-and-set keeps it in the bucket,
			// and this process keeps it too rather than send at full speed meanwhile.
			if !(t.lease.shared && t.seenRev > t.lease.base && t.state != stateClosed && now.Before(t.until)) {
				t.state = stateClosed
			}
		}
	default:
		t.failed(now, probe, a)
	}
	if probe {
		t.wake()
	}
	after := t.state
	ts.shareReport(t, probe, !nothingLearnt, before, beforeUntil, now)
	t.mu.Unlock()
	switch {
	case after == stateOpen && (before != stateOpen || probe):
		ts.tel.CircuitChange(ctx, circuitOpen)
		if before != stateOpen {
			return circuitOpen
		}
	case after == stateClosed && before == stateOpen:
		ts.tel.CircuitChange(ctx, circuitClosed)
		return circuitClosed
	}
	return ""
}

// shareReport tells the other processes what an attempt changed. Called with t.mu.
func (ts *targets) shareReport(t *target, probe, sent bool, before targetState, beforeUntil, now time.Time) {
	s := ts.share.Load()
	if s == nil {
		return
	}
	switch {
	case t.state != stateClosed && (t.state != before || probe && t.until.After(beforeUntil) || t.until.Sub(t.sharedUntil) > max(time.Second, t.until.Sub(now)/10)):
		// Each 429 straggler of a throttled target moves its end a little: the others
		// hear of a move only past a tenth of the wait (a second at least), not of every
		// answer, which in a storm was a write per failed delivery fanned out to every
		// process.
		s.publish(t, t.state, t.until.Sub(now))
	case probe && t.state == stateClosed && before != stateClosed && t.lease.shared:
		// Only a probe's answer lifts the others' throttle or circuit, and only one sent
		// after everything the bucket recorded (the lease's base revision).
		s.publishClose(t, t.lease.base)
	}
	if probe {
		ts.unlease(t, sent && t.state == stateOpen)
	}
}

// unlease ends this process's hold of t's probe lease. An open circuit's lease, after a
// probe that failed, is kept until it ends by itself: that is the interval for everyone.
// Otherwise it is given back at once, so a throttled target's next probe waits for the
// Retry-After only, and a probe that was never sent leaves its turn to the others.
// Called with t.mu.
func (ts *targets) unlease(t *target, keep bool) {
	l := t.lease
	t.lease = leaseResult{}
	if l.shared && !keep {
		ts.share.Load().unlease(t, l.rev)
	}
}

// failed records a retryable failure. Called with t.mu.
func (t *target) failed(now time.Time, probe bool, a attemptResult) {
	t.remote = false
	// A 429 is the target pacing us, not failing.
	if a.status != 429 {
		if t.failures == 0 {
			t.failingSince = now
		}
		t.failures++
	}
	c := t.cfg.Circuit
	if c.Failures > 0 && t.failures >= c.Failures && now.Sub(t.failingSince) >= c.MinDuration {
		// Stragglers sent before the circuit opened do not push the next probe back.
		if t.state != stateOpen || probe {
			next := c.ProbeInterval
			if a.hasRetryAfter {
				// A probe sooner than the target asked would only be refused again.
				next = max(next, a.retryAfter)
			}
			t.state, t.until = stateOpen, now.Add(next)
		}
		if probe {
			t.probing = false
		}
		return
	}
	if a.hasRetryAfter && (a.status == 429 || a.status == 503) {
		if t.state != stateOpen {
			t.state = stateThrottled
		}
		if until := now.Add(a.retryAfter); until.After(t.until) {
			t.until = until
		}
	} else if probe {
		// Failing without asking to wait: each delivery's own backoff paces it again.
		t.state = stateClosed
	}
	if probe {
		t.probing = false
	}
}

// isOpen reports whether the circuit is open, for the reason of a delivery whose budget
// ended meanwhile.
func (t *target) isOpen() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.state == stateOpen
}

// targetOrigin is the part of a URL that names the target: scheme, host and port, with
// the scheme's default port made explicit and case folded, so spellings of one origin
// share their state. A URL that does not parse is its own target (its delivery fails
// before any attempt).
func targetOrigin(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "invalid:" + raw
	}
	scheme := strings.ToLower(u.Scheme)
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if port == "" {
		switch scheme {
		case "https":
			port = "443"
		case "http":
			port = "80"
		}
	}
	return scheme + "://" + net.JoinHostPort(host, port)
}
