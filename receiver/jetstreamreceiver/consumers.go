package jetstreamreceiver

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
)

// consumer returns the durable consumer a target reads from, creating its stream and the
// consumer when they do not exist yet.
func (r *jsReceiver) consumer(ctx context.Context, t target) (jetstream.Consumer, error) {
	if t.sink == "" {
		return r.pipelineConsumer(ctx, t)
	}
	stream := streams.OutputStream(t.project)
	if err := streams.Create(ctx, r.js, streams.OutputConfig(t.project, r.cfg.Stream)); err != nil {
		return nil, err
	}
	name := r.destinationConsumer(t)
	// An existing cursor is kept as it is: its start was fixed when the destination was
	// created or enabled, and other sink processes share it.
	if c, err := r.js.Consumer(ctx, stream, name); err == nil {
		r.recordStart(ctx, t, c)
		return c, nil
	} else if !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return nil, err
	}
	cfg := jetstream.ConsumerConfig{
		Durable:       name,
		Description:   "otelcol-svc sink destination " + t.sink,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       r.cfg.AckWait,
		MaxDeliver:    -1,
		MaxAckPending: 4 * r.cfg.BatchSize,
		DeliverPolicy: jetstream.DeliverNewPolicy,
	}
	if !t.since.IsZero() {
		// From the moment the destination was created or enabled, so a result stored
		// between that moment and this consumer's creation is not missed.
		since := t.since
		cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &since
	}
	c, err := r.js.CreateConsumer(ctx, stream, cfg)
	if errors.Is(err, jetstream.ErrConsumerExists) {
		// Another sink process created it first.
		c, err = r.js.Consumer(ctx, stream, name)
	}
	if err == nil {
		r.recordStart(ctx, t, c)
	}
	return c, err
}

// pipelineConsumer returns a project's pipeline consumer on its raw stream, creating it
// when it does not exist yet. A new one starts from new records, never a backlog
// (every matched record is an agent call someone pays for): right after the raw
// stream's last sequence when the project's agent URL was set (Project.AgentSinceSeq,
// exact: a record stored before the save is never sent, one after it always is), while
// the stream still holds that history (seqStart). Without it (an entry of an older
// control plane, or a stream wiped since) from when the URL was set (Project.AgentSince,
// less the margins of cursorStart); an entry without agent_since (written by an older
// control plane, or by another writer of the mirror) from when the entry was written, at
// the latest when its URL was set; one without either from new records. Processing what
// was stored before is a backlog its user asks for (backlog.go). An existing consumer is
// kept as it is, since other pipeline processes share it and a restart must not replay,
// unless it is a cursor of an earlier URL that a process down at the removal did not
// delete, and would deliver what was stored while there was no URL (predatesURL).
func (r *jsReceiver) pipelineConsumer(ctx context.Context, t target) (jetstream.Consumer, error) {
	stream := streams.RawStream(t.project)
	if err := streams.Create(ctx, r.js, streams.RawConfig(t.project, r.cfg.Stream)); err != nil {
		return nil, err
	}
	startSeq, err := r.seqStart(ctx, t)
	if err != nil {
		return nil, err
	}
	c, err := r.js.Consumer(ctx, stream, r.cfg.Durable)
	switch {
	case err == nil && !predatesURL(c.CachedInfo(), t, startSeq):
		return c, nil
	case err == nil:
		ci := c.CachedInfo()
		r.settings.Logger.Info("pipeline consumer predates the agent URL; starting it again from when the URL was set",
			append(t.logFields(), zap.Time("created", ci.Created), zap.Time("url_set", t.urlSet),
				zap.Uint64("delivered_seq", ci.Delivered.Stream), zap.Uint64("start_seq", startSeq))...)
		if err := r.js.DeleteConsumer(ctx, stream, r.cfg.Durable); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			return nil, err
		}
	case !errors.Is(err, jetstream.ErrConsumerNotFound):
		return nil, err
	}
	cfg := jetstream.ConsumerConfig{
		Durable:       r.cfg.Durable,
		Description:   "otelcol-svc pipeline",
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       r.cfg.AckWait,
		MaxDeliver:    -1,
		MaxAckPending: 4 * r.cfg.BatchSize,
		DeliverPolicy: jetstream.DeliverNewPolicy,
	}
	switch {
	case startSeq > 0:
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, startSeq
	case !t.since.IsZero():
		since := t.since
		cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &since
	}
	c, err = r.js.CreateConsumer(ctx, stream, cfg)
	if errors.Is(err, jetstream.ErrConsumerExists) {
		// Another pipeline process created it first.
		c, err = r.js.Consumer(ctx, stream, r.cfg.Durable)
	}
	return c, err
}

// seqStart is the first sequence of t's raw stream its pipeline consumer takes by the
// sequence recorded when the agent URL was set (mirror.PipelineStart.Seq), or 0 when the
// time rule applies.
func (r *jsReceiver) seqStart(ctx context.Context, t target) (uint64, error) {
	if t.start.AfterSeq == 0 {
		return 0, nil
	}
	st, err := r.js.Stream(ctx, streams.RawStream(t.project))
	if err != nil {
		return 0, err
	}
	info := st.CachedInfo()
	return t.start.Seq(info.Created, info.State.LastSeq), nil
}

// predatesURL reports a pipeline consumer of an earlier agent URL. By the sequence
// (startSeq > 0): one that would still deliver a record stored before the URL was set,
// having delivered none after (a consumer of this URL starts past them). By the clock:
// one created before the URL was set.
func predatesURL(ci *jetstream.ConsumerInfo, t target, startSeq uint64) bool {
	if startSeq > 0 {
		return ci.Delivered.Stream+1 < startSeq
	}
	return !t.urlSet.IsZero() && ci.Created.Before(t.urlSet)
}

// keepCursor makes sure a paused project has its pipeline consumer, without consuming:
// its cursor then starts when the URL was set, as if it had run, and fixing the pipeline
// resumes from there, not from when it was fixed (nothing received while paused is lost).
func (r *jsReceiver) keepCursor(t target) {
	ctx, cancel := context.WithTimeout(r.ctx, 5*time.Second)
	defer cancel()
	if _, err := r.pipelineConsumer(ctx, t); err != nil && r.ctx.Err() == nil {
		r.settings.Logger.Warn("could not create a paused project's consumer; records stored before it is fixed may not be processed",
			append(t.logFields(), zap.Error(err))...)
	}
}

// rawTarget is project p's raw stream as a target of the pipeline role.
func rawTarget(p mirror.Project) target {
	start := p.PipelineStart()
	return target{project: p.ID, since: start.Since, urlSet: start.URLSet, start: start}
}

// cursorStart is where a new cursor of destination s starts on the output stream: the
// moment it was created or enabled (Sink.Since, the control plane's clock) on the NATS
// server's clock, which stamps the stream's messages, less the conversion's margin
// (mirror.Project.ServerStart). A destination enabled again may so get again what was
// stored within the margin before; never what was stored while it was off, before that.
func cursorStart(p mirror.Project, s mirror.Sink) time.Time {
	return p.ServerStart(s.Since)
}

func (r *jsReceiver) destinationConsumer(t target) string {
	return r.cfg.Durable + "-" + t.sink
}

// forget deletes the cursor of a destination that was removed or disabled, or the
// pipeline consumer of a project whose agent URL was removed, so that enabling it (or
// setting a URL) again starts from then rather than delivering a backlog. Another process
// may have deleted it already.
func (r *jsReceiver) forget(t target) {
	ctx, cancel := context.WithTimeout(r.ctx, 5*time.Second)
	defer cancel()
	stream, name := streams.OutputStream(t.project), r.destinationConsumer(t)
	if t.sink == "" {
		stream, name = streams.RawStream(t.project), r.cfg.Durable
	}
	err := r.js.DeleteConsumer(ctx, stream, name)
	if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) && !errors.Is(err, jetstream.ErrStreamNotFound) && r.ctx.Err() == nil {
		r.settings.Logger.Warn("could not delete the consumer of a removed destination or agent URL; it holds no messages and is removed with the project",
			append(t.logFields(), zap.Error(err))...)
	}
}
