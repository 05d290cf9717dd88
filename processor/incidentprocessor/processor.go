package incidentprocessor

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processorhelper"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/mirrorcache"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelinecfg"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelinedata"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelineeval"
	"github.com/otelcol-svc/otelcol-svc/internal/incident"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/pipelinectx"
	"github.com/otelcol-svc/otelcol-svc/internal/requestid"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
	"github.com/otelcol-svc/otelcol-svc/internal/windowstore"
	"github.com/otelcol-svc/otelcol-svc/processor/incidentprocessor/internal/metadata"
)

// Window store groups of incident mode. The NUL byte keeps them apart from window
// mode's group keys, which are a tenant's values (a project is in one mode at a time,
// but a switch must not read the other mode's windows as its own).
const (
	eventsGroupPrefix  = "\x00inc:" // + incident id: the incident's events, for its calls
	contextGroupPrefix = "\x00fp:"  // + fingerprint: the records that passed context_filter
)

// eventsTTL is how long an incident's events are kept for its calls: past the longest
// wait for the next call (the opening's group_wait, an update's group_interval, a mute),
// with room for a call retried for minutes. A call later than that says how many events
// it could not carry (events_left_out).
func eventsTTL(set incident.Settings) time.Duration {
	return set.GroupWait + set.GroupInterval + incident.MuteFor + 15*time.Minute
}

type incidentProcessor struct {
	cfg    *Config
	logger *zap.Logger
	tel    *metadata.TelemetryBuilder
	next   consumer.Logs
	// owner names this process in the claims it makes.
	owner string

	mirror    *mirrorcache.Cache
	pipelines *pipelinecfg.Cache
	store     windowstore.Store
	nc        *nats.Conn
	js        jetstream.JetStream
	limits    streams.Limits

	// incidents binds to the bucket on first need: NATS may be away at Start.
	mu        sync.Mutex
	incidents *incident.Store
	ids       *requestid.Issuer

	warned pipelinecfg.Once
	ticker *ticker
	// applies keeps each project's batches applied in order while the next is evaluated.
	applies applyQueue
}

func newProcessor(cfg *Config, set processor.Settings, next consumer.Logs) (*incidentProcessor, error) {
	tel, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	limits := streams.DefaultLimits()
	limits.Replicas = cfg.Replicas
	return &incidentProcessor{cfg: cfg, logger: set.Logger, tel: tel, next: next, owner: "proc_" + hex.EncodeToString(b[:]),
		limits: limits}, nil
}

func (p *incidentProcessor) start(ctx context.Context, host component.Host) error {
	cache, err := mirrorcache.FromHost(host, p.cfg.Mirror)
	if err != nil {
		return err
	}
	p.mirror = cache
	nc, js, err := p.cfg.NATS.ConnectJetStream(host, "otelcol-svc incident processor", p.logger)
	if err != nil {
		return fmt.Errorf("incident processor: %w", err)
	}
	p.nc, p.js = nc, js
	p.pipelines = pipelinecfg.NewCache(cache)
	switch {
	case p.store != nil: // given before Start (tests)
	case p.cfg.RedisURL == "":
		p.store = windowstore.NewMemory(30*time.Second, windowstore.WithMaxProjectBytes(p.cfg.MemoryMaxProjectBytes),
			windowstore.WithMaxBytes(p.cfg.MemoryMaxBytes), windowstore.WithLogger(p.logger))
	default:
		r, err := windowstore.NewRedis(p.cfg.RedisURL)
		if err != nil {
			return err
		}
		// Redis being down at start is not fatal: batches are retried until it is back.
		if err := r.Ping(ctx); err != nil {
			p.logger.Warn("Redis store of incident events not reachable yet", zap.Error(err))
		}
		p.store = r
	}
	if nc.IsConnected() {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if _, err := p.bucket(sctx); err != nil {
			p.logger.Warn("incident bucket not open yet; incident-mode batches wait for it", zap.Error(err))
		}
	}
	p.ticker = newTicker(p)
	p.ticker.start()
	return nil
}

func (p *incidentProcessor) shutdown(ctx context.Context) error {
	if p.ticker != nil {
		p.ticker.stop(ctx)
	}
	p.pipelines.Close()
	var err error
	if p.store != nil {
		err = p.store.Close()
	}
	if p.nc != nil {
		p.nc.Close()
	}
	return err
}

// bucket returns the incident store, opening (creating) the bucket on first need.
func (p *incidentProcessor) bucket(ctx context.Context) (*incident.Store, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.incidents != nil {
		return p.incidents, nil
	}
	s, err := incident.Open(ctx, p.js, p.cfg.Replicas)
	if err != nil {
		return nil, err
	}
	p.incidents = s
	return s, nil
}

// issuer returns the request-id issuer (the deployment's key, shared with the agent
// exporter), so a result posted under an incident call's id is recognised.
func (p *incidentProcessor) issuer(ctx context.Context) (*requestid.Issuer, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ids != nil {
		return p.ids, nil
	}
	iss, err := requestid.Load(ctx, p.js)
	if err != nil {
		return nil, err
	}
	p.ids = iss
	return iss, nil
}

func attrs(kv ...string) metric.MeasurementOption {
	a := make([]attribute.KeyValue, 0, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		a = append(a, attribute.String(kv[i], kv[i+1]))
	}
	return metric.WithAttributes(a...)
}

// Outcomes of a record, as otelcol_incident_records counts them.
const (
	outEvent = iota
	outContext
	outResolve
	outDropped
	outError
	outTooLarge
	numOutcomes
)

var outcomeAttrs = [numOutcomes]metric.MeasurementOption{
	outEvent: attrs("outcome", "event"), outContext: attrs("outcome", "context"), outResolve: attrs("outcome", "resolve"),
	outDropped: attrs("outcome", "dropped"), outError: attrs("outcome", "error"), outTooLarge: attrs("outcome", "too_large"),
}

// join is one Apply of a batch: a fingerprint's events up to a resolve_when record,
// which ends it. Events after that resolve start another join, so they open (or reopen)
// the next incident instead of joining the one they follow.
type join struct {
	fingerprint string
	seqs        []uint64
	bodies      [][]byte
	title       string
	resolve     bool
	// resolveSeq is the sequence of the resolve_when record that ends the join.
	resolveSeq uint64
}

func (p *incidentProcessor) processLogs(ctx context.Context, ld plog.Logs) (plog.Logs, error) {
	project, c, ok, err := p.pipelines.ForRequest(ctx)
	if !ok || (err == nil && c.Mode != mirror.ModeIncident) {
		return ld, nil // not ours: no project, or another mode
	}
	if err != nil {
		return ld, err
	}
	store, err := p.bucket(ctx)
	if err != nil {
		return ld, fmt.Errorf("incident bucket: %w; the batch will be delivered again", err)
	}
	now := time.Now()
	out, failed := pipelinedata.New()
	eval := pipelineeval.New(pipelineeval.Options{MaxRecordBytes: p.cfg.MaxRecordBytes})
	var (
		joins   []*join
		current = map[string]*join{} // the fingerprint's join taking events now
		errStop error
		counts  [numOutcomes]int64 // per outcome, counted per record without a map
		adds    []windowstore.Entry
		all     []uint64 // every record's sequence: the runs the batch covers
	)
	pipelinedata.Each(ld, func(lr plog.LogRecord) {
		if errStop != nil {
			return
		}
		it := pipelinedata.Read(lr)
		all = append(all, it.Seq)
		res, err := eval.Incident(ctx, project.ID, c, pipelineeval.Item{Seq: it.Seq, Signal: it.Signal, Body: it.Body, Time: now})
		if err != nil {
			errStop = err
			return
		}
		switch {
		case res.TooLarge:
			// Neither an event nor context, and not dropped unseen: the agent exporter
			// dead-letters it, as stored, with the error.
			pipelinedata.Append(failed, pipelinedata.Item{Body: it.Body, Signal: it.Signal, Kind: pipelinedata.KindFailed,
				Seq: it.Seq, Error: pipelineeval.TooLargeReason(res.Err)})
			counts[outTooLarge]++
			p.logFailure(project.ID, c.Version, "record dead-lettered: a transform made it larger than the record limit", res.Err)
			return
		case res.Skipped:
			counts[outError]++
			p.logFailure(project.ID, c.Version, "record skipped: a transform or expression failed on it", res.Err)
			return
		}
		if res.InContext {
			adds = append(adds, windowstore.Entry{Group: contextGroupPrefix + res.Fingerprint, Seq: it.Seq, Rec: res.Body})
		}
		// resolve_when is asked first: a resolving record never opens an incident, even
		// when the trigger matches it too (a trigger of every record, an alert's
		// "resolved" beside its "firing"). It resolves its fingerprint's open incident,
		// if any, and is no event of it.
		switch {
		case res.Resolves:
			j := current[res.Fingerprint]
			if j == nil || j.resolve {
				j = &join{fingerprint: res.Fingerprint}
				joins = append(joins, j)
				current[res.Fingerprint] = j
			}
			j.resolve, j.resolveSeq = true, it.Seq
			counts[outResolve]++
		case res.Matched:
			j := current[res.Fingerprint]
			if j == nil || j.resolve {
				j = &join{fingerprint: res.Fingerprint}
				joins = append(joins, j)
				current[res.Fingerprint] = j
			}
			j.seqs = append(j.seqs, it.Seq)
			j.bodies = append(j.bodies, res.Body)
			if j.title == "" {
				j.title = res.Title
			}
			counts[outEvent]++
		case res.InContext:
			counts[outContext]++
		default:
			counts[outDropped]++
		}
	})
	if errStop != nil {
		// A store is away: the whole batch is delivered again later. Stores are
		// idempotent by sequence and so is Apply, so nothing counts twice.
		return ld, errStop
	}
	// Idempotent by sequence: a redelivered batch stores nothing twice.
	if err := p.store.AddBatch(ctx, project.ID, now, c.WindowDuration, adds); err != nil {
		return ld, fmt.Errorf("incident context store: %w", err)
	}
	for o, n := range counts {
		if n > 0 {
			p.tel.IncidentRecords.Add(ctx, n, outcomeAttrs[o])
		}
	}
	// The joins are applied after the project's earlier batches' joins, in the stream's
	// order, as when each batch waited for the one before. The batch's order being fixed
	// there, the receiver may hand over the next batch now: it is evaluated while this
	// one's compare-and-set round trips are made, instead of after them. A batch with
	// records for the agent exporter keeps to its own handoff (its dead letters are
	// queued in order there).
	wait, applied := p.applies.enqueue(project.ID)
	if failed.Len() == 0 {
		pipelinectx.Handoff(ctx)
	}
	err = p.afterPrevious(ctx, wait, func() error { return p.apply(ctx, store, project.ID, c, joins, batchRuns(all), now) })
	applied()
	if err != nil {
		return ld, err
	}
	if failed.Len() == 0 {
		return out, processorhelper.ErrSkipProcessingData
	}
	return out, nil
}

// applyQueue orders each project's batches' applies: one batch's after the previous
// one's, in the order the batches were queued, as the receiver hands them over.
type applyQueue struct {
	mu sync.Mutex
	// last is the project's latest batch queued, closed when its apply is done; an
	// entry lives while a batch of the project is queued.
	last map[string]chan struct{}
}

// enqueue queues a batch of project: wait is closed when the batch before it has applied
// (nil: none is queued), and applied must be called once this one has (or gave up).
func (q *applyQueue) enqueue(project string) (wait <-chan struct{}, applied func()) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.last == nil {
		q.last = map[string]chan struct{}{}
	}
	prev, done := q.last[project], make(chan struct{})
	q.last[project] = done
	if prev != nil {
		wait = prev
	}
	return wait, func() {
		q.mu.Lock()
		if q.last[project] == done {
			delete(q.last, project)
		}
		q.mu.Unlock()
		close(done)
	}
}

// afterPrevious runs apply once wait is closed. A batch given up on while it waits (the
// process stopping) fails, to be delivered again, like one whose apply failed.
func (p *incidentProcessor) afterPrevious(ctx context.Context, wait <-chan struct{}, apply func() error) error {
	if wait != nil {
		select {
		case <-wait:
		case <-ctx.Done():
			return fmt.Errorf("incident batch stopped before its turn to be applied: %w", ctx.Err())
		}
	}
	return apply()
}

// batchRuns are the runs of consecutive sequences of a batch's records.
func batchRuns(seqs []uint64) [][2]uint64 {
	seqs = slices.Clone(seqs)
	slices.Sort(seqs)
	return incident.Runs(slices.Compact(seqs))
}

// applyParallel bounds the fingerprints of a batch applied at once: each Apply is a
// compare-and-set round trip or two, and the batch waits for the slowest.
const applyParallel = 8

// apply counts each join into its incident, then stores its events under the incident
// the store named (only Apply knows whether they open a new one), and publishes what
// changed. Fingerprints are applied side by side, each one's joins in the batch's order.
// The events count in the batch's ledger outcome as incident_events.
func (p *incidentProcessor) apply(ctx context.Context, store *incident.Store, project string, c *pipelinecfg.Compiled, joins []*join, covered [][2]uint64, now time.Time) error {
	byFingerprint := map[string][]*join{}
	var order []string
	for _, j := range joins {
		if _, ok := byFingerprint[j.fingerprint]; !ok {
			order = append(order, j.fingerprint)
		}
		byFingerprint[j.fingerprint] = append(byFingerprint[j.fingerprint], j)
	}
	var (
		mu     sync.Mutex
		opened int
		events []uint64
		errs   []error
		wg     sync.WaitGroup
		slots  = make(chan struct{}, applyParallel)
	)
	ttl := eventsTTL(c.Incident)
	for _, fp := range order {
		slots <- struct{}{}
		wg.Add(1)
		go func(js []*join) {
			defer func() { <-slots; wg.Done() }()
			for _, j := range js {
				// The batch's runs are remembered as counted with a fingerprint's only
				// join; with several (events on both sides of a resolve_when record)
				// the first would cover the later ones' events, so none does.
				var cov [][2]uint64
				if len(js) == 1 {
					cov = covered
				}
				n, seqs, err := p.applyJoin(ctx, store, project, c, j, cov, now, ttl)
				mu.Lock()
				opened += n
				events = append(events, seqs...)
				if err != nil {
					errs = append(errs, err)
				}
				mu.Unlock()
				if err != nil {
					return // this fingerprint's later joins wait for the batch to come again
				}
			}
		}(byFingerprint[fp])
	}
	wg.Wait()
	if len(errs) > 0 {
		// Nothing of the batch is acknowledged: it comes again, and what was applied
		// already changes nothing then (sequences).
		return errs[0]
	}
	pipelinectx.OutcomeFrom(ctx).Incident(events, opened)
	return nil
}

// applyJoin applies one join; it returns whether it opened an incident and the
// sequences of the events that joined one.
func (p *incidentProcessor) applyJoin(ctx context.Context, store *incident.Store, project string, c *pipelinecfg.Compiled, j *join, covered [][2]uint64, now time.Time, ttl time.Duration) (int, []uint64, error) {
	if len(j.seqs) > 0 {
		// The incident's calls wait until its events are stored under its id, which
		// only Apply names.
		defer p.ticker.storingEvents(project + ".f." + incident.FingerprintHash(j.fingerprint))()
	}
	// Counted by sequence: a batch delivered again, alone or among new records, counts
	// only what the incident has not counted. A join of a resolve_when record alone
	// is counted by its sequence too (Seqs given, empty).
	seqs := j.seqs
	if seqs == nil {
		seqs = []uint64{}
	}
	res, err := store.Apply(ctx, project, c.Incident, incident.Join{Fingerprint: j.fingerprint, Seqs: seqs,
		Title: j.title, Resolve: j.resolve, ResolveSeq: j.resolveSeq, Covered: covered, At: now})
	if err != nil {
		return 0, nil, fmt.Errorf("incident of project %s: %w; the batch will be delivered again", project, err)
	}
	var events []uint64
	if id := res.Incident.ID; id != "" && len(j.seqs) > 0 {
		adds := make([]windowstore.Entry, len(j.seqs))
		for i, seq := range j.seqs {
			adds[i] = windowstore.Entry{Group: eventsGroupPrefix + id, Seq: seq, Rec: j.bodies[i]}
		}
		if err := p.store.AddBatch(ctx, project, now, ttl, adds); err != nil {
			return 0, nil, fmt.Errorf("incident event store: %w; the batch will be delivered again", err)
		}
		events = j.seqs
	}
	opened := 0
	if res.Opened {
		opened = 1
		p.tel.IncidentsOpened.Add(ctx, 1)
	}
	if err := p.publish(ctx, project, res.Notices); err != nil {
		return 0, nil, err
	}
	p.published(ctx, store, project, res.Notices)
	return opened, events, nil
}

// publish puts an incident's notices on the project's output stream. A repeat is stored
// once (each notice's message id names its transition).
func (p *incidentProcessor) publish(ctx context.Context, project string, notices []incident.Notice) error {
	for _, n := range notices {
		if err := incident.Publish(ctx, p.js, p.nc, project, n, p.limits); err != nil {
			return fmt.Errorf("incident notice of project %s: %w", project, err)
		}
	}
	return nil
}

// published takes notices that are on the output stream out of their incidents'
// outboxes. One left there (this write failed) is published again by a ticker a few
// seconds later, which the stream stores once.
func (p *incidentProcessor) published(ctx context.Context, store *incident.Store, project string, notices []incident.Notice) {
	var done []string
	for _, n := range notices {
		if id := n.Incident.ID; !slices.Contains(done, id) {
			done = append(done, id)
			if err := store.Published(ctx, project, id, incident.MaxSeq(notices, id)); err != nil {
				p.logger.Debug("incident outbox not cleared; its notices are published again", zap.String("project_id", project),
					zap.String("incident_id", id), zap.Error(err))
			}
		}
	}
}

// logFailure logs a failure of a project's own expressions: at WARN the first time for
// the project's configuration version, at debug after that (each is counted).
func (p *incidentProcessor) logFailure(project string, version int64, msg string, err error) {
	fields := []zap.Field{zap.String("project_id", project), zap.Int64("config_version", version), zap.Error(err)}
	if p.warned.First(project, version) {
		p.logger.Warn(msg+" (further failures of this pipeline version are counted in otelcol_incident_records and logged at debug)", fields...)
		return
	}
	p.logger.Debug(msg, fields...)
}
