package agentexporter

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

	"github.com/otelcol-svc/otelcol-svc/components/streams"
)

// TargetsBucket holds the throttle and circuit of every target that is not closed, so the
// exporter processes slow down and probe a target together (issue 17: a circuit "costs
// one request per interval, not one per message", however many processes deliver).
//
// Why a KV bucket watched by every process rather than asking it before each request:
// the delivery path never waits on NATS. A process writes when its target's state moves
// (in the background), every process applies what the others wrote as it arrives, and
// only the probe, once per interval, makes a round trip to take the probe lease. A lost
// write costs what sharing saves (the others probe on their own), never a delivery.
const TargetsBucket = "svc-targets"

// targetsTTL lets entries of targets nobody delivers to any more go; a throttle or an
// interval outlasting it is renewed by the next failed probe.
const targetsTTL = time.Hour

// Shared states, the entries' "state".
const (
	sharedThrottled = "throttled"
	sharedOpen      = "open"
	sharedClosed    = "closed"
)

// sharedEntry is a target's state as one process last saw it change. Project and origin
// let a process that has not delivered to the target yet create it; the key (a hash of
// the origin) must agree with them.
type sharedEntry struct {
	State   string    `json:"state"`
	Until   time.Time `json:"until,omitzero"`
	By      string    `json:"by"`
	At      time.Time `json:"at"`
	Project string    `json:"project"`
	Origin  string    `json:"origin"`
}

// probeLease is the entry "<key>.probe": who sends the target's next probe, and until
// when the others leave it to them.
type probeLease struct {
	Until time.Time `json:"until"`
	By    string    `json:"by"`
}

// shareKey names a target in the bucket: KV keys allow only [-/_=.a-zA-Z0-9] and the
// origin has ':' (and may be long), so it is hashed; project ids are already safe.
func shareKey(project, origin string) string {
	sum := sha256.Sum256([]byte(origin))
	return project + "." + hex.EncodeToString(sum[:])[:32]
}

// decodeShared reads an entry another process wrote; ok is false for anything this
// process should not apply (undecodable, unknown state, key not matching its target).
func decodeShared(key string, value []byte) (sharedEntry, bool) {
	var e sharedEntry
	if err := json.Unmarshal(value, &e); err != nil {
		return e, false
	}
	switch e.State {
	case sharedThrottled, sharedOpen:
		if e.Until.IsZero() {
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
	// id names this process in the entries, so it skips its own.
	id       string
	logger   *zap.Logger
	ts       *targets
	probeTTL time.Duration

	mu sync.Mutex
	kv jetstream.KeyValue

	puts   chan sharedPut
	cancel context.CancelFunc
	done   sync.WaitGroup
	// down is set while the bucket cannot be used; the owner is told once per outage.
	down atomic.Bool
}

type sharedPut struct {
	key   string
	value []byte
}

// startShare shares ts's state through the bucket until stop. attemptTimeout bounds how
// long the others leave a throttled target to the process that took its probe.
func startShare(ts *targets, js jetstream.JetStream, connected func() bool, replicas int, attemptTimeout time.Duration, logger *zap.Logger) *targetShare {
	var id [8]byte
	_, _ = rand.Read(id[:])
	s := &targetShare{js: js, connected: connected, replicas: max(replicas, 1), id: hex.EncodeToString(id[:]),
		logger: logger, ts: ts, probeTTL: attemptTimeout, puts: make(chan sharedPut, 256)}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	s.done.Add(2)
	go func() { defer s.done.Done(); s.watchLoop(ctx) }()
	go func() { defer s.done.Done(); s.putLoop(ctx) }()
	ts.share = s
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

// publish tells the other processes that t moved to state (until its until) at at. It
// never waits: when NATS is slow the write is dropped, and the others go on with their
// own state.
func (s *targetShare) publish(t *target, state targetState, until, at time.Time) {
	if s == nil || s.bucket() == nil {
		return
	}
	project, _, _ := strings.Cut(t.key, ".")
	e := sharedEntry{State: sharedClosed, By: s.id, At: at, Project: project, Origin: t.origin}
	switch state {
	case stateThrottled:
		e.State, e.Until = sharedThrottled, until
	case stateOpen:
		e.State, e.Until = sharedOpen, until
	}
	v, err := json.Marshal(e)
	if err != nil {
		return
	}
	select {
	case s.puts <- sharedPut{key: t.key, value: v}:
	default:
		s.logger.Debug("shared target state not written: too many pending writes", zap.String("target", t.origin))
	}
}

const shareWriteTimeout = 2 * time.Second

func (s *targetShare) putLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case p := <-s.puts:
			kv := s.bucket()
			if kv == nil {
				continue
			}
			pctx, cancel := context.WithTimeout(ctx, shareWriteTimeout)
			if _, err := kv.Put(pctx, p.key, p.value); err != nil {
				s.logger.Debug("shared target state not written", zap.Error(err))
			}
			cancel()
		}
	}
}

// leaseTimeout bounds the one round trip a probe makes: past it the probe goes anyway,
// as it would without sharing.
const leaseTimeout = 500 * time.Millisecond

// lease takes the probe of t, in state, across processes. won is false when another
// process holds it; until is then when its lease ends. Whenever the bucket cannot answer
// the probe is this process's, as without sharing.
func (s *targetShare) lease(ctx context.Context, t *target, state targetState) (until time.Time, won bool) {
	kv := s.bucket()
	if kv == nil || !s.connected() {
		return time.Time{}, true
	}
	ttl := s.probeTTL
	if state == stateOpen {
		ttl = t.cfg.Circuit.ProbeInterval
	}
	ttl = max(ttl, time.Second)
	ctx, cancel := context.WithTimeout(ctx, leaseTimeout)
	defer cancel()
	now := time.Now()
	mine, err := json.Marshal(probeLease{Until: now.Add(ttl), By: s.id})
	if err != nil {
		return time.Time{}, true
	}
	key := t.key + ".probe"
	got, err := kv.Get(ctx, key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		_, err = kv.Create(ctx, key, mine)
	case err != nil:
		return time.Time{}, true
	default:
		var l probeLease
		if json.Unmarshal(got.Value(), &l) == nil && l.By != s.id && now.Before(l.Until) {
			return l.Until, false
		}
		_, err = kv.Update(ctx, key, mine, got.Revision())
	}
	switch {
	case err == nil:
		return now.Add(ttl), true
	case errors.Is(err, jetstream.ErrKeyExists) || isWrongLastSequence(err):
		// Another process took it between our read and write.
		return now.Add(ttl), false
	}
	return time.Time{}, true
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
			s.logger.Warn("target throttles and circuits are not shared with the other exporter processes (NATS unavailable): each process paces its targets on its own until it is back",
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
	kv, err := s.js.KeyValue(ctx, TargetsBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = s.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket: TargetsBucket, Description: "otelcol-svc throttles and open circuits of agent and destination targets, shared by the exporter processes",
			History: 1, TTL: targetsTTL, Storage: jetstream.FileStorage, Replicas: s.replicas,
		})
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = s.js.KeyValue(ctx, TargetsBucket)
		}
	}
	if err != nil {
		return fmt.Errorf("bucket %s: %w", TargetsBucket, err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// "*.*": the targets' entries, not their probe leases ("<key>.probe").
	w, err := kv.Watch(wctx, "*.*")
	if err != nil {
		return fmt.Errorf("watch of bucket %s: %w", TargetsBucket, err)
	}
	defer func() { _ = w.Stop() }()
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
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
			if !s.connected() {
				return errors.New("NATS disconnected")
			}
		case e, ok := <-w.Updates():
			if !ok {
				return fmt.Errorf("watch of bucket %s closed", TargetsBucket)
			}
			if e == nil || e.Operation() != jetstream.KeyValuePut {
				continue
			}
			se, ok := decodeShared(e.Key(), e.Value())
			if !ok {
				s.logger.Debug("shared target state ignored: not an entry this version reads", zap.String("key", e.Key()))
				continue
			}
			if se.By != s.id {
				s.ts.adopt(se, time.Now())
			}
		}
	}
}

// adopt applies what another process saw of a target: a throttle or open circuit is taken
// as is, with its until when it is newer than this process's state or later; a closed
// circuit only when its probe answered after this process's own state last moved.
func (ts *targets) adopt(e sharedEntry, now time.Time) {
	if e.State != sharedClosed && !e.Until.After(now) {
		return // over already (an old entry replayed when the watch starts)
	}
	ts.mu.Lock()
	key := e.Project + "\x00" + e.Origin
	t, ok := ts.m[key]
	if !ok && e.State == sharedClosed {
		ts.mu.Unlock()
		return // nothing here to lift
	}
	if !ok {
		t = ts.lookup(e.Project, e.Origin)
	}
	ts.mu.Unlock()

	t.mu.Lock()
	defer t.mu.Unlock()
	switch e.State {
	case sharedClosed:
		if t.state != stateClosed && e.At.After(t.changedAt) {
			t.state, t.failures = stateClosed, 0
			t.wake()
		}
	case sharedOpen, sharedThrottled:
		if e.State == sharedOpen {
			t.state = stateOpen
		} else if t.state == stateClosed {
			t.state = stateThrottled
		}
		switch {
		case e.At.After(t.changedAt):
			// Newer than anything this process saw, its until stands, even an earlier
			// one: a process that lost the probe lease waits for the lease to end, and
			// the winner's answer says when to try again.
			t.until, t.changedAt = e.Until, e.At
			t.wake()
		case e.Until.After(t.until):
			t.until = e.Until
		}
	}
}
