package incidentprocessor

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/otelcol-svc/otelcol-svc/internal/agentbody"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelinecfg"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelinedata"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/principal"
	"github.com/otelcol-svc/otelcol-svc/internal/deliverylog"
	"github.com/otelcol-svc/otelcol-svc/internal/incident"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/pipelinectx"
)

// Call outcomes (incident.Complete's).
const (
	outcomeDelivered    = "delivered"
	outcomeDeadLettered = "dead_lettered"
	outcomeRefused      = "refused"
)

// settleTimeout bounds the store writes after a call (Complete, its notices), which
// must happen even while the process stops: the call was made.
const settleTimeout = 10 * time.Second

// ticker makes the incidents' calls. It follows every project's current incidents in
// the bucket (Watch), and on each tick asks of each whether something is due
// (incident.Due): an idle one is resolved, a due call is claimed (a compare-and-set in the
// bucket, so exactly one process makes it) and handed to the next consumer. A claim
// whose process stopped heartbeating is taken over after claim_timeout under its
// request id: the agent sees the same call again, never a second one.
type ticker struct {
	p *incidentProcessor

	// ctx ends the watch and the ticks; drain tells the exporter that the process is
	// stopping (a failing call is not retried any more); calls ends the calls in flight
	// when the shutdown's own deadline has come.
	ctx         context.Context
	cancel      context.CancelFunc
	drain       context.Context
	drainCancel context.CancelFunc
	calls       context.Context
	callsCancel context.CancelFunc
	loops, wg   sync.WaitGroup
	slots       chan struct{}
	mu          sync.Mutex
	// index is, by f-key, what Due reads of the incidents that may have something due:
	// every project's open ones, and resolved ones until their calls are made and their
	// notices published.
	index       map[string]incident.DueState
	busy        map[string]bool      // f-keys with work in flight in this process
	outboxAfter map[string]time.Time // f-keys whose outbox failed to publish: when to try again
	// storing counts, per f-key, this process's batches between applying events to the
	// incident and storing them under its id: a call made in between would leave them
	// out (an opening call about no events at all with group_wait 0).
	storing map[string]int
	// noticeFailed names, by f-key, the incident whose notices failed to publish since
	// they last succeeded: the failure is told at WARN once, not at every retry.
	noticeFailed map[string]string
}

// openingMargin holds back an opening call this long after its incident opened.
// Another process sharing the events (Redis) may still be storing the opening batch's
// events under the incident's id, which Apply names only once it opened it: this
// process's own batches are waited for exactly (storing), another's by this margin.
const openingMargin = 500 * time.Millisecond

// outboxAge is how long a change's notices may wait in the incident's outbox for the
// process that made the change to publish them, before a ticker publishes them again
// (that process died, or the stream was away); outboxRetry spaces its attempts.
const (
	outboxAge   = 5 * time.Second
	outboxRetry = 2 * time.Second
)

func newTicker(p *incidentProcessor) *ticker {
	t := &ticker{p: p, slots: make(chan struct{}, p.cfg.MaxConcurrentCalls), index: map[string]incident.DueState{},
		busy: map[string]bool{}, outboxAfter: map[string]time.Time{}, storing: map[string]int{},
		noticeFailed: map[string]string{}}
	t.ctx, t.cancel = context.WithCancel(context.Background())
	t.drain, t.drainCancel = context.WithCancel(context.Background())
	t.calls, t.callsCancel = context.WithCancel(context.Background())
	return t
}

func (t *ticker) start() {
	t.loops.Add(2)
	go t.watch()
	go t.tick()
}

// stop ends the ticks and waits for the calls in flight until ctx ends; those still
// running then are cut, and stay claimed for another process to take over.
func (t *ticker) stop(ctx context.Context) {
	t.cancel()
	t.drainCancel()
	t.loops.Wait()
	done := make(chan struct{})
	go func() { t.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		t.callsCancel()
		<-done
	}
	t.callsCancel()
}

// watch keeps the index current from the bucket, watching again after NATS comes back.
func (t *ticker) watch() {
	defer t.loops.Done()
	for t.ctx.Err() == nil {
		if err := t.watchOnce(); err != nil && t.ctx.Err() == nil {
			t.p.logger.Debug("incident watch interrupted; watching again", zap.Error(err))
		}
		select {
		case <-t.ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func (t *ticker) watchOnce() error {
	store, err := t.p.bucket(t.ctx)
	if err != nil {
		return err
	}
	w, err := store.Watch(t.ctx)
	if err != nil {
		return err
	}
	defer func() { _ = w.Stop() }()
	for {
		select {
		case <-t.ctx.Done():
			return nil
		case e, ok := <-w.Updates():
			if !ok {
				return nil
			}
			if e != nil {
				t.update(e)
			}
		}
	}
}

// update takes one change of a current incident into the index. Only what Due reads is
// decoded, not the timeline and the rest: every process sees every write of every
// project.
func (t *ticker) update(e jetstream.KeyValueEntry) {
	var d incident.DueState
	keep := false
	if e.Operation() == jetstream.KeyValuePut {
		var err error
		d, err = incident.DueStateOf(e.Value())
		keep = err == nil && live(d)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if keep {
		t.index[e.Key()] = d
		return
	}
	delete(t.index, e.Key())
	delete(t.outboxAfter, e.Key())
	delete(t.noticeFailed, e.Key())
}

// publish publishes an incident's notices. A failure is logged at WARN the first time
// since the incident's notices last went out, at debug after that: they stay in its
// outbox and are tried again.
func (t *ticker) publish(ctx context.Context, key, project, id string, notices []incident.Notice) bool {
	err := t.p.publish(ctx, project, notices)
	t.mu.Lock()
	first := err != nil && t.noticeFailed[key] != id
	if err != nil {
		t.noticeFailed[key] = id
	} else {
		delete(t.noticeFailed, key)
	}
	t.mu.Unlock()
	switch {
	case first:
		t.p.logger.Warn("incident notices not published; they are tried again from the incident's outbox (further failures of this incident at debug)",
			zap.String("project_id", project), zap.String("incident_id", id), zap.Error(err))
	case err != nil:
		t.p.logger.Debug("incident notices not published", zap.String("project_id", project), zap.String("incident_id", id), zap.Error(err))
	}
	return err == nil
}

// storingEvents marks key's incident as getting events of this process's batch; the
// func returned unmarks it once they are stored (or the batch failed).
func (t *ticker) storingEvents(key string) func() {
	t.mu.Lock()
	t.storing[key]++
	t.mu.Unlock()
	return func() {
		t.mu.Lock()
		if t.storing[key]--; t.storing[key] <= 0 {
			delete(t.storing, key)
		}
		t.mu.Unlock()
	}
}

// live says whether anything may still be due for an incident: a resolved one whose
// calls are all made, which holds no claim and whose notices are published, waits for
// nothing.
func live(i incident.DueState) bool {
	return i.Status != incident.StatusResolved || i.Pending != nil || !i.OpeningDone || !i.ResolvedCallDone ||
		i.ReinvestigateRequested || !i.OutboxSince.IsZero()
}

func (t *ticker) tick() {
	defer t.loops.Done()
	tk := time.NewTicker(t.p.cfg.Tick)
	defer tk.Stop()
	for {
		select {
		case <-t.ctx.Done():
			return
		case now := <-tk.C:
			t.sweep(now)
		}
	}
}

// work is what one incident has due.
type work struct {
	key, project, fph string
	inc               incident.DueState
	c                 *pipelinecfg.Compiled
	reason            string
	resolveNow        bool
	// republish: notices waited in the outbox longer than outboxAge.
	republish bool
}

// sweep starts the work that is due, at most max_concurrent_calls at once; what does not
// fit waits for the next tick.
func (t *ticker) sweep(now time.Time) {
	t.mu.Lock()
	var due []work
	for key, inc := range t.index {
		if t.busy[key] {
			continue
		}
		project, fph, ok := strings.Cut(key, ".f.")
		if !ok {
			continue
		}
		c, ok := t.compiled(project)
		if !ok {
			continue
		}
		reason, resolveNow, call := incident.DueOf(inc, c.Incident, now, t.p.cfg.ClaimTimeout)
		if call && (t.storing[key] > 0 || reason == incident.ReasonOpened && inc.Pending == nil && now.Sub(inc.OpenedAt) < openingMargin) {
			call = false // its events are not all stored yet
		}
		republish := !inc.OutboxSince.IsZero() && now.Sub(inc.OutboxSince) >= outboxAge && !now.Before(t.outboxAfter[key])
		if !resolveNow && !call && !republish {
			continue
		}
		if !call {
			reason = ""
		}
		due = append(due, work{key: key, project: project, fph: fph, inc: inc, c: c, reason: reason, resolveNow: resolveNow,
			republish: republish})
	}
	t.mu.Unlock()
	for _, w := range due {
		select {
		case t.slots <- struct{}{}:
		default:
			return
		}
		t.mu.Lock()
		t.busy[w.key] = true
		t.mu.Unlock()
		t.wg.Add(1)
		go func() {
			defer func() {
				<-t.slots
				t.mu.Lock()
				delete(t.busy, w.key)
				t.mu.Unlock()
				t.wg.Done()
			}()
			t.run(w)
		}()
	}
}

// compiled is the project's pipeline when it is in incident mode. A project that left
// incident mode makes no more incident calls; its incidents stay as they are.
func (t *ticker) compiled(project string) (*pipelinecfg.Compiled, bool) {
	proj, ok := t.p.mirror.Project(project)
	if !ok {
		return nil, false
	}
	c, err := t.p.pipelines.Get(proj)
	if err != nil || c.Mode != mirror.ModeIncident {
		return nil, false
	}
	return c, true
}

func (t *ticker) run(w work) {
	store, err := t.p.bucket(t.calls)
	if err != nil {
		return
	}
	if w.republish {
		t.republish(store, w)
	}
	if w.resolveNow {
		// Resolving comes first: what was due before may not be any more (an update of a
		// resolved incident); the next tick sees the resolved incident's calls.
		ctx, cancel := context.WithTimeout(t.calls, settleTimeout)
		defer cancel()
		inc, notices, err := store.ResolveIdle(ctx, w.project, w.fph, w.c.Incident, time.Now())
		if err != nil {
			t.p.logger.Debug("idle incident not resolved yet", zap.String("project_id", w.project), zap.Error(err))
			return
		}
		t.published(ctx, store, w, inc.ID, notices)
		return
	}
	if w.reason != "" {
		t.call(store, w)
	}
}

// republish publishes the notices left in an incident's outbox past outboxAge.
func (t *ticker) republish(store *incident.Store, w work) {
	ctx, cancel := context.WithTimeout(t.calls, settleTimeout)
	defer cancel()
	inc, err := store.Get(ctx, w.project, w.inc.ID)
	if err == nil {
		if n := incident.PendingNotices(inc, time.Now().Add(-outboxAge)); len(n) > 0 {
			t.published(ctx, store, w, inc.ID, n)
			return
		}
	}
	if err != nil {
		t.p.logger.Debug("incident outbox not read", zap.String("project_id", w.project), zap.Error(err))
	}
}

// call claims the due call and makes it.
func (t *ticker) call(store *incident.Store, w work) {
	ctx := t.calls
	log := t.p.logger.With(zap.String("project_id", w.project), zap.String("incident_id", w.inc.ID))
	ids, err := t.p.issuer(ctx)
	if err != nil {
		log.Debug("no request id can be issued yet", zap.Error(err))
		return
	}
	claimed, ok, err := store.Claim(ctx, w.project, w.fph, w.reason, ids.New(w.project), t.p.owner, time.Now(), w.c.Incident, t.p.cfg.ClaimTimeout)
	if err != nil {
		log.Debug("incident call not claimed", zap.Error(err))
		return
	}
	if !ok || claimed.Pending == nil {
		return // another process holds it, or it is no longer due
	}
	// A claim taken over keeps its request id and reason: the same call, made again.
	requestID, reason := claimed.Pending.RequestID, claimed.Pending.Reason
	log = log.With(zap.String("request_id", requestID), zap.String("reason", reason))
	// The heartbeat starts before the body: building it may wait for another process's
	// events (storedWait), which must not let the claim go stale.
	hbDone := make(chan struct{})
	hbStopped := make(chan struct{})
	go t.heartbeat(store, w, requestID, hbDone, hbStopped)
	body, err := t.body(ctx, w.project, w.c, claimed)
	if err != nil {
		close(hbDone)
		<-hbStopped
		log.Warn("incident call not made: its events could not be read; it is made again after claim_timeout", zap.Error(err))
		t.p.tel.IncidentCalls.Add(context.WithoutCancel(ctx), 1, attrs("reason", reason, "outcome", "failed"))
		return
	}

	o := deliverylog.NewOutcome()
	cctx := principal.NewContext(ctx, principal.Principal{ProjectID: w.project, Scope: "pipeline"})
	cctx = pipelinectx.WithOutcome(cctx, o)
	cctx = pipelinectx.WithDrain(cctx, t.drain)
	ld, lrs := pipelinedata.New()
	pipelinedata.Append(lrs, pipelinedata.Item{Body: body, Signal: "incident", Kind: pipelinedata.KindIncidentCall,
		RequestID: requestID, Group: eventsGroupPrefix + claimed.ID})
	err = t.p.next.ConsumeLogs(cctx, ld)
	close(hbDone)
	<-hbStopped
	if err != nil {
		// Not settled (stopping, NATS or the agent's project away): left claimed, so
		// another process, or this one after claim_timeout, makes it under the same id.
		t.p.tel.IncidentCalls.Add(context.WithoutCancel(ctx), 1, attrs("reason", reason, "outcome", "failed"))
		log.Info("incident call not settled; it is made again after claim_timeout under the same request id", zap.Error(err))
		return
	}
	delivered, deadLettered := o.Calls()
	outcome := outcomeRefused
	switch {
	case delivered > 0:
		outcome = outcomeDelivered
	case deadLettered > 0:
		outcome = outcomeDeadLettered
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	t.p.tel.IncidentCalls.Add(sctx, 1, attrs("reason", reason, "outcome", outcome))
	_, notices, err := store.Complete(sctx, w.project, w.fph, requestID, outcome, time.Now())
	if err != nil {
		log.Warn("incident call made but not recorded; it is made again after claim_timeout under the same request id", zap.Error(err))
		return
	}
	t.published(sctx, store, w, claimed.ID, notices)
}

// published publishes a change's notices and then takes them out of the incident's
// outbox. What failed stays there, and is tried again outboxRetry later.
func (t *ticker) published(ctx context.Context, store *incident.Store, w work, id string, notices []incident.Notice) {
	if len(notices) == 0 {
		return
	}
	if !t.publish(ctx, w.key, w.project, id, notices) {
		t.mu.Lock()
		t.outboxAfter[w.key] = time.Now().Add(outboxRetry)
		t.mu.Unlock()
		return
	}
	t.p.published(ctx, store, w.project, notices)
}

// heartbeat keeps the claim fresh while the call runs, every third of claim_timeout.
func (t *ticker) heartbeat(store *incident.Store, w work, requestID string, done <-chan struct{}, stopped chan<- struct{}) {
	defer close(stopped)
	tk := time.NewTicker(t.p.cfg.ClaimTimeout / 3)
	defer tk.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.calls.Done():
			return
		case <-tk.C:
			ctx, cancel := context.WithTimeout(t.calls, t.p.cfg.ClaimTimeout/3)
			err := store.Heartbeat(ctx, w.project, w.fph, requestID, time.Now())
			cancel()
			if err != nil {
				t.p.logger.Debug("incident call heartbeat not written", zap.String("project_id", w.project), zap.Error(err))
			}
		}
	}
}

// body builds the call: the incident's summary, its new events since the last call
// (at most incident.MaxEventsPerCall, the newest; the rest counted in events_left_out) and
// its fingerprint's context within window_duration, cut to the window budget.
func (t *ticker) body(ctx context.Context, project string, c *pipelinecfg.Compiled, inc incident.Incident) ([]byte, error) {
	since := inc.NewSince
	if since.IsZero() {
		since = inc.OpenedAt
	}
	// Up to the claim: what was stored since goes with the next call, which starts
	// there (Complete moves NewSince to the claim's EventsSince).
	events, total, err := t.storedEvents(ctx, project, inc, since)
	if err != nil {
		return nil, err
	}
	// The store may hold fewer than the incident counted: expired, or kept in the memory
	// of another process (no Redis).
	leftOut := max(total, int(inc.NewEvents)) - len(events)
	if leftOut > 0 {
		t.p.tel.IncidentEventsLeftOut.Add(ctx, int64(leftOut))
	} else {
		leftOut = 0
	}
	window, _, err := t.p.store.Window(ctx, project, contextGroupPrefix+inc.Fingerprint, time.Now().Add(-c.WindowDuration), c.WindowMaxEvents)
	if err != nil {
		return nil, err
	}
	window, _ = agentbody.FitWindow(window, c.WindowMaxBytes)
	summary, err := json.Marshal(inc.Summary())
	if err != nil {
		return nil, err
	}
	return agentbody.IncidentCall(summary, inc.Pending.Reason, events, leftOut, window), nil
}

// storedWait bounds how long a call waits for events its incident counted before the
// claim but that are not stored yet, and storedPoll how often it reads them again.
// Another process (sharing events through Redis) counts a batch's events in Apply before
// it stores them; this process's own batches are waited for exactly (storing), another's
// only here. Past storedWait the call goes with what is there, the rest counted in
// events_left_out (expired, or in the memory of a process without Redis).
const (
	storedWait = 2 * time.Second
	storedPoll = 100 * time.Millisecond
)

// storedEvents reads the incident's events from since up to the claim, reading again
// while the store holds fewer than the claim counted, for at most storedWait.
func (t *ticker) storedEvents(ctx context.Context, project string, inc incident.Incident, since time.Time) ([][]byte, int, error) {
	read := func() ([][]byte, int, error) {
		return t.p.store.WindowBefore(ctx, project, eventsGroupPrefix+inc.ID, since, inc.Pending.EventsSince, incident.MaxEventsPerCall)
	}
	events, total, err := read()
	if err != nil || int64(total) >= inc.Pending.NewEventsAtClaim {
		return events, total, err
	}
	wait := time.NewTimer(storedWait)
	defer wait.Stop()
	poll := time.NewTicker(storedPoll)
	defer poll.Stop()
	for {
		select {
		case <-ctx.Done():
			return events, total, nil
		case <-wait.C:
			return events, total, nil
		case <-poll.C:
		}
		e, n, err := read()
		if err != nil {
			return events, total, nil
		}
		if events, total = e, n; int64(total) >= inc.Pending.NewEventsAtClaim {
			return events, total, nil
		}
	}
}
