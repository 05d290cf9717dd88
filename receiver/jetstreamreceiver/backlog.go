package jetstreamreceiver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
	"github.com/otelcol-svc/otelcol-svc/internal/validation"
)

// Backlogs. A project's pipeline consumer starts from new records
// (consumers.go); stored records are processed only when the project's user asks for it:
// the control plane then puts a mirror.Backlog in the project's entry, naming a range of
// its raw stream that a preview (internal/collector/validationresponder) counted. The pipeline
// role runs it here, once:
//
//   - on a durable consumer of its own, "<durable>-backlog-<id>", from FirstSeq, so a
//     process restarted mid-run resumes where the run was (redelivering at most the batch
//     it was working on), and its calls never mix with live records';
//   - through the same pipeline (process), in the batches the preview counted: records
//     FirstSeq+k·N to FirstSeq+(k+1)·N-1 (N = validation.BacklogBatchRecords) are batch
//     k, handed on whole, with no linger; records past LastSeq are the live consumer's and
//     are acked unprocessed;
//   - reporting in the svc-backlogs bucket (BacklogState), at most about once a second
//     and at the end, when it deletes its consumer. A done (or failed) backlog is never
//     run again, whatever the mirror still says; a paused project's waits.
//
// Only a project's newest backlog runs: one that the mirror no longer carries (replaced,
// or the agent URL removed) is stopped, reported failed, and its consumer deleted.

// backlogRun is a backlog this process runs (or ran: finished ones stay until the mirror
// drops them, so they are not started again).
type backlogRun struct {
	id     string
	cancel context.CancelFunc
	done   chan struct{}
}

// backlogProgressEvery is how often a run reports its progress.
const backlogProgressEvery = time.Second

// backlogStall, past the ack wait, is how long a batch missing records another holder
// has waits for them before it is handed on as it is: with several pipeline processes one
// may hold part of a batch another holds the rest of. (A record the stream's limits
// removed is not waited for: nobody holds it.)
const backlogStall = 5 * time.Second

func (r *jsReceiver) backlogConsumer(id string) string { return r.cfg.Durable + "-backlog-" + id }

// wantedBacklogs lists the backlogs to run: the newest of each project being consumed
// (agent URL set, pipeline valid), by project.
func (r *jsReceiver) wantedBacklogs(want map[string]target) map[string]mirror.Backlog {
	out := map[string]mirror.Backlog{}
	if r.cfg.Consume != ConsumeRaw {
		return out
	}
	for _, t := range want {
		if t.sink != "" {
			continue
		}
		p, ok := r.cache.Project(t.project)
		if ok && p.Backlog != nil && streams.ValidToken(p.Backlog.ID) {
			out[t.project] = *p.Backlog
		}
	}
	return out
}

// reconcileBacklogs starts the backlogs wanted and stops the others. Called by reconcile,
// outside r.mu.
func (r *jsReceiver) reconcileBacklogs(want map[string]mirror.Backlog) {
	type stopped struct {
		project string
		run     *backlogRun
	}
	var stop []stopped
	r.mu.Lock()
	for project, run := range r.backlogs {
		if b, ok := want[project]; ok && b.ID == run.id {
			continue
		}
		delete(r.backlogs, project)
		stop = append(stop, stopped{project, run})
	}
	for project, b := range want {
		if _, ok := r.backlogs[project]; ok || r.ctx.Err() != nil {
			continue
		}
		ctx, cancel := context.WithCancel(r.ctx)
		run := &backlogRun{id: b.ID, cancel: cancel, done: make(chan struct{})}
		r.backlogs[project] = run
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			defer close(run.done)
			r.runBacklog(ctx, project, b)
		}()
	}
	r.mu.Unlock()
	for _, s := range stop {
		s.run.cancel()
		<-s.run.done
		// A project paused (its pipeline invalid) keeps its run's consumer, to resume; one
		// whose backlog was replaced or removed, or whose agent URL was removed, ends it.
		// A project gone from the mirror is deleted with its streams.
		p, ok := r.cache.Project(s.project)
		if !ok || (p.Pipeline.AgentEndpointURL != "" && p.Backlog != nil && p.Backlog.ID == s.run.id) {
			continue
		}
		reason := "stopped: the project's agent URL was removed"
		if p.Pipeline.AgentEndpointURL != "" {
			reason = "stopped: the project no longer names this backlog (another one was started, or it was cancelled)"
		}
		r.abandonBacklog(s.project, s.run.id, reason)
	}
}

// abandonBacklog reports a backlog that is not done as failed and deletes its consumer.
func (r *jsReceiver) abandonBacklog(project, id, reason string) {
	ctx, cancel := context.WithTimeout(r.ctx, 10*time.Second)
	defer cancel()
	kv, err := r.backlogKV(ctx)
	if err == nil {
		_, err = streams.UpdateKV(ctx, kv, validation.BacklogKey(project, id), func(old []byte, exists bool) ([]byte, error) {
			var st validation.BacklogState
			if exists {
				if json.Unmarshal(old, &st) == nil && st.State != validation.BacklogRunning {
					return nil, streams.ErrKVUnchanged
				}
			}
			st.ID, st.State, st.Error, st.UpdatedAt = id, validation.BacklogFailed, reason, time.Now().UTC()
			return json.Marshal(st)
		})
	}
	if err != nil && r.ctx.Err() == nil {
		r.settings.Logger.Warn("could not report a stopped backlog", zap.String("project_id", project), zap.String("backlog_id", id), zap.Error(err))
	}
	err = r.js.DeleteConsumer(ctx, streams.RawStream(project), r.backlogConsumer(id))
	if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) && !errors.Is(err, jetstream.ErrStreamNotFound) && r.ctx.Err() == nil {
		r.settings.Logger.Warn("could not delete a stopped backlog's consumer", zap.String("project_id", project), zap.String("backlog_id", id), zap.Error(err))
	}
}

// backlogKV opens (or creates) the bucket runs report in. No TTL: a done entry is what
// keeps a backlog the mirror still carries from running again, so it has the replicas of
// the streams (a node lost must not run a finished backlog again: paid agent calls), and
// an existing bucket is bound as it is, never rewritten by a process configured otherwise.
func (r *jsReceiver) backlogKV(ctx context.Context) (jetstream.KeyValue, error) {
	r.backlogMu.Lock()
	defer r.backlogMu.Unlock()
	if r.backlogBucket != nil {
		return r.backlogBucket, nil
	}
	kv, err := r.js.KeyValue(ctx, validation.BacklogsBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = r.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket: validation.BacklogsBucket, Description: "otelcol-svc backlog runs, by project and backlog id",
			History: 1, Storage: jetstream.FileStorage, Replicas: max(r.cfg.Stream.Replicas, 1),
		})
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = r.js.KeyValue(ctx, validation.BacklogsBucket)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("open bucket %s: %w", validation.BacklogsBucket, err)
	}
	r.backlogBucket = kv
	return kv, nil
}

// runBacklog runs a backlog until it is done, retrying after errors (NATS away) with the
// consumers' backoff, or until ctx ends.
func (r *jsReceiver) runBacklog(ctx context.Context, project string, b mirror.Backlog) {
	log := []zap.Field{zap.String("project_id", project), zap.String("backlog_id", b.ID)}
	waits := &backoff.ExponentialBackOff{InitialInterval: 200 * time.Millisecond, Multiplier: 2, MaxInterval: 5 * time.Second}
	_, _ = backoff.Retry(ctx, func() (struct{}, error) {
		return struct{}{}, r.backlogOnce(ctx, project, b)
	}, backoff.WithBackOff(waits), backoff.WithMaxElapsedTime(0), backoff.WithNotify(func(err error, in time.Duration) {
		r.settings.Logger.Warn("backlog run stopped; restarting", append(log, zap.Error(err), zap.Duration("in", in))...)
	}))
}

// errBacklogEnded: the run's consumer went away because another process finished it.
var errBacklogEnded = errors.New("the backlog's consumer was deleted")

// backlogOnce runs a backlog from where its consumer is; nil when it is done.
func (r *jsReceiver) backlogOnce(ctx context.Context, project string, b mirror.Backlog) error {
	kv, err := r.backlogKV(ctx)
	if err != nil {
		return err
	}
	key := validation.BacklogKey(project, b.ID)
	if st, ok, err := readBacklogState(ctx, kv, key); err != nil {
		return err
	} else if ok && st.State != validation.BacklogRunning {
		// Done or failed: never again. Its consumer may outlive a crash between the
		// report and its deletion.
		_ = r.js.DeleteConsumer(ctx, streams.RawStream(project), r.backlogConsumer(b.ID))
		return nil
	}
	run := &backlog{r: r, kv: kv, key: key, project: project, b: b}
	if run.b.FirstSeq == 0 {
		run.b.FirstSeq = 1
	}
	if run.b.LastSeq < run.b.FirstSeq {
		return run.finish(ctx, validation.BacklogDone, "")
	}
	if err := run.report(ctx, validation.BacklogRunning, ""); err != nil {
		return err
	}
	cons, err := r.backlogConsumerFor(ctx, project, run.b)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return run.finish(ctx, validation.BacklogFailed, "the project's stored records are gone (its raw stream does not exist)")
	}
	if err != nil {
		return err
	}
	r.settings.Logger.Info("running a backlog", zap.String("project_id", project), zap.String("backlog_id", b.ID),
		zap.Uint64("first_seq", run.b.FirstSeq), zap.Uint64("last_seq", run.b.LastSeq))
	err = run.consume(ctx, cons)
	if err != nil && run.processed > 0 {
		// Stopped (a shutdown, NATS away): what this process handled still counts.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_ = run.report(rctx, validation.BacklogRunning, "")
		cancel()
	}
	if errors.Is(err, errBacklogEnded) {
		if st, ok, rerr := readBacklogState(ctx, kv, key); rerr == nil && ok && st.State != validation.BacklogRunning {
			return run.flushProgress(ctx)
		}
	}
	return err
}

func readBacklogState(ctx context.Context, kv jetstream.KeyValue, key string) (validation.BacklogState, bool, error) {
	var st validation.BacklogState
	e, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return st, false, nil
	}
	if err != nil {
		return st, false, err
	}
	if err := json.Unmarshal(e.Value(), &st); err != nil {
		return st, false, fmt.Errorf("backlog state %s: %w", key, err)
	}
	return st, true, nil
}

// backlogConsumerFor returns the run's consumer, creating it from FirstSeq the first time.
func (r *jsReceiver) backlogConsumerFor(ctx context.Context, project string, b mirror.Backlog) (jetstream.Consumer, error) {
	stream, name := streams.RawStream(project), r.backlogConsumer(b.ID)
	c, err := r.js.Consumer(ctx, stream, name)
	if err == nil || !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return c, err
	}
	n := validation.BacklogBatchRecords
	c, err = r.js.CreateConsumer(ctx, stream, jetstream.ConsumerConfig{
		Durable:       name,
		Description:   "otelcol-svc backlog " + b.ID,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       r.cfg.AckWait,
		MaxDeliver:    -1,
		MaxAckPending: 4 * n,
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:   b.FirstSeq,
	})
	if errors.Is(err, jetstream.ErrConsumerExists) {
		c, err = r.js.Consumer(ctx, stream, name)
	}
	return c, err
}

// backlog is one run of a backlog in this process.
type backlog struct {
	r       *jsReceiver
	kv      jetstream.KeyValue
	key     string
	project string
	b       mirror.Backlog

	// processed counts what this process handed on and acked since its last report.
	processed  int
	reportedAt time.Time

	mu sync.Mutex
	// held are the messages fetched and not settled yet, by batch; arrived is when each
	// batch last grew.
	held    map[uint64]map[uint64]jetstream.Msg
	arrived map[uint64]time.Time
	// working is the batch in the pipeline.
	working []jetstream.Msg
}

// batchOf is the batch of a sequence, and the batch's last sequence.
func (bl *backlog) batchOf(seq uint64) uint64 {
	return (seq - bl.b.FirstSeq) / validation.BacklogBatchRecords
}

func (bl *backlog) batchLast(k uint64) uint64 {
	return min(bl.b.FirstSeq+(k+1)*validation.BacklogBatchRecords-1, bl.b.LastSeq)
}

// consume fetches the range and hands it on a batch at a time until the run is done.
func (bl *backlog) consume(ctx context.Context, cons jetstream.Consumer) error {
	r := bl.r
	bl.held, bl.arrived = map[uint64]map[uint64]jetstream.Msg{}, map[uint64]time.Time{}
	kctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); bl.keepAlive(kctx, r.cfg.AckWait/3) }()
	defer func() {
		stop()
		wg.Wait()
		// What was fetched and not handed on goes back at once, for a restart.
		for _, msgs := range bl.held {
			for _, m := range msgs {
				_ = m.Nak()
			}
		}
	}()
	first := bl.b.FirstSeq
	if s, err := r.js.Stream(ctx, streams.RawStream(bl.project)); err == nil {
		// Records the stream's limits removed since the preview never come.
		first = max(first, s.CachedInfo().State.FirstSeq)
	}
	t := target{project: bl.project}
	for {
		if err := bl.fetch(ctx, cons); err != nil {
			return err
		}
		info, err := cons.Info(ctx)
		if errors.Is(err, jetstream.ErrConsumerNotFound) {
			return errBacklogEnded
		}
		if err != nil {
			return err
		}
		for _, k := range bl.ready(info, first) {
			batch, seqs := bl.take(k)
			ok := r.process(ctx, t, batch, seqs)
			bl.mu.Lock()
			bl.working = nil
			bl.mu.Unlock()
			if !ok {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				continue // nak'ed: delivered again after retry_delay
			}
			bl.processed += len(batch)
			if time.Since(bl.reportedAt) >= backlogProgressEvery {
				if err := bl.report(ctx, validation.BacklogRunning, ""); err != nil {
					r.settings.Logger.Warn("could not report a backlog's progress", zap.String("project_id", bl.project), zap.Error(err))
				}
			}
		}
		if bl.heldCount() > 0 {
			continue
		}
		if info.NumAckPending > 0 {
			// Batches were handed on since the look: look again rather than wait for a
			// fetch that has nothing to take.
			if info, err = cons.Info(ctx); err != nil {
				continue // the next round looks again, or finds the consumer gone
			}
		}
		if info.NumAckPending == 0 && (info.Delivered.Stream >= bl.b.LastSeq || info.NumPending == 0) {
			if err := bl.finish(ctx, validation.BacklogDone, ""); err != nil {
				return err
			}
			r.settings.Logger.Info("backlog done", zap.String("project_id", bl.project), zap.String("backlog_id", bl.b.ID))
			return nil
		}
	}
}

const (
	backlogFetchBytes = 8 << 20
	backlogQuickPull  = 50 * time.Millisecond
)

// fetch takes what the consumer has at once, or waits up to a second for something
// (a redelivery, a batch another process gave back): records of the range into their
// batches, records past it acked (they are the live consumer's).
func (bl *backlog) fetch(ctx context.Context, cons jetstream.Consumer) error {
	// Bounded by bytes as well as records: a batch of large records, or those past the
	// range (acked unused), must not all be pulled at once. FetchNoWait takes no byte
	// limit, so the first pull is a short Fetch instead.
	// A pull whose first record exceeds its byte limit gets nothing, ever: the limit
	// holds at least two of the largest message the server takes.
	maxBytes := max(backlogFetchBytes, 2*int(bl.r.js.Conn().MaxPayload()))
	batch, err := cons.Fetch(validation.BacklogBatchRecords, jetstream.FetchMaxBytes(maxBytes), jetstream.FetchMaxWait(backlogQuickPull))
	n := 0
	if err == nil {
		n, err = bl.hold(batch)
	}
	if err == nil && n == 0 {
		fctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		if batch, err = cons.Fetch(validation.BacklogBatchRecords, jetstream.FetchMaxBytes(maxBytes), jetstream.FetchContext(fctx)); err == nil {
			_, err = bl.hold(batch)
		}
	}
	if errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrConsumerDeleted) {
		return errBacklogEnded
	}
	if err != nil {
		return err
	}
	return ctx.Err()
}

// hold takes a pull's messages; other ends of a pull than the consumer's deletion (no
// messages, its wait over, the consumer's ack limit reached) leave the loop to look at
// the consumer and fetch again.
func (bl *backlog) hold(batch jetstream.MessageBatch) (int, error) {
	n := 0
	for m := range batch.Messages() {
		n++
		md, err := m.Metadata()
		if err != nil {
			_ = m.Term()
			continue
		}
		seq := md.Sequence.Stream
		if seq > bl.b.LastSeq || seq < bl.b.FirstSeq {
			_ = m.Ack()
			continue
		}
		k := bl.batchOf(seq)
		bl.mu.Lock()
		if bl.held[k] == nil {
			bl.held[k] = map[uint64]jetstream.Msg{}
		}
		// A redelivery of a message held replaces it: the server takes an ack of any
		// delivery of a sequence.
		bl.held[k][seq] = m
		bl.arrived[k] = time.Now()
		bl.mu.Unlock()
	}
	if err := batch.Error(); errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrConsumerDeleted) {
		return n, err
	}
	return n, nil
}

// ready lists the batches to hand on now, in order: those complete (every sequence from
// the batch's first still stored to its last is held), and those the consumer delivered
// past whose missing records nobody else holds or that waited backlogStall.
func (bl *backlog) ready(info *jetstream.ConsumerInfo, first uint64) []uint64 {
	bl.mu.Lock()
	defer bl.mu.Unlock()
	held := 0
	for _, msgs := range bl.held {
		held += len(msgs)
	}
	var out []uint64
	for k, msgs := range bl.held {
		lo, hi := max(bl.b.FirstSeq+k*validation.BacklogBatchRecords, first), bl.batchLast(k)
		complete := hi >= lo && uint64(len(msgs)) >= hi-lo+1
		delivered := info.Delivered.Stream >= hi || info.NumPending == 0
		// Another holder's part comes back after its ack wait if it died; one alive keeps
		// it (several pipeline processes sharing the run), so past that it is given up on.
		waited := time.Since(bl.arrived[k]) >= bl.r.cfg.AckWait+backlogStall
		if complete || delivered && (info.NumAckPending <= held || waited) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// take removes batch k from held, in sequence order, and returns its sequences too.
func (bl *backlog) take(k uint64) ([]jetstream.Msg, []uint64) {
	bl.mu.Lock()
	defer bl.mu.Unlock()
	msgs := bl.held[k]
	delete(bl.held, k)
	delete(bl.arrived, k)
	seqs := make([]uint64, 0, len(msgs))
	for s := range msgs {
		seqs = append(seqs, s)
	}
	slices.Sort(seqs)
	batch := make([]jetstream.Msg, 0, len(seqs))
	for _, s := range seqs {
		batch = append(batch, msgs[s])
	}
	bl.working = batch
	return batch, seqs
}

func (bl *backlog) heldCount() int {
	bl.mu.Lock()
	defer bl.mu.Unlock()
	n := 0
	for _, msgs := range bl.held {
		n += len(msgs)
	}
	return n
}

// keepAlive tells JetStream that everything held is being worked on, as the live
// consumer's inbox does: a batch whose agent calls are retried for minutes is not
// delivered again meanwhile.
func (bl *backlog) keepAlive(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		bl.mu.Lock()
		var msgs []jetstream.Msg
		for _, b := range bl.held {
			for _, m := range b {
				msgs = append(msgs, m)
			}
		}
		msgs = append(msgs, bl.working...)
		bl.mu.Unlock()
		for _, m := range msgs {
			_ = m.InProgress()
		}
	}
}

// report adds this process's progress to the backlog's entry, in state.
func (bl *backlog) report(ctx context.Context, state, reason string) error {
	n := bl.processed
	_, err := streams.UpdateKV(ctx, bl.kv, bl.key, func(old []byte, exists bool) ([]byte, error) {
		var st validation.BacklogState
		if exists {
			if err := json.Unmarshal(old, &st); err != nil {
				return nil, err
			}
		}
		if exists && st.State != validation.BacklogRunning {
			if n == 0 {
				return nil, streams.ErrKVUnchanged
			}
			state, reason = st.State, st.Error // finished by another process: only count
		}
		if exists && n == 0 && state == st.State {
			return nil, streams.ErrKVUnchanged
		}
		st.ID, st.State, st.Error = bl.b.ID, state, reason
		st.FirstSeq, st.LastSeq = bl.b.FirstSeq, bl.b.LastSeq
		st.Processed += n
		st.UpdatedAt = time.Now().UTC()
		return json.Marshal(st)
	})
	if err == nil {
		bl.processed -= n
		bl.reportedAt = time.Now()
	}
	return err
}

// flushProgress reports what this process counted of a run another process finished.
func (bl *backlog) flushProgress(ctx context.Context) error {
	if bl.processed == 0 {
		return nil
	}
	return bl.report(ctx, validation.BacklogDone, "")
}

// finish reports the run's end and deletes its consumer (after the report: a crash
// between the two leaves a consumer the next start deletes, never a backlog run again).
func (bl *backlog) finish(ctx context.Context, state, reason string) error {
	if err := bl.report(ctx, state, reason); err != nil {
		return err
	}
	err := bl.r.js.DeleteConsumer(ctx, streams.RawStream(bl.project), bl.r.backlogConsumer(bl.b.ID))
	if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) && !errors.Is(err, jetstream.ErrStreamNotFound) {
		bl.r.settings.Logger.Warn("could not delete a finished backlog's consumer; the next start deletes it",
			zap.String("project_id", bl.project), zap.String("backlog_id", bl.b.ID), zap.Error(err))
	}
	return nil
}
