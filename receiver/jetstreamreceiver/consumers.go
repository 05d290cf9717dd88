package jetstreamreceiver

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/otelcol-svc/otelcol-svc/components/mirror"
	"github.com/otelcol-svc/otelcol-svc/components/streams"
)

// consumer returns the durable consumer a target reads from, creating its stream and the
// consumer when they do not exist yet.
func (r *jsReceiver) consumer(ctx context.Context, t target) (jetstream.Consumer, error) {
	if t.sink == "" {
		if err := streams.Create(ctx, r.js, streams.RawConfig(t.project, r.cfg.Stream)); err != nil {
			return nil, err
		}
		return r.js.CreateOrUpdateConsumer(ctx, streams.RawStream(t.project), jetstream.ConsumerConfig{
			Durable:       r.cfg.Durable,
			Description:   "otelcol-svc pipeline",
			AckPolicy:     jetstream.AckExplicitPolicy,
			AckWait:       r.cfg.AckWait,
			MaxDeliver:    -1,
			MaxAckPending: 4 * r.cfg.BatchSize,
			DeliverPolicy: jetstream.DeliverAllPolicy,
		})
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

// cursorStart is where a new cursor of destination s starts on the output stream: the
// moment it was created or enabled (Sink.Since, the control plane's clock) on the NATS
// server's clock, which stamps the stream's messages, less a margin for what the
// conversion cannot know. With the writer's clock offset (entries stamped WrittenAt) that
// is the latency of the control plane's write, under a second; without it, a clock skew
// between the two machines, for which a minute is allowed. A destination enabled again
// may so get again what was stored within the margin before; never what was stored
// while it was off, before that.
func cursorStart(p mirror.Project, s mirror.Sink) time.Time {
	if s.Since.IsZero() {
		return time.Time{}
	}
	t, known := p.ServerTime(s.Since)
	if known {
		return t.Add(-writeMargin)
	}
	return t.Add(-skewMargin)
}

const (
	writeMargin = time.Second
	skewMargin  = time.Minute
)

func (r *jsReceiver) destinationConsumer(t target) string {
	return r.cfg.Durable + "-" + t.sink
}

// forgetDestination deletes the cursor of a destination that was removed or disabled, so
// that enabling it again starts from then rather than delivering a backlog. Another sink
// process may have deleted it already.
func (r *jsReceiver) forgetDestination(t target) {
	ctx, cancel := context.WithTimeout(r.ctx, 5*time.Second)
	defer cancel()
	err := r.js.DeleteConsumer(ctx, streams.OutputStream(t.project), r.destinationConsumer(t))
	if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) && !errors.Is(err, jetstream.ErrStreamNotFound) && r.ctx.Err() == nil {
		r.settings.Logger.Warn("could not delete the consumer of a removed destination; it holds no messages and is removed with the project",
			append(t.logFields(), zap.Error(err))...)
	}
}
