package jetstreamreceiver

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/receiverhelper"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/mirrorcache"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelinecfg"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelinedata"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/principal"
	"github.com/otelcol-svc/otelcol-svc/internal/deliverylog"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/pipelinectx"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
	"github.com/otelcol-svc/otelcol-svc/receiver/jetstreamreceiver/internal/metadata"
)

type jsReceiver struct {
	cfg      *Config
	settings receiver.Settings
	next     consumer.Logs
	obs      *receiverhelper.ObsReport

	nc    *nats.Conn
	js    jetstream.JetStream
	cache *mirrorcache.Cache
	// pipelines compiles project configurations, to pause a project whose expressions do not compile.
	pipelines *pipelinecfg.Cache

	// ctx ends when Shutdown begins: workers stop taking batches, and the exporters stop
	// retrying (pipelinectx.WithDrain). hard ends drain_timeout later: batches still in
	// the pipeline are interrupted and handed back.
	ctx        context.Context
	cancel     context.CancelFunc
	hard       context.Context
	hardCancel context.CancelFunc
	wg         sync.WaitGroup
	kick       chan struct{}
	unsub      func()
	wakes      *nats.Subscription
	checks     *checkQueue

	mu sync.Mutex
	// targets is everything this receiver should consume; workers the targets it is
	// pulling from now (activity.go): a target without records has no worker.
	targets map[string]target
	workers map[string]*worker
	paused  map[string]string // project -> reason, to log a pause once

	tel *metadata.TelemetryBuilder

	// ledger counts settled batches (ledger.go); opened on first use.
	ledgerMu sync.Mutex
	ledger   *deliverylog.Ledger
	// started holds, per destination target, the creation time of the cursor whose
	// start this process has seen recorded in the ledger (ledger.go).
	started sync.Map

	// backlogs are the backlog runs of this process, by project (backlog.go), under mu;
	// backlogBucket is where they report, opened on first use.
	backlogs      map[string]*backlogRun
	backlogMu     sync.Mutex
	backlogBucket jetstream.KeyValue
}

type worker struct {
	target target
	cancel context.CancelFunc
	done   chan struct{}
	// woken is when a wake last arrived for the target (unix nanoseconds): a worker that
	// found nothing to do stays if a wake came while it looked (activity.go).
	woken atomic.Int64
}

// target is what one worker consumes: a project's raw stream, or one destination's cursor
// on a project's output stream.
type target struct {
	project string
	sink    string    // output mode: the destination's sink id
	since   time.Time // a new cursor (or pipeline consumer) starts here (NATS server's clock); zero: new records
	// urlSet (raw mode) is since when the project's agent URL was last set (agent_since,
	// as since), zero when the entry does not say: an older consumer is an earlier URL's.
	urlSet time.Time
	// start (raw mode) is the pipeline consumer's start rule, shared with the backlog
	// preview (mirror.PipelineStart).
	start mirror.PipelineStart
}

func (t target) key() string {
	if t.sink == "" {
		return t.project
	}
	return t.project + "/" + t.sink
}

func (t target) logFields() []zap.Field {
	if t.sink == "" {
		return []zap.Field{zap.String("project_id", t.project)}
	}
	return []zap.Field{zap.String("project_id", t.project), zap.String("sink_id", t.sink)}
}

func newReceiver(cfg *Config, set receiver.Settings, next consumer.Logs) (*jsReceiver, error) {
	obs, err := receiverhelper.NewObsReport(receiverhelper.ObsReportSettings{
		ReceiverID: set.ID, Transport: "jetstream", ReceiverCreateSettings: set,
	})
	if err != nil {
		return nil, err
	}
	tel, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	return &jsReceiver{
		cfg: cfg, settings: set, next: next, obs: obs,
		targets: map[string]target{}, workers: map[string]*worker{}, paused: map[string]string{}, backlogs: map[string]*backlogRun{},
		tel: tel,
	}, nil
}

func (r *jsReceiver) Start(_ context.Context, host component.Host) error {
	cache, err := mirrorcache.FromHost(host, r.cfg.Mirror)
	if err != nil {
		return err
	}
	nc, js, err := r.cfg.NATS.ConnectJetStream(host, "otelcol-svc jetstream receiver "+r.settings.ID.String(), r.settings.Logger)
	if err != nil {
		return err
	}
	r.nc, r.js, r.cache = nc, js, cache
	r.pipelines = pipelinecfg.NewCache(cache)
	// Pipelines stored before a limit existed and now over it pause; the cache names them once per version.
	r.pipelines.SetLogger(r.settings.Logger)
	r.ctx, r.cancel = context.WithCancel(context.Background())
	r.hard, r.hardCancel = context.WithCancel(context.Background())
	r.kick = make(chan struct{}, 1)
	r.checks = newCheckQueue()
	if err := r.listenForWakes(); err != nil {
		r.pipelines.Close()
		nc.Close()
		return err
	}
	r.unsub = cache.Subscribe(func(c mirrorcache.Change) {
		if c.Bucket == mirror.BucketProjects {
			r.poke()
		}
	})
	r.wg.Add(2 + checkers)
	go r.reconcileLoop()
	go r.sweepLoop()
	for range checkers {
		go r.checkLoop()
	}
	r.poke()
	return nil
}

// Shutdown stops taking records at once and hands back (nak, for immediate redelivery to
// another process) everything fetched ahead. Batches already in the pipeline get up to
// drain_timeout to finish (their exporters make no further retry meanwhile); those still
// running then are interrupted and handed back too, so the process exits well within an
// orchestrator's grace period and nothing it held waits for AckWait.
func (r *jsReceiver) Shutdown(ctx context.Context) error {
	if r.cancel == nil {
		return nil
	}
	r.unsub()
	r.pipelines.Close()
	_ = r.wakes.Unsubscribe()
	r.cancel()
	grace := time.AfterFunc(r.cfg.DrainTimeout, r.hardCancel)
	defer grace.Stop()
	stopOnCtx := context.AfterFunc(ctx, r.hardCancel)
	defer stopOnCtx()
	defer r.hardCancel()
	r.checks.close()
	r.wg.Wait()
	// Workers take r.mu when they retire, so they are stopped outside it (receiver_test.go).
	r.mu.Lock()
	workers := make([]*worker, 0, len(r.workers))
	for _, w := range r.workers {
		workers = append(workers, w)
	}
	r.mu.Unlock()
	for _, w := range workers {
		w.cancel()
		<-w.done
	}
	r.closeLedger()
	r.nc.Close()
	return nil
}

func (r *jsReceiver) poke() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// reconcileLoop brings the targets up to date whenever project configuration changes
// (and every few seconds, so a project whose mirror loaded late is picked up).
func (r *jsReceiver) reconcileLoop() {
	defer r.wg.Done()
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-r.kick:
		case <-tick.C:
		}
		r.reconcile()
	}
}

// wanted lists what this receiver should consume now, and the projects it paused this
// time that were not paused before.
func (r *jsReceiver) wanted() (map[string]target, []target) {
	want := map[string]target{}
	var paused []target
	for _, p := range r.cache.Projects() {
		if !streams.ValidProjectID(p.ID) {
			continue
		}
		if r.cfg.Consume == ConsumeOutput {
			for _, s := range p.Sinks {
				if s.Enabled && streams.ValidToken(s.ID) {
					t := target{project: p.ID, sink: s.ID, since: cursorStart(p, s)}
					want[t.key()] = t
				}
			}
			continue
		}
		if p.Pipeline.AgentEndpointURL == "" {
			continue
		}
		// A project whose expressions do not compile is paused rather than consumed and
		// redelivered forever; it resumes when its configuration is fixed.
		if err := r.pipelines.Check(p); err != nil {
			if r.pause(p.ID, err.Error()) {
				paused = append(paused, rawTarget(p))
			}
			continue
		}
		r.unpause(p.ID)
		want[p.ID] = rawTarget(p)
	}
	return want, paused
}

// reconcile makes the targets what the configuration wants. A new target is checked for
// records (and its consumer created, so its cursor starts now); it gets a worker only
// when there is something to consume.
func (r *jsReceiver) reconcile() {
	want, paused := r.wanted()
	var stop []*worker
	var forget []target
	var added []string
	r.mu.Lock()
	for key, t := range r.targets {
		if _, ok := want[key]; ok {
			continue
		}
		delete(r.targets, key)
		if w, ok := r.workers[key]; ok {
			delete(r.workers, key)
			stop = append(stop, w)
		}
		r.settings.Logger.Info("stopped consuming", t.logFields()...)
		// Only a destination its project no longer lists as enabled loses its cursor, and
		// only a project without an agent URL its pipeline consumer (a paused one keeps
		// it, to resume where it was); a project missing from the mirror (deleted: its
		// streams go with it) keeps them.
		if p, ok := r.cache.Project(t.project); ok && (t.sink != "" || p.Pipeline.AgentEndpointURL == "") {
			forget = append(forget, t)
		}
	}
	for key, t := range want {
		if _, ok := r.targets[key]; !ok {
			added = append(added, key)
		}
		r.targets[key] = t
	}
	// Paused projects that are gone or fixed no longer count.
	for id := range r.paused {
		if p, ok := r.cache.Project(id); !ok || p.Pipeline.AgentEndpointURL == "" {
			r.unpauseLocked(id)
		}
	}
	r.mu.Unlock()
	// Outside the lock: a stopping worker may need it (retire), and waiting for it while
	// holding it would deadlock (receiver_test.go).
	for _, w := range stop {
		w.cancel()
		<-w.done
		r.tel.JetstreamActiveConsumers.Add(context.Background(), -1)
	}
	for _, t := range forget {
		r.forget(t)
	}
	for _, key := range added {
		r.checks.add(key)
	}
	for _, t := range paused {
		r.keepCursor(t)
	}
	r.reconcileBacklogs(r.wantedBacklogs(want))
}

// pause marks a project paused; true when it was not paused before.
func (r *jsReceiver) pause(id, reason string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	prev, was := r.paused[id]
	if was && prev == reason {
		return false
	}
	if _, ok := r.paused[id]; !ok {
		r.tel.PipelinePausedProjects.Add(context.Background(), 1)
	}
	r.paused[id] = reason
	r.settings.Logger.Error("project paused: its pipeline configuration is invalid; fix it to resume",
		zap.String("project_id", id), zap.String("reason", reason))
	return !was
}

func (r *jsReceiver) unpause(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.unpauseLocked(id)
}

func (r *jsReceiver) unpauseLocked(id string) {
	if _, ok := r.paused[id]; ok {
		delete(r.paused, id)
		r.tel.PipelinePausedProjects.Add(context.Background(), -1)
		r.settings.Logger.Info("project resumed", zap.String("project_id", id))
	}
}

// consume runs one target's consumer until ctx ends or the target is idle, re-creating
// the consumer after errors (NATS may be away), with backoff's exponential waits (200ms
// doubling up to 5s, for as long as it takes).
func (r *jsReceiver) consume(ctx context.Context, w *worker) {
	t := w.target
	restarts := &backoff.ExponentialBackOff{
		InitialInterval: 200 * time.Millisecond,
		Multiplier:      2,
		MaxInterval:     5 * time.Second,
	}
	_, _ = backoff.Retry(ctx, func() (struct{}, error) {
		// A run that consumed something reset the waits: a failure after it restarts
		// after the shortest one, not one grown over failures long past.
		err := r.consumeOnce(ctx, w, restarts.Reset)
		if errors.Is(err, errIdle) {
			return struct{}{}, backoff.Permanent(err)
		}
		if err == nil {
			// consumeOnce returns only with an error; nil would end the worker silently.
			err = errors.New("consumer ended")
		}
		return struct{}{}, err
	},
		backoff.WithBackOff(restarts),
		backoff.WithMaxElapsedTime(0),
		backoff.WithNotify(func(err error, in time.Duration) {
			r.settings.Logger.Warn("consumer stopped; restarting", append(t.logFields(), zap.Error(err), zap.Duration("in", in))...)
		}),
	)
}

// consumeOnce pulls from a target's consumer until an error, or until the target is idle
// (errIdle), keeping up to max_inflight_batches batches in the pipeline. It calls
// consumed once, after the first batch was handed on.
func (r *jsReceiver) consumeOnce(ctx context.Context, w *worker, consumed func()) error {
	t := w.target
	cons, err := r.consumer(ctx, t)
	if err != nil {
		return err
	}
	it, err := cons.Messages(pullOptions(cons, r.cfg.BatchSize)...)
	if err != nil {
		return err
	}
	in := newInbox()
	// Batches in flight are kept alive until they settle, also while a shutdown lets
	// them finish (ctx has ended then).
	kctx, stopKeepAlive := context.WithCancel(context.WithoutCancel(ctx))
	filled := make(chan struct{})
	var kept sync.WaitGroup
	kept.Add(1)
	go func() { defer close(filled); in.fill(it) }()
	go func() { defer kept.Done(); in.keepAlive(kctx, r.cfg.AckWait/3) }()
	defer func() {
		kept.Wait()
		// What the server sent before the iterator stopped is still handed back by fill;
		// a NATS that is away could keep it waiting, which must not hold up the stop.
		select {
		case <-filled:
		case <-time.After(time.Second):
		}
	}()
	defer stopKeepAlive()
	// The batches' context: a shutdown does not end it at once (the batches get
	// drain_timeout to finish, r.hard), a worker stopped for a removed target does.
	bctx, cancelBatches := context.WithCancel(pipelinectx.WithDrain(context.WithoutCancel(ctx), r.ctx))
	defer cancelBatches()
	stopOnHard := context.AfterFunc(r.hard, cancelBatches)
	defer stopOnHard()
	stopOnRetire := context.AfterFunc(ctx, func() {
		if r.ctx.Err() == nil {
			cancelBatches()
		}
	})
	defer stopOnRetire()

	size, linger, inflight := r.cfg.BatchSize, r.cfg.Linger, r.cfg.MaxInflightBatches
	if t.sink != "" {
		// One result at a time, each acked as soon as it is settled: an interrupted
		// delivery then redelivers only itself, never results already delivered, and a
		// destination gets its results in order.
		size, linger, inflight = 1, 0, 1
	}
	// slots holds one token per batch in flight. Batches in flight are waited for before
	// the iterator stops and keep-alives end (deferred last, so run first): a shutdown
	// interrupts them (their calls end, they are nak'ed and redelivered), and a consumer
	// error lets them finish, kept alive, rather than have them time out and be sent
	// again while this process still works on them.
	slots := make(chan struct{}, inflight)
	var running sync.WaitGroup
	defer running.Wait()
	// First of all (deferred last, and as soon as a stop begins, while a batch run on
	// this goroutine still works): no more pulls, and what was fetched ahead goes back
	// at once, not after AckWait: another process, or this one woken again, takes it
	// while the batches in flight finish.
	var handBackOnce sync.Once
	handBack := func() {
		handBackOnce.Do(func() {
			it.Drain()
			for _, m := range in.close() {
				_ = m.Nak()
			}
		})
	}
	defer handBack()
	stopHandBack := context.AfterFunc(ctx, handBack)
	defer stopHandBack()
	for {
		// A stop takes no further batch, even one already fetched and a slot free.
		if err := ctx.Err(); err != nil {
			return err
		}
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		l := linger
		if l > 0 {
			if p, ok := r.cache.Project(t.project); ok && p.Pipeline.WindowEnabled {
				// Window calls go out one per trigger and latency matters: take only
				// what is already there.
				l = 0
			}
		}
		batch, seqs, id, err := r.takeOrIdle(ctx, in, size, l)
		if errors.Is(err, errIdle) {
			<-slots
			// A batch still in flight keeps the consumer busy (hasWork would say so too).
			if len(slots) == 0 && r.retire(ctx, w) {
				return errIdle
			}
			continue
		}
		if err != nil {
			<-slots
			return err
		}
		if inflight == 1 {
			// One batch at a time (the sink role): nothing runs beside it, so it runs on
			// this goroutine, whose stack has grown through the pipeline already. A
			// goroutine per batch started each one on a small stack that grew again
			// through the exporter, every time (a seventh of the sink's CPU).
			r.process(bctx, t, batch, seqs)
			in.settled(id)
			<-slots
			if consumed != nil {
				consumed()
				consumed = nil
			}
			continue
		}
		// The next batch starts once this one has handed off (the agent exporter has
		// queued its calls in their groups' lanes, internal/pipelinectx) or returned, so
		// batches reach the lanes, and the processors, one at a time and in order; a
		// pipeline that never hands off stays one batch at a time.
		hctx, handedOff := pipelinectx.WithHandoff(bctx)
		returned := make(chan struct{})
		running.Add(1)
		go func() {
			defer running.Done()
			defer close(returned)
			r.process(hctx, t, batch, seqs)
			in.settled(id)
			<-slots
		}()
		select {
		case <-handedOff:
		case <-returned:
		case <-ctx.Done():
			// Stopping: what was fetched ahead goes back now (deferred above), while this
			// batch gets drain_timeout to finish.
			return ctx.Err()
		}
		if consumed != nil {
			consumed()
			consumed = nil
		}
	}
}

// takeOrIdle is in.take that gives up with errIdle after the idle timeout without a record.
func (r *jsReceiver) takeOrIdle(ctx context.Context, in *inbox, size int, linger time.Duration) ([]jetstream.Msg, []uint64, uint64, error) {
	ictx, cancel := context.WithTimeout(ctx, r.cfg.IdleTimeout)
	defer cancel()
	batch, seqs, id, err := in.take(ictx, size, linger)
	if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		return nil, nil, 0, errIdle
	}
	return batch, seqs, id, err
}

// process hands one batch to the pipeline and acks it when the pipeline has handled every
// record, or asks for redelivery when it has not (false). seqs are the messages' stream
// sequences, which the caller has already read from their metadata (only read here).
// Batches in flight together are acked each on its own, in the order they finish.
func (r *jsReceiver) process(ctx context.Context, t target, batch []jetstream.Msg, seqs []uint64) bool {
	project := t.project
	ld, lrs := pipelinedata.New()
	lrs.EnsureCapacity(len(batch))
	for i, m := range batch {
		h := m.Headers()
		it := pipelinedata.Item{Body: m.Data(), Signal: h.Get(streams.HeaderSignal), Seq: seqs[i]}
		if t.sink != "" {
			it.Kind, it.SinkID = pipelinedata.KindResult, t.sink
			it.RequestID, it.MsgID = h.Get(streams.HeaderRequestID), h.Get(streams.HeaderMsgID)
			it.Unmatched = h.Get(streams.HeaderUnmatched) != ""
		}
		pipelinedata.Append(lrs, it)
	}
	scope := "pipeline"
	if t.sink != "" {
		scope = "sink"
	}
	pctx := principal.NewContext(ctx, principal.Principal{ProjectID: project, Scope: scope})
	// The exporter tells what it did with each record; the batch is counted in the
	// ledger from it before it is acked (ledger.go).
	var outcome *deliverylog.Outcome
	if t.sink == "" && r.cfg.Ledger {
		outcome = deliverylog.NewOutcome()
		pctx = pipelinectx.WithOutcome(pctx, outcome)
	}
	pctx = r.obs.StartLogsOp(pctx)
	err := r.next.ConsumeLogs(pctx, ld)
	r.obs.EndLogsOp(pctx, "flat_record", len(batch), err)
	if err == nil && outcome != nil {
		err = r.settle(ctx, project, seqs, outcome)
	}
	if err != nil {
		if r.ctx.Err() != nil {
			// Stopping: handed back for another process to take at once; its own
			// retries apply there.
			r.settings.Logger.Info("batch handed back at shutdown; another process takes it",
				append(t.logFields(), zap.Int("records", len(batch)), zap.Error(err))...)
			for _, m := range batch {
				_ = m.Nak()
			}
			r.tel.PipelineBatches.Add(context.WithoutCancel(ctx), 1, batchRedelivered)
			return false
		}
		if ctx.Err() == nil {
			r.settings.Logger.Warn("batch not handled; it will be delivered again",
				append(t.logFields(), zap.Int("records", len(batch)), zap.Duration("in", r.cfg.RetryDelay), zap.Error(err))...)
		}
		for _, m := range batch {
			_ = m.NakWithDelay(r.cfg.RetryDelay)
		}
		r.tel.PipelineBatches.Add(ctx, 1, batchRedelivered)
		return false
	}
	for _, m := range batch {
		_ = m.Ack()
	}
	r.tel.PipelineBatches.Add(ctx, 1, batchAcked)
	return true
}

// The batch outcomes' attribute sets, built once: a set per batch was an allocation and
// a sort for every result the sink delivers.
var (
	batchAcked       = metric.WithAttributeSet(attribute.NewSet(attribute.String("outcome", "acked")))
	batchRedelivered = metric.WithAttributeSet(attribute.NewSet(attribute.String("outcome", "redelivered")))
)
