package delivery

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/otelcol-svc/otelcol-svc/internal/streams"
)

// TargetsBucket holds the throttle and circuit of every target that is not closed, and
// the probe leases, so the exporter processes slow down and probe a target together: a
// failing target costs one request per interval in all, not one per process.
//
// The delivery path never waits on NATS except for the probe: a process writes when its
// target's state moves (in the background), applies what the others wrote as the watch
// brings it, and makes one round trip per probe to take the probe lease. A lost write or
// an unreachable bucket costs what sharing saves (the processes probe on their own),
// never a delivery.
//
// Why this shape (a first version shared the state with blind writes and raced):
//   - Order is the bucket's revision, never a process's clock. A process applies an
//     entry only when its revision is newer than what it saw of the target; the old one
//     compared "at" times written by different hosts, so a skewed clock made a process
//     ignore a close or take an outdated one.
//   - A close is written by compare-and-set on the revision the prober saw when it took
//     the lease, so it lands only when no process recorded a failure or a throttle while
//     the probe was out; the old blind write could bury such a failure under a close
//     whose probe had been sent before it, and the other processes then sent at full
//     speed to a target that was failing again.
//   - A process never applies a close while its own open or throttle is still on its way
//     to the bucket: that write lands after the close and reopens the target everywhere.
//   - The probe lease is a key created only if missing, with a per-key TTL the server
//     expires: its end is the server's clock, so two processes whose clocks disagree
//     still send one probe per lease. The old lease stored an "until" that each process
//     compared with its own clock.
//   - Waits travel as durations from when the entry is received, not as instants, for
//     the same reason; only an entry replayed when a watch starts is aged by the server's
//     timestamp, so a process whose clock is ahead by S, starting or rebinding during a
//     wait, takes S off it (and drops it if shorter).
const TargetsBucket = "svc-targets"

// targetsTTL lets the entries of targets nobody delivers to any more go. A throttle or
// interval outlasting it makes no probe to write it again meanwhile, so the process that
// recorded it writes it again every renewAfter while it lasts (renew): a process starting
// an hour after a year's Retry-After still finds it.
const (
	targetsTTL = time.Hour
	renewAfter = targetsTTL / 2
	renewCheck = time.Minute
)

// markerTTL is how long an expired lease leaves its marker (per-key TTLs need one).
const markerTTL = time.Minute

// Shared states, the entries' "state".
const (
	sharedThrottled = "throttled"
	sharedOpen      = "open"
	sharedClosed    = "closed"
)

// maxAdopted bounds the targets a process keeps: past it, a target only another process
// delivered to is not created to hold its throttle.
const maxAdopted = 16 * minSweep

// maxSharedWait bounds the wait an entry can impose: anyone who can write to the bucket
// cannot hold a target longer than the longest Retry-After honoured.
const maxSharedWait = maxRetryAfter

// sharedEntry is a target's state as one process last changed it. Project and origin
// let a process that has not delivered to the target yet create it; the key (a hash of
// the origin) must agree with them.
type sharedEntry struct {
	State string `json:"state"`
	// WaitMS is how long from when the entry is written the target is held (throttled or
	// open); a duration, so that no two clocks are compared.
	WaitMS  int64  `json:"wait_ms,omitempty"`
	By      string `json:"by"`
	Project string `json:"project"`
	Origin  string `json:"origin"`
}

func (e sharedEntry) wait() time.Duration {
	if e.WaitMS >= maxSharedWait.Milliseconds() {
		return maxSharedWait
	}
	return time.Duration(e.WaitMS) * time.Millisecond
}

// shareKey names a target in the bucket: KV keys allow only [-/_=.a-zA-Z0-9] and the
// origin has ':' (and may be long), so it is hashed; project ids are already safe.
func shareKey(project, origin string) string {
	sum := sha256.Sum256([]byte(origin))
	return project + "." + hex.EncodeToString(sum[:])[:32]
}

// leaseKey is the probe lease of the target named key. The watch ("*.*") does not see it.
func leaseKey(key string) string { return key + ".probe" }

// decodeShared reads an entry another process wrote; ok is false for anything this
// process should not apply (undecodable, unknown state, key not matching its target).
func decodeShared(key string, value []byte) (sharedEntry, bool) {
	var e sharedEntry
	if err := json.Unmarshal(value, &e); err != nil {
		return e, false
	}
	switch e.State {
	case sharedThrottled, sharedOpen:
		if e.WaitMS <= 0 {
			return e, false
		}
	case sharedClosed:
	default:
		return e, false
	}
	if !streams.ValidProjectID(e.Project) || strings.HasPrefix(e.Origin, "invalid:") || shareKey(e.Project, e.Origin) != key {
		return e, false
	}
	return e, true
}

// targetShare keeps this process's targets and the bucket in step.
type targetShare struct {
	js        jetstream.JetStream
	connected func() bool
	replicas  int
	// id names this process in the entries and leases, so it skips its own.
	id       string
	logger   *zap.Logger
	ts       *targets
	attemptT time.Duration

	mu sync.Mutex
	kv jetstream.KeyValue

	jobs   chan shareJob
	cancel context.CancelFunc
	done   sync.WaitGroup
	// down is set while the bucket cannot be used; the owner is told once per outage.
	down atomic.Bool
}

// shareJob is one write to the bucket, made in order by writeLoop.
type shareJob struct {
	t     *target
	value []byte
	// close: a compare-and-set on base (0: the key must not exist).
	close bool
	base  uint64
	// unlease: delete t's lease if it is still revision base.
	unlease bool
}

// startShare shares ts's state through the bucket until stop. attemptTimeout bounds how
// long the others leave a throttled target to the process that took its probe.
func startShare(ts *targets, js jetstream.JetStream, connected func() bool, replicas int, attemptTimeout time.Duration, logger *zap.Logger) *targetShare {
	var id [8]byte
	_, _ = rand.Read(id[:])
	s := &targetShare{js: js, connected: connected, replicas: max(replicas, 1), id: hex.EncodeToString(id[:]),
		logger: logger, ts: ts, attemptT: attemptTimeout, jobs: make(chan shareJob, 256)}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	s.done.Add(2)
	go func() { defer s.done.Done(); s.watchLoop(ctx) }()
	go func() { defer s.done.Done(); s.writeLoop(ctx) }()
	ts.share.Store(s)
	return s
}

func (s *targetShare) stop() {
	if s == nil {
		return
	}
	s.cancel()
	s.done.Wait()
}

func (s *targetShare) bucket() jetstream.KeyValue {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.kv
}

func (s *targetShare) setBucket(kv jetstream.KeyValue) {
	s.mu.Lock()
	s.kv = kv
	s.mu.Unlock()
}

// usable reports whether the bucket can be asked now; otherwise the process paces alone.
func (s *targetShare) usable() jetstream.KeyValue {
	if s == nil || !s.connected() {
		return nil
	}
	return s.bucket()
}

// publish tells the other processes that t is throttled or open for wait from now. It
// never waits: when NATS is slow the write is dropped, and the others go on with their
// own state. Called with t.mu.
func (s *targetShare) publish(t *target, state targetState, wait time.Duration) {
	if s.usable() == nil {
		return
	}
	t.sharedUntil, t.sharedAt = t.until, time.Now()
	e := sharedEntry{State: sharedThrottled, WaitMS: max(wait.Milliseconds(), 1), By: s.id, Project: t.project, Origin: t.origin}
	if state == stateOpen {
		e.State = sharedOpen
	}
	s.enqueue(t, shareJob{t: t, value: mustJSON(e)})
}

// publishClose tells the others that t's probe, leased on top of revision base, found it
// up. Called with t.mu.
func (s *targetShare) publishClose(t *target, base uint64) {
	e := sharedEntry{State: sharedClosed, By: s.id, Project: t.project, Origin: t.origin}
	s.enqueue(t, shareJob{t: t, value: mustJSON(e), close: true, base: base})
}

// unlease gives back t's lease of revision rev, so that the next probe of a throttled
// target waits for its Retry-After, not for the lease's end. Called with t.mu.
func (s *targetShare) unlease(t *target, rev uint64) {
	s.enqueue(t, shareJob{t: t, unlease: true, base: rev})
}

// enqueue is called with t.mu: pending counts with the state it goes with.
func (s *targetShare) enqueue(t *target, j shareJob) {
	if !j.unlease {
		t.pending++
	}
	select {
	case s.jobs <- j:
	default:
		if !j.unlease {
			t.pending--
		}
		s.logger.Debug("shared target state not written: too many pending writes", zap.String("target", t.origin))
	}
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only plain strings and numbers
	}
	return b
}

const shareWriteTimeout = 2 * time.Second

func (s *targetShare) writeLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case j := <-s.jobs:
			s.write(ctx, j)
		}
	}
}

func (s *targetShare) write(ctx context.Context, j shareJob) {
	var rev uint64
	kv := s.bucket()
	err := errors.New("bucket not bound")
	if kv != nil {
		wctx, cancel := context.WithTimeout(ctx, shareWriteTimeout)
		key := j.t.key
		switch {
		case j.unlease:
			err = kv.Delete(wctx, leaseKey(key), jetstream.LastRevision(j.base))
		case j.close && j.base == 0:
			rev, err = kv.Create(wctx, key, j.value)
		case j.close:
			rev, err = kv.Update(wctx, key, j.value, j.base)
		default:
			rev, err = kv.Put(wctx, key, j.value)
		}
		cancel()
	}
	if err != nil {
		if j.close && lostRace(err) {
			s.logger.Debug("probe's close not shared: another process saw the target fail or throttle while the probe was out",
				zap.String("target", j.t.origin))
		} else if !j.unlease || !lostRace(err) {
			s.logger.Debug("shared target state not written", zap.String("target", j.t.origin), zap.Error(err))
		}
	}
	if j.unlease {
		return
	}
	j.t.mu.Lock()
	j.t.pending--
	j.t.seenRev = max(j.t.seenRev, rev)
	j.t.mu.Unlock()
}

// leaseTimeout bounds the round trips a probe makes: past it the probe goes anyway, as
// it would without sharing.
const leaseTimeout = 500 * time.Millisecond

// lease result.
type leaseResult struct {
	// won: this process sends the probe. shared: through the bucket (a close it finds is
	// then written for the others, on top of base).
	won, shared bool
	base, rev   uint64
	// retry is when to ask again after losing: the holder's answer usually comes first.
	retry time.Duration
}

// lease takes the probe of t, in state, across processes. Whenever the bucket cannot
// answer, the probe is this process's, as without sharing.
func (s *targetShare) lease(ctx context.Context, t *target, state targetState) leaseResult {
	kv := s.usable()
	if kv == nil {
		return leaseResult{won: true}
	}
	// An open circuit's lease lasts the interval and is not given back after a failed
	// probe: whoever probes next, it is an interval later. A throttled target's lasts
	// while its probe can be out (the attempt's timeout), and is given back with the
	// answer, whose Retry-After paces the next.
	ttl := s.attemptT
	if state == stateOpen {
		ttl = t.cfg.Circuit.ProbeInterval
	}
	// Per-key TTLs are whole seconds: rounded up, never shorter than asked.
	ttl = max(time.Second, (ttl + time.Second - 1).Truncate(time.Second))
	ctx, cancel := context.WithTimeout(ctx, leaseTimeout)
	defer cancel()
	t.mu.Lock()
	base := t.seenRev
	t.mu.Unlock()
	key := leaseKey(t.key)
	lost := leaseResult{retry: min(max(ttl/4, 250*time.Millisecond), 5*time.Second)}
	rev, err := kv.Create(ctx, key, []byte(s.id), jetstream.KeyTTL(ttl))
	if err == nil {
		return leaseResult{won: true, shared: true, base: base, rev: rev}
	}
	if !lostRace(err) {
		s.logger.Debug("probe lease not taken; probing as if alone", zap.String("target", t.origin), zap.Error(err))
		return leaseResult{won: true}
	}
	e, gerr := kv.Get(ctx, key)
	if gerr != nil || string(e.Value()) != s.id {
		return lost
	}
	// Ours still (our previous probe answered before it ended): our own interval already
	// paced us. The old lease is given back and taken anew, so that it lasts this probe's
	// ttl, not what is left of the last one, and an unlease of it still queued (a probe
	// released and retried at once) finds a newer revision and cannot end this one.
	if derr := kv.Delete(ctx, key, jetstream.LastRevision(e.Revision())); derr != nil && !lostRace(derr) {
		s.logger.Debug("probe lease not renewed; probing as if alone", zap.String("target", t.origin), zap.Error(derr))
		return leaseResult{won: true}
	}
	rev, err = kv.Create(ctx, key, []byte(s.id), jetstream.KeyTTL(ttl))
	switch {
	case err == nil:
		return leaseResult{won: true, shared: true, base: base, rev: rev}
	case lostRace(err):
		return lost
	}
	s.logger.Debug("probe lease not renewed; probing as if alone", zap.String("target", t.origin), zap.Error(err))
	return leaseResult{won: true}
}

// lostRace reports whether a create or compare-and-set failed because another write came
// first. nats.go maps only some of these to its ErrKeyExists/ErrKeyRevisionMismatch: when
// Create finds a deleted or expired key (the usual state of a lease) it retries on the
// marker's revision and returns the server's error as is, and replicated streams answer
// with 10164 where a single server answers 10071. Read as anything else, a lost race made
// every process probe "as if alone".
func lostRace(err error) bool {
	if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return true
	}
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// watchLoop keeps the bucket watched until ctx ends, binding it again after NATS went
// away (as the configuration mirror does).
func (s *targetShare) watchLoop(ctx context.Context) {
	b := &backoff.ExponentialBackOff{InitialInterval: 100 * time.Millisecond, RandomizationFactor: 0.2,
		Multiplier: 2, MaxInterval: 5 * time.Second}
	b.Reset()
	for ctx.Err() == nil {
		err := s.watch(ctx, b.Reset)
		s.setBucket(nil)
		if ctx.Err() != nil {
			return
		}
		if !s.down.Swap(true) {
			s.logger.Warn("target throttles and circuits are not shared with the other exporter processes (NATS or the bucket unavailable): each process paces its targets on its own until it is back",
				zap.String("bucket", TargetsBucket), zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(b.NextBackOff()):
		}
	}
}

const connCheck = 250 * time.Millisecond

func (s *targetShare) watch(ctx context.Context, bound func()) error {
	if !s.connected() {
		return errors.New("NATS disconnected")
	}
	bctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	kv, err := s.bind(bctx)
	cancel()
	if err != nil {
		return fmt.Errorf("bucket %s: %w", TargetsBucket, err)
	}
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	// "*.*": the targets' entries, not their probe leases ("<key>.probe").
	w, err := kv.Watch(wctx, "*.*")
	if err != nil {
		return fmt.Errorf("watch of bucket %s: %w", TargetsBucket, err)
	}
	// No w.Stop: cancelling wctx unsubscribes in the background, while Stop waits for the
	// consumer's deletion, up to JetStream's 5s timeout when NATS is gone, which delayed
	// the rebind after an outage and a shutdown past the roles' hand-off.
	s.setBucket(kv)
	bound()
	if s.down.Swap(false) {
		s.logger.Info("target throttles and circuits are shared with the other exporter processes again", zap.String("bucket", TargetsBucket))
	}
	// A watch outlives a lost connection (it resumes after), but what was written
	// meanwhile is missed and leases cannot be taken: the process paces on its own until
	// the connection is back and the watch replays the bucket.
	tick := time.NewTicker(connCheck)
	defer tick.Stop()
	renewTick := time.NewTicker(renewCheck)
	defer renewTick.Stop()
	replaying := true
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
			if !s.connected() {
				return errors.New("NATS disconnected")
			}
		case now := <-renewTick.C:
			s.ts.renew(now)
		case e, ok := <-w.Updates():
			if !ok {
				return fmt.Errorf("watch of bucket %s closed", TargetsBucket)
			}
			if e == nil {
				replaying = false
				continue
			}
			if e.Operation() != jetstream.KeyValuePut {
				continue
			}
			se, ok := decodeShared(e.Key(), e.Value())
			if !ok {
				s.logger.Debug("shared target state ignored: not an entry this version reads", zap.String("key", e.Key()))
				continue
			}
			now := time.Now()
			wait := se.wait()
			if replaying {
				// Written before this watch began: only what is left of it.
				wait -= max(0, now.Sub(e.Created()))
			}
			s.ts.adopt(se, se.By == s.id, e.Revision(), wait, now)
		}
	}
}

// Bounds of the bucket: an entry is about 200 bytes, so targetsMaxBytes holds some
// hundred thousand targets; past it writes fail and the processes pace those alone.
const (
	targetsMaxValue = 1024
	targetsMaxBytes = 64 << 20
)

// bind opens the bucket, creating it when missing. An existing bucket keeps its
// replicas (processes configured differently do not flip them), but gets the marker
// setting per-key TTLs (the leases) need, and the entries' age, history and size
// bounds, if it was made without them (by hand, or by an older version).
func (s *targetShare) bind(ctx context.Context) (jetstream.KeyValue, error) {
	cfg := jetstream.KeyValueConfig{
		Bucket: TargetsBucket, Description: "otelcol-svc throttles, open circuits and probe leases of agent and destination targets, shared by the exporter processes",
		History: 1, TTL: targetsTTL, LimitMarkerTTL: markerTTL, Storage: jetstream.FileStorage, Replicas: s.replicas,
		MaxValueSize: targetsMaxValue, MaxBytes: targetsMaxBytes,
	}
	kv, err := s.js.KeyValue(ctx, TargetsBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = s.js.CreateKeyValue(ctx, cfg)
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = s.js.KeyValue(ctx, TargetsBucket)
		}
	}
	if err != nil {
		return nil, err
	}
	st, err := kv.Status(ctx)
	if err != nil {
		return nil, err
	}
	have := st.Config()
	if have.LimitMarkerTTL != 0 && have.TTL == targetsTTL && have.History == 1 &&
		have.MaxValueSize == targetsMaxValue && have.MaxBytes == targetsMaxBytes {
		return kv, nil
	}
	have.LimitMarkerTTL = max(have.LimitMarkerTTL, markerTTL)
	have.TTL, have.History, have.MaxValueSize, have.MaxBytes = targetsTTL, 1, targetsMaxValue, targetsMaxBytes
	return s.js.UpdateKeyValue(ctx, have)
}

// adopt applies an entry of revision rev: a throttle or open circuit holds the target at
// least wait from now; a close lifts it, unless this process has seen a newer revision or
// has its own throttle or open circuit still on the way to the bucket (which will reopen
// the target everywhere). own entries only move the revision seen.
func (ts *targets) adopt(e sharedEntry, own bool, rev uint64, wait time.Duration, now time.Time) {
	ts.mu.Lock()
	key := e.Project + "\x00" + e.Origin
	t, ok := ts.m[key]
	if !ok && len(ts.m) >= ts.sweepAt {
		ts.sweep()
	}
	if !ok && (own || e.State == sharedClosed || wait <= 0 || len(ts.m) >= maxAdopted) {
		ts.mu.Unlock()
		// Nothing here to hold or lift; or so many targets are held already (another
		// process's throttles can last a year) that this one is left to find out itself.
		return
	}
	if !ok {
		t = ts.lookup(e.Project, e.Origin)
	}
	// Locked before ts.mu goes, so a sweep cannot drop the target being held.
	t.mu.Lock()
	ts.mu.Unlock()
	defer t.mu.Unlock()
	if rev <= t.seenRev {
		return
	}
	t.seenRev = rev
	if own {
		return
	}
	switch e.State {
	case sharedClosed:
		if t.state != stateClosed && t.pending == 0 {
			t.state, t.failures = stateClosed, 0
			t.wake()
		}
	case sharedOpen, sharedThrottled:
		if wait <= 0 {
			return
		}
		if t.state == stateClosed && t.failures == 0 {
			t.remote = true
		}
		if e.State == sharedOpen {
			t.state = stateOpen
		} else if t.state == stateClosed {
			t.state = stateThrottled
		}
		if until := now.Add(wait); until.After(t.until) {
			t.until = until
		}
		// Everyone has this one: this process's own later answers publish only a move
		// past it (shareReport).
		t.sharedUntil, t.sharedAt = t.until, now
		t.wake()
	}
}

// renew writes again the entries of this process's own throttles and open circuits that
// outlast the bucket's TTL before they expire from it (another process's are its to
// renew; if it is gone, a process that finds out itself writes them).
func (ts *targets) renew(now time.Time) {
	s := ts.share.Load()
	if s == nil {
		return
	}
	ts.mu.Lock()
	list := make([]*target, 0, len(ts.m))
	for _, t := range ts.m {
		list = append(list, t)
	}
	ts.mu.Unlock()
	for _, t := range list {
		t.mu.Lock()
		if !t.remote && t.state != stateClosed && t.until.After(now) && now.Sub(t.sharedAt) >= renewAfter {
			s.publish(t, t.state, t.until.Sub(now))
		}
		t.mu.Unlock()
	}
}
