package jetstreamreceiver

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/natsclient"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
)

// Idle projects cost no polling. A pull consumer that waits for records keeps a pull
// request open on the server and exchanges heartbeats with it, and each costs goroutines
// here: with one per project and role, 10,000 idle projects kept both busy. So a target
// (a project's raw stream, or a destination's cursor on its output stream) is pulled from
// only while it has records:
//
//   - the jetstream exporter publishes a wake (streams.WakeSubject, core NATS, no payload)
//     after storing records for a project, at most one per project every 100 ms;
//   - a wake, or a check that finds records waiting (a new target, the start, a NATS
//     reconnection, and a slow sweep for wakes that were lost), starts a worker;
//   - a worker that has had no record for idle_timeout asks the server whether anything
//     is pending or unacknowledged; if not, and no wake arrived while it asked, it stops.
//
// The wake covers everything stored within 100 ms after it because a worker that saw it
// waits idle_timeout for records, and one that was stopping sees it (wakeGrace).

// errIdle ends a worker whose target has had nothing to consume for idle_timeout.
var errIdle = errors.New("idle")

// wakeGrace is how recent a wake keeps a stopping worker: more than the exporter's wake
// interval, so a record whose own wake was skipped is covered by the one before it.
const wakeGrace = time.Second

// checkers is how many checks of targets run at once (at start every target is checked).
const checkers = 8

func (r *jsReceiver) wakeKind() string {
	if r.cfg.Consume == ConsumeOutput {
		return streams.WakeOutput
	}
	return streams.WakeRaw
}

// listenForWakes subscribes to the wakes of every project, and sweeps all targets after
// a reconnection (wakes sent while disconnected are lost).
func (r *jsReceiver) listenForWakes() error {
	sub, err := r.nc.Subscribe(streams.WakeSubject(r.wakeKind(), "*"), func(m *nats.Msg) {
		r.onWake(streams.WakeProject(m.Subject))
	})
	if err != nil {
		return err
	}
	// Wakes are tiny; never drop them for a slow handler (a dropped one waits for a sweep).
	_ = sub.SetPendingLimits(-1, 64<<20)
	r.wakes = sub
	// A hook beside the connection's own handler, never SetReconnectHandler: that would
	// replace the handler that reports the component healthy again.
	natsclient.OnReconnect(r.nc, r.sweep)
	return nil
}

func (r *jsReceiver) onWake(project string) {
	if project == "" {
		return
	}
	if r.cfg.Consume != ConsumeOutput {
		r.activate(project)
		return
	}
	p, ok := r.cache.Project(project)
	if !ok {
		return
	}
	for _, s := range p.Sinks {
		r.activate(target{project: project, sink: s.ID}.key())
	}
}

// activate starts a worker for a wanted target that has none, and tells a running one
// that a wake arrived.
func (r *jsReceiver) activate(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if w, ok := r.workers[key]; ok {
		w.woken.Store(time.Now().UnixNano())
		return
	}
	t, ok := r.targets[key]
	if !ok || r.ctx.Err() != nil {
		return
	}
	ctx, cancel := context.WithCancel(r.ctx)
	w := &worker{target: t, cancel: cancel, done: make(chan struct{})}
	w.woken.Store(time.Now().UnixNano())
	r.workers[key] = w
	r.tel.JetstreamActiveConsumers.Add(context.Background(), 1)
	go func() {
		defer close(w.done)
		r.consume(ctx, w)
	}()
	r.settings.Logger.Debug("consuming", t.logFields()...)
}

// retire stops a worker whose target has nothing pending, unless a wake arrived while it
// looked. It reports whether the worker is to end.
func (r *jsReceiver) retire(ctx context.Context, w *worker) bool {
	looked := time.Now()
	busy, err := r.hasWork(ctx, w.target)
	if err != nil || busy {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	key := w.target.key()
	if r.workers[key] != w {
		return true // stopped by reconcile meanwhile
	}
	if time.Unix(0, w.woken.Load()).After(looked.Add(-wakeGrace)) {
		return false
	}
	delete(r.workers, key)
	r.tel.JetstreamActiveConsumers.Add(context.Background(), -1)
	r.settings.Logger.Debug("idle; stopped pulling", w.target.logFields()...)
	return true
}

// hasWork reports whether a target's consumer has records to deliver or unacknowledged
// ones (held by a process, or waiting for redelivery). A consumer that does not exist
// yet is created, so that its cursor starts now (a destination's at its since time).
func (r *jsReceiver) hasWork(ctx context.Context, t target) (bool, error) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	stream, name := streams.RawStream(t.project), r.cfg.Durable
	if t.sink != "" {
		stream, name = streams.OutputStream(t.project), r.destinationConsumer(t)
	}
	c, err := r.js.Consumer(cctx, stream, name)
	if errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) {
		c, err = r.consumer(cctx, t)
	}
	if err != nil {
		return false, err
	}
	info := c.CachedInfo()
	return info.NumPending > 0 || info.NumAckPending > 0, nil
}

// check looks whether a target has records and starts its worker if so.
func (r *jsReceiver) check(key string) {
	r.mu.Lock()
	t, wanted := r.targets[key]
	_, running := r.workers[key]
	r.mu.Unlock()
	if !wanted || running {
		return
	}
	busy, err := r.hasWork(r.ctx, t)
	if err != nil {
		if r.ctx.Err() == nil {
			// Started anyway: the worker retries until NATS answers, then finds out.
			r.settings.Logger.Warn("could not check a consumer; consuming", append(t.logFields(), zap.Error(err))...)
			r.activate(key)
		}
		return
	}
	if busy {
		r.activate(key)
	}
}

func (r *jsReceiver) checkLoop() {
	defer r.wg.Done()
	for {
		key, ok := r.checks.next()
		if !ok {
			return
		}
		r.check(key)
	}
}

// sweep checks every target without a worker.
func (r *jsReceiver) sweep() {
	r.mu.Lock()
	keys := make([]string, 0, len(r.targets))
	for key := range r.targets {
		if _, running := r.workers[key]; !running {
			keys = append(keys, key)
		}
	}
	r.mu.Unlock()
	for _, key := range keys {
		r.checks.add(key)
	}
}

// sweepLoop finds records whose wake was lost (a publisher other than the exporter, a
// process that was down): every sweep_interval, one consumer info per idle target.
func (r *jsReceiver) sweepLoop() {
	defer r.wg.Done()
	if r.cfg.SweepInterval <= 0 {
		return
	}
	tick := time.NewTicker(r.cfg.SweepInterval)
	defer tick.Stop()
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-tick.C:
			r.sweep()
		}
	}
}

// checkQueue holds the targets waiting for a check, each once however often it is added.
type checkQueue struct {
	mu     sync.Mutex
	keys   []string
	queued map[string]bool
	closed bool
	ready  chan struct{}
}

func newCheckQueue() *checkQueue {
	return &checkQueue{queued: map[string]bool{}, ready: make(chan struct{}, 1)}
}

func (q *checkQueue) add(key string) {
	q.mu.Lock()
	if q.closed || q.queued[key] {
		q.mu.Unlock()
		return
	}
	q.queued[key] = true
	q.keys = append(q.keys, key)
	q.signal()
	q.mu.Unlock()
}

// signal wakes one waiting checker; called with mu held, as close closes ready under it.
func (q *checkQueue) signal() {
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// next waits for a key; false once the queue is closed.
func (q *checkQueue) next() (string, bool) {
	for {
		q.mu.Lock()
		if q.closed {
			q.mu.Unlock()
			return "", false
		}
		if len(q.keys) > 0 {
			key := q.keys[0]
			q.keys[0] = ""
			q.keys = q.keys[1:]
			delete(q.queued, key)
			if len(q.keys) > 0 {
				q.signal() // another checker may take the next one
			}
			q.mu.Unlock()
			return key, true
		}
		q.mu.Unlock()
		<-q.ready
	}
}

func (q *checkQueue) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	close(q.ready)
}
