package agentexporter

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelinedata"
	"github.com/otelcol-svc/otelcol-svc/internal/deliverylog"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
)

// Replays: the console queues jobs (internal/deliverylog, svc-replays); every exporter
// process with the log on takes them one at a time from the one shared durable consumer
// and sends each named delivery again as a new delivery naming the old one (replay_of),
// through the same path as the first time: attempts logged, dead-lettered again if it
// fails. A job is acked once its replay is settled, and put back with a delay when it
// cannot be (shutdown, NATS away), so a replay is at least once like any delivery.
const (
	// replayAckWait is short and fixed: every process sets the shared consumer the
	// same way, and a running replay (which may take a retry budget of minutes) tells
	// JetStream it is still working on the job every replayProgress.
	replayAckWait  = time.Minute
	replayProgress = 20 * time.Second
	// replayRetry is how long a job that could not be settled waits before it comes back.
	replayRetry = 10 * time.Second
)

// Why a replay could not be sent; the replay is logged as dead-lettered with it.
const (
	errBodyGone      = "the original body is no longer stored (its dead letter expired and the log kept only its first 64 KiB); it cannot be replayed"
	errPayloadGone   = "the original result is no longer stored (its dead letter and its output stream message expired); it cannot be replayed"
	errSinkGone      = "the destination no longer exists; the result cannot be replayed to it"
	errSinkDisabled  = "the destination is disabled; enable it to replay to it"
	errUnknownKindFn = "delivery kind %q cannot be replayed by this version"
)

// errRequeue marks a job to be put back: its replay could not be settled now.
var errRequeue = errors.New("replay not settled")

// replayLoop runs jobs until ctx ends (Shutdown).
func (e *agentExporter) replayLoop(ctx context.Context, cons jetstream.Consumer) {
	it, err := cons.Messages(jetstream.PullMaxMessages(1))
	if err != nil {
		e.logger.Warn("replays are not run by this process: the replay queue cannot be read", zap.Error(err))
		return
	}
	defer it.Stop()
	for {
		m, err := it.Next(jetstream.NextContext(ctx))
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return
			}
			// A missed heartbeat while NATS is away; the iterator recovers on its own.
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
			continue
		}
		e.runJob(ctx, m)
	}
}

func (e *agentExporter) runJob(ctx context.Context, m jetstream.Msg) {
	job, err := deliverylog.ParseJob(m.Data())
	if err != nil {
		e.logger.Warn("replay job dropped: it cannot be read", zap.Error(err))
		_ = m.Term()
		return
	}
	done := make(chan struct{})
	defer close(done)
	go func() {
		t := time.NewTicker(replayProgress)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				_ = m.InProgress()
			}
		}
	}()
	err = e.replay(ctx, job)
	switch {
	case err == nil:
		_ = m.Ack()
	case errors.Is(err, errRequeue):
		if ctx.Err() == nil {
			e.logger.Warn("replay not settled; it is tried again", zap.String("project", job.Project),
				zap.String("delivery", job.DeliveryID), zap.Error(err))
		}
		_ = m.NakWithDelay(replayRetry)
	default:
		e.logger.Warn("replay job dropped", zap.String("project", job.Project),
			zap.String("delivery", job.DeliveryID), zap.Error(err))
		_ = m.Ack()
	}
}

// replay sends job's delivery again. Everything about it comes from the log entry of
// the job's project: the job names only which one.
func (e *agentExporter) replay(ctx context.Context, job deliverylog.Job) error {
	r := e.log.getReader()
	if r == nil {
		return fmt.Errorf("%w: the delivery log is not set up yet", errRequeue)
	}
	gctx, cancel := context.WithTimeout(ctx, setupTimeout)
	old, err := r.Get(gctx, job.Project, job.DeliveryID)
	cancel()
	switch {
	case errors.Is(err, deliverylog.ErrNotFound), errors.Is(err, deliverylog.ErrInvalidID):
		return fmt.Errorf("delivery %s of project %s is not in the log", job.DeliveryID, job.Project)
	case err != nil:
		return fmt.Errorf("%w: %v", errRequeue, err)
	}
	proj, ok := e.cache.Project(job.Project)
	switch {
	case !ok && !e.cache.Ready():
		return fmt.Errorf("%w: the configuration mirror is not loaded yet", errRequeue)
	case !ok:
		return fmt.Errorf("project %s no longer exists", job.Project)
	}
	switch old.Kind {
	case deliverylog.KindAgent:
		return e.replayCall(ctx, proj, old, job.Bulk)
	case deliverylog.KindSink:
		return e.replaySink(ctx, proj, old, job.Bulk)
	}
	return fmt.Errorf(errUnknownKindFn, old.Kind)
}

func (e *agentExporter) replayCall(ctx context.Context, proj mirror.Project, old deliverylog.Delivery, bulk bool) error {
	body, err := e.storedBody(ctx, proj.ID, old.DeadLetterSeq, deadLetterKind)
	if err != nil {
		return err
	}
	if body == nil && len(old.RequestBody) > 0 && !old.RequestTruncated {
		body = old.RequestBody
	}
	if body == nil && stillUnreplayable(old, errBodyGone, bulk) {
		return nil
	}
	ids, err := e.issuer(ctx)
	if err != nil {
		return fmt.Errorf("%w: no request id can be issued yet: %v", errRequeue, err)
	}
	id := ids.New(proj.ID)
	if body == nil {
		e.unreplayable(proj.ID, old, deliverylog.Delivery{ID: id, Kind: deliverylog.KindAgent, RequestID: id,
			Records: old.Records, Seqs: old.Seqs, TraceID: old.TraceID, ReplayOf: old.ID}, errBodyGone)
		return nil
	}
	c := call{body: body, records: old.Records, seqs: old.Seqs, traceID: old.TraceID}
	deadLettered, err := e.makeCall(ctx, proj, c, id, old.ID)
	if err != nil {
		return fmt.Errorf("%w: %v", errRequeue, err)
	}
	// Settled either way: the replay stands for the old call from now on (a bulk replay
	// of dead letters takes the replay if it failed too, never both).
	e.log.superseded(proj.ID, old, id)
	counts := deliverylog.Counters{Replayed: 1, Calls: 1}
	if deadLettered {
		counts = deliverylog.Counters{Replayed: 1, CallsDeadLettered: 1}
	}
	led, err := e.log.ledgerNow(ctx)
	if err != nil {
		return nil // the replay is done; only its count is lost
	}
	led.Add(proj.ID, counts)
	if deadLettered {
		return nil
	}
	lctx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	// Only the first call's records were counted (dead-lettered, when the pipeline
	// settled its batch); a replay of a replay moves that call's records, once.
	root, ok := e.originalCall(lctx, proj.ID, old)
	if !ok || root.State != deliverylog.StateDeadLettered {
		return nil
	}
	if err := led.Replayed(lctx, e.js, proj.ID, root.ID, root.Records); err != nil {
		e.logger.Warn("replayed call not moved from dead_lettered in the ledger", zap.String("project", proj.ID),
			zap.String("delivery", root.ID), zap.Error(err))
	}
	return nil
}

// maxReplayChain bounds following replay_of back to the first call.
const maxReplayChain = 16

// originalCall follows d's replay_of back to the call the pipeline made; false when the
// chain is broken (purged) or too long.
func (e *agentExporter) originalCall(ctx context.Context, project string, d deliverylog.Delivery) (deliverylog.Delivery, bool) {
	r := e.log.getReader()
	for range maxReplayChain {
		if d.ReplayOf == "" {
			return d, true
		}
		prev, err := r.Get(ctx, project, d.ReplayOf)
		if err != nil {
			return d, false
		}
		d = prev
	}
	return d, false
}

func (e *agentExporter) replaySink(ctx context.Context, proj mirror.Project, old deliverylog.Delivery, bulk bool) error {
	id := "snk_" + randomHex(16)
	d := deliverylog.Delivery{ID: id, Kind: deliverylog.KindSink, SinkID: old.SinkID, SinkKind: old.SinkKind,
		RequestID: old.RequestID, SourceSeq: old.SourceSeq, Records: 1, Unmatched: old.Unmatched, ReplayOf: old.ID}
	sink, ok := findSink(proj, old.SinkID)
	switch {
	case !ok:
		if !stillUnreplayable(old, errSinkGone, bulk) {
			e.unreplayable(proj.ID, old, d, errSinkGone)
		}
		return nil
	case !sink.Enabled:
		if !stillUnreplayable(old, errSinkDisabled, bulk) {
			e.unreplayable(proj.ID, old, d, errSinkDisabled)
		}
		return nil
	}
	// The dead letter holds the agent's payload whole; else the output stream may still.
	payload, err := e.storedBody(ctx, proj.ID, old.DeadLetterSeq, deadLetterKindSink)
	if err != nil {
		return err
	}
	if payload == nil && old.SourceSeq > 0 {
		if payload, err = e.storedMsg(ctx, streams.OutputStream(proj.ID), old.SourceSeq, streams.OutputSubject(proj.ID)); err != nil {
			return err
		}
	}
	if payload == nil {
		if !stillUnreplayable(old, errPayloadGone, bulk) {
			e.unreplayable(proj.ID, old, d, errPayloadGone)
		}
		return nil
	}
	// The new delivery id is the webhook-id: a receiving side that deduplicates takes
	// the replay it was asked for.
	it := pipelinedata.Item{Body: payload, Kind: pipelinedata.KindResult, Seq: old.SourceSeq, SinkID: sink.ID,
		RequestID: old.RequestID, MsgID: id, Unmatched: old.Unmatched}
	if _, err := e.deliverResult(ctx, proj, sink, it, id, old.ID); err != nil {
		return fmt.Errorf("%w: %v", errRequeue, err)
	}
	e.log.superseded(proj.ID, old, id)
	if led, err := e.log.ledgerNow(ctx); err == nil {
		led.Add(proj.ID, deliverylog.Counters{Replayed: 1})
	}
	return nil
}

// unreplayable logs a replay d of old that could not be sent as dead-lettered, saying
// why, and marks old replayed by it, as a sent replay does: d stands for old from now on,
// so a bulk replay takes d (and finds it still cannot be sent) instead of old as well.
// d points at old's dead letter: once the cause is fixed (the destination enabled
// again), replaying d sends what is stored there.
func (e *agentExporter) unreplayable(project string, old, d deliverylog.Delivery, why string) {
	e.log.record(project, d)
	e.log.finish(project, d.ID, deliverylog.Final{State: deliverylog.StateDeadLettered, Error: why,
		DeadLetterSeq: old.DeadLetterSeq})
	e.log.superseded(project, old, d.ID)
}

// stillUnreplayable reports whether a bulk replay of old needs no new entry: old is itself
// a replay that could not be sent, for the same reason that stops this one. Logging it
// again would say nothing new and add a dead letter per click of "replay all"; old stays
// the one dead letter standing for the records, and is taken again by the next bulk
// replay, which sends it once the cause is gone. A replay asked for by id is always
// logged: someone asked for that delivery and is answered in the log.
func stillUnreplayable(old deliverylog.Delivery, why string, bulk bool) bool {
	return bulk && old.ReplayOf != "" && old.Attempts == 0 && old.State == deliverylog.StateDeadLettered && old.Error == why
}

// storedBody is the dead letter of kind at seq in the project's dead-letter stream; nil
// when seq is 0 or the message is gone. Only errors worth trying again are returned.
func (e *agentExporter) storedBody(ctx context.Context, project string, seq uint64, kind string) ([]byte, error) {
	if seq == 0 {
		return nil, nil
	}
	return e.storedMsg(ctx, streams.DeadLetterStream(project), seq, streams.DeadLetterSubject(project, kind))
}

// storedMsg reads message seq of stream, nil when it is gone or is not on subject (the
// log's pointer is only trusted within the project's own stream and subject).
func (e *agentExporter) storedMsg(ctx context.Context, stream string, seq uint64, subject string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	s, err := e.js.Stream(ctx, stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errRequeue, err)
	}
	m, err := s.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errRequeue, err)
	}
	if m.Subject != subject {
		return nil, nil
	}
	return m.Data, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
