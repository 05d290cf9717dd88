package jetstreamreceiver

import (
	"context"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/receiverhelper"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/otelcol-svc/otelcol-svc/components/mirror"
	"github.com/otelcol-svc/otelcol-svc/components/pipelinecfg"
	"github.com/otelcol-svc/otelcol-svc/components/pipelinedata"
	"github.com/otelcol-svc/otelcol-svc/components/streams"
	"github.com/otelcol-svc/otelcol-svc/components/tenant"
)

type jsReceiver struct {
	cfg      *Config
	settings receiver.Settings
	next     consumer.Logs
	obs      *receiverhelper.ObsReport

	nc    *nats.Conn
	js    jetstream.JetStream
	cache *mirror.Cache

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	kick   chan struct{}
	unsub  func()

	mu      sync.Mutex
	workers map[string]*worker
	paused  map[string]string // project -> reason, to log a pause once

	pausedGauge metric.Int64UpDownCounter
	batches     metric.Int64Counter
}

type worker struct {
	target target
	cancel context.CancelFunc
	done   chan struct{}
}

// target is what one worker consumes: a project's raw stream, or one destination's cursor
// on a project's output stream.
type target struct {
	project string
	sink    string    // output mode: the destination's sink id
	since   time.Time // output mode: a new cursor starts here (NATS server's clock)
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
	meter := set.MeterProvider.Meter("github.com/otelcol-svc/otelcol-svc/receiver/jetstreamreceiver")
	paused, err := meter.Int64UpDownCounter("otelcol_pipeline_paused_projects",
		metric.WithDescription("Projects not consumed because their pipeline configuration is invalid."))
	if err != nil {
		return nil, err
	}
	batches, err := meter.Int64Counter("otelcol_pipeline_batches",
		metric.WithDescription("Batches handed to the pipeline, by outcome (acked, redelivered)."))
	if err != nil {
		return nil, err
	}
	return &jsReceiver{
		cfg: cfg, settings: set, next: next, obs: obs,
		workers: map[string]*worker{}, paused: map[string]string{},
		pausedGauge: paused, batches: batches,
	}, nil
}

func (r *jsReceiver) Start(_ context.Context, host component.Host) error {
	cache, err := mirror.FromHost(host)
	if err != nil {
		return err
	}
	nc, err := r.cfg.NATS.Connect(host, "otelcol-svc jetstream receiver "+r.settings.ID.String(), r.settings.Logger)
	if err != nil {
		return err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return err
	}
	r.nc, r.js, r.cache = nc, js, cache
	r.ctx, r.cancel = context.WithCancel(context.Background())
	r.kick = make(chan struct{}, 1)
	r.unsub = cache.Subscribe(func(c mirror.Change) {
		if c.Bucket == mirror.BucketProjects {
			r.poke()
		}
	})
	r.wg.Add(1)
	go r.reconcileLoop()
	r.poke()
	return nil
}

func (r *jsReceiver) Shutdown(context.Context) error {
	if r.cancel == nil {
		return nil
	}
	r.unsub()
	r.cancel()
	r.wg.Wait()
	r.mu.Lock()
	for id, w := range r.workers {
		w.cancel()
		<-w.done
		delete(r.workers, id)
	}
	r.mu.Unlock()
	r.nc.Close()
	return nil
}

func (r *jsReceiver) poke() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// reconcileLoop starts a worker for every project that should be consumed and stops the
// others, whenever project configuration changes (and every few seconds, so a project
// whose mirror loaded late is picked up).
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

// wanted lists what this receiver should consume now.
func (r *jsReceiver) wanted() map[string]target {
	want := map[string]target{}
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
		if err := pipelinecfg.Check(p); err != nil {
			r.pause(p.ID, err.Error())
			continue
		}
		r.unpause(p.ID)
		want[p.ID] = target{project: p.ID}
	}
	return want
}

func (r *jsReceiver) reconcile() {
	want := r.wanted()
	r.mu.Lock()
	defer r.mu.Unlock()
	for key, w := range r.workers {
		if _, ok := want[key]; ok {
			continue
		}
		w.cancel()
		<-w.done
		delete(r.workers, key)
		r.settings.Logger.Info("stopped consuming", w.target.logFields()...)
		// Only a destination its project no longer lists as enabled loses its cursor; a
		// project missing from the mirror (deleted: its streams go with it) keeps it.
		if _, ok := r.cache.Project(w.target.project); ok && w.target.sink != "" {
			r.forgetDestination(w.target)
		}
	}
	for key, t := range want {
		if _, ok := r.workers[key]; ok {
			continue
		}
		ctx, cancel := context.WithCancel(r.ctx)
		w := &worker{target: t, cancel: cancel, done: make(chan struct{})}
		r.workers[key] = w
		go func() {
			defer close(w.done)
			r.consume(ctx, t)
		}()
		r.settings.Logger.Info("consuming", t.logFields()...)
	}
	// Paused projects that are gone or fixed no longer count.
	for id := range r.paused {
		if p, ok := r.cache.Project(id); !ok || p.Pipeline.AgentEndpointURL == "" {
			r.unpauseLocked(id)
		}
	}
}

func (r *jsReceiver) pause(id, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if prev, ok := r.paused[id]; ok && prev == reason {
		return
	}
	if _, ok := r.paused[id]; !ok {
		r.pausedGauge.Add(context.Background(), 1)
	}
	r.paused[id] = reason
	r.settings.Logger.Error("project paused: its pipeline configuration is invalid; fix it to resume",
		zap.String("project_id", id), zap.String("reason", reason))
}

func (r *jsReceiver) unpause(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.unpauseLocked(id)
}

func (r *jsReceiver) unpauseLocked(id string) {
	if _, ok := r.paused[id]; ok {
		delete(r.paused, id)
		r.pausedGauge.Add(context.Background(), -1)
		r.settings.Logger.Info("project resumed", zap.String("project_id", id))
	}
}

// consume runs one target's consumer until ctx ends, re-creating it after errors (the
// stream may not exist until the project's first event, or NATS may be away).
func (r *jsReceiver) consume(ctx context.Context, t target) {
	backoff := 200 * time.Millisecond
	for ctx.Err() == nil {
		err := r.consumeOnce(ctx, t)
		if ctx.Err() != nil {
			return
		}
		r.settings.Logger.Warn("consumer stopped; restarting", append(t.logFields(), zap.Error(err), zap.Duration("in", backoff))...)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

func (r *jsReceiver) consumeOnce(ctx context.Context, t target) error {
	cons, err := r.consumer(ctx, t)
	if err != nil {
		return err
	}
	// Two batches in flight: the next one arrives while the pipeline works on this one.
	it, err := cons.Messages(jetstream.PullMaxMessages(2 * r.cfg.BatchSize))
	if err != nil {
		return err
	}
	in := newInbox()
	kctx, stopKeepAlive := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); in.fill(it) }()
	go func() { defer wg.Done(); in.keepAlive(kctx, r.cfg.AckWait/3) }()
	defer func() { it.Stop(); stopKeepAlive(); wg.Wait() }()

	size, linger := r.cfg.BatchSize, r.cfg.Linger
	if t.sink != "" {
		// One result at a time, each acked as soon as it is settled: an interrupted
		// delivery then redelivers only itself, never results already delivered.
		size, linger = 1, 0
	}
	for {
		l := linger
		if l > 0 {
			if p, ok := r.cache.Project(t.project); ok && p.Pipeline.WindowEnabled {
				// Window calls go out one per trigger and latency matters: take only
				// what is already there.
				l = 0
			}
		}
		batch, err := in.take(ctx, size, l)
		if err != nil {
			return err
		}
		r.process(ctx, t, batch)
		in.settled()
	}
}

// process hands one batch to the pipeline and acks it when the pipeline has handled every
// record, or asks for redelivery when it has not.
func (r *jsReceiver) process(ctx context.Context, t target, batch []jetstream.Msg) {
	project := t.project
	ld, lrs := pipelinedata.New()
	lrs.EnsureCapacity(len(batch))
	for _, m := range batch {
		var seq uint64
		if meta, err := m.Metadata(); err == nil {
			seq = meta.Sequence.Stream
		}
		h := m.Headers()
		it := pipelinedata.Item{Body: m.Data(), Signal: h.Get(streams.HeaderSignal), Seq: seq}
		if t.sink != "" {
			it.Kind, it.SinkID = pipelinedata.KindResult, t.sink
			it.RequestID, it.MsgID = h.Get(streams.HeaderRequestID), h.Get(streams.HeaderMsgID)
		}
		pipelinedata.Append(lrs, it)
	}
	scope := "pipeline"
	if t.sink != "" {
		scope = "sink"
	}
	pctx := tenant.NewContext(ctx, tenant.Principal{ProjectID: project, Scope: scope})
	pctx = r.obs.StartLogsOp(pctx)
	err := r.next.ConsumeLogs(pctx, ld)
	r.obs.EndLogsOp(pctx, "flat_record", len(batch), err)
	if err != nil {
		if ctx.Err() == nil {
			r.settings.Logger.Warn("batch not handled; it will be delivered again",
				append(t.logFields(), zap.Int("records", len(batch)), zap.Duration("in", r.cfg.RetryDelay), zap.Error(err))...)
		}
		for _, m := range batch {
			_ = m.NakWithDelay(r.cfg.RetryDelay)
		}
		r.batches.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", "redelivered")))
		return
	}
	for _, m := range batch {
		_ = m.Ack()
	}
	r.batches.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", "acked")))
}
