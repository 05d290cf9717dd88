package delivery

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

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

// errUnknownKindFn: a delivery kind neither exporter replays.
const errUnknownKindFn = "delivery kind %q cannot be replayed by this version"

// ReplayFunc sends old, a delivery of project proj, again (bulk: as part of a replay of
// all dead letters). An error wrapping ErrRequeue puts the job back; another drops it.
type ReplayFunc func(ctx context.Context, proj mirror.Project, old deliverylog.Delivery, bulk bool) error

// ErrRequeue marks a job to be put back: its replay could not be settled now.
var ErrRequeue = errors.New("replay not settled")

// errElsewhere marks a job for a kind of delivery another exporter replays: it is put
// back for that exporter's replay loop, which shares the queue's consumer.
var errElsewhere = errors.New("replayed by the other exporter")

// replayElsewhere is how soon a job put back for the other exporter comes back: the
// server hands it to the next waiting loop, which this one's is not yet.
const replayElsewhere = 200 * time.Millisecond

// replayLoop runs jobs until ctx ends (Shutdown).
func (e *Engine) replayLoop(ctx context.Context, cons jetstream.Consumer) {
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

func (e *Engine) runJob(ctx context.Context, m jetstream.Msg) {
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
	case errors.Is(err, errElsewhere):
		// Sooner the first times (the other exporter's loop is usually waiting), then no
		// more often than a job that could not be settled, in case no process runs it.
		delay := replayRetry
		if md, merr := m.Metadata(); merr == nil && md.NumDelivered < uint64(replayRetry/replayElsewhere) {
			delay = time.Duration(md.NumDelivered) * replayElsewhere
		}
		_ = m.NakWithDelay(delay)
	case errors.Is(err, ErrRequeue):
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
func (e *Engine) replay(ctx context.Context, job deliverylog.Job) error {
	r := e.log.Reader()
	if r == nil {
		return fmt.Errorf("%w: the delivery log is not set up yet", ErrRequeue)
	}
	gctx, cancel := context.WithTimeout(ctx, setupTimeout)
	old, err := r.Get(gctx, job.Project, job.DeliveryID)
	cancel()
	switch {
	case errors.Is(err, deliverylog.ErrNotFound), errors.Is(err, deliverylog.ErrInvalidID):
		return fmt.Errorf("delivery %s of project %s is not in the log", job.DeliveryID, job.Project)
	case err != nil:
		return fmt.Errorf("%w: %v", ErrRequeue, err)
	}
	proj, ok := e.projects.Project(job.Project)
	switch {
	case !ok && !e.projects.Ready():
		return fmt.Errorf("%w: the configuration mirror is not loaded yet", ErrRequeue)
	case !ok:
		return fmt.Errorf("project %s no longer exists", job.Project)
	}
	if f, ok := e.replays[old.Kind]; ok {
		return f(ctx, proj, old, job.Bulk)
	}
	if old.Kind == deliverylog.KindAgent || old.Kind == deliverylog.KindSink {
		return errElsewhere
	}
	return fmt.Errorf(errUnknownKindFn, old.Kind)
}

// maxReplayChain bounds following replay_of back to the first call.
const maxReplayChain = 16

// OriginalCall follows d's replay_of back to the call the pipeline made; false when the
// chain is broken (purged) or too long.
func (e *Engine) OriginalCall(ctx context.Context, project string, d deliverylog.Delivery) (deliverylog.Delivery, bool) {
	r := e.log.Reader()
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

// Unreplayable logs a replay d of old that could not be sent as dead-lettered, saying
// why, and marks old replayed by it, as a sent replay does: d stands for old from now on,
// so a bulk replay takes d (and finds it still cannot be sent) instead of old as well.
// d points at old's dead letter: once the cause is fixed (the destination enabled
// again), replaying d sends what is stored there.
func (e *Engine) Unreplayable(project string, old, d deliverylog.Delivery, why string) {
	e.log.Record(project, d)
	e.log.Finish(project, d.ID, deliverylog.Final{State: deliverylog.StateDeadLettered, Error: why,
		DeadLetterSeq: old.DeadLetterSeq})
	e.log.Superseded(project, old, d.ID)
}

// StillUnreplayable reports whether a bulk replay of old needs no new entry: old is itself
// a replay that could not be sent, for the same reason that stops this one. Logging it
// again would say nothing new and add a dead letter per click of "replay all"; old stays
// the one dead letter standing for the records, and is taken again by the next bulk
// replay, which sends it once the cause is gone. A replay asked for by id is always
// logged: someone asked for that delivery and is answered in the log.
func StillUnreplayable(old deliverylog.Delivery, why string, bulk bool) bool {
	return bulk && old.ReplayOf != "" && old.Attempts == 0 && old.State == deliverylog.StateDeadLettered && old.Error == why
}

// StoredBody is the dead letter of kind at seq in the project's dead-letter stream; nil
// when seq is 0 or the message is gone. Only errors worth trying again are returned.
func (e *Engine) StoredBody(ctx context.Context, project string, seq uint64, kind string) ([]byte, error) {
	if seq == 0 {
		return nil, nil
	}
	return e.StoredMsg(ctx, streams.DeadLetterStream(project), seq, streams.DeadLetterSubject(project, kind))
}

// StoredMsg reads message seq of stream, nil when it is gone or is not on subject (the
// log's pointer is only trusted within the project's own stream and subject).
func (e *Engine) StoredMsg(ctx context.Context, stream string, seq uint64, subject string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	s, err := e.js.Stream(ctx, stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRequeue, err)
	}
	m, err := s.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRequeue, err)
	}
	if m.Subject != subject {
		return nil, nil
	}
	return m.Data, nil
}
