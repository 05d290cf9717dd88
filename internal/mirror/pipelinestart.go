package mirror

import "time"

// Where a project's live pipeline consumer starts on its raw stream. The
// pipeline role (receiver/jetstreamreceiver) creates the consumer by this rule, and the
// backlog preview (internal/collector/validationresponder) caps a backlog's range by it while
// the consumer does not exist yet, so that no record is both a backlog's and the live
// pipeline's (two paid agent calls). One rule, so the two cannot drift apart.

// PipelineStart is where a new pipeline consumer of a project starts.
type PipelineStart struct {
	// AfterSeq is the raw stream's last sequence when the agent URL was set
	// (AgentSinceSeq): the consumer starts right after it on the stream it was read from,
	// one created by SeqStream (NATS server's clock); zero: not recorded (Seq).
	AfterSeq  uint64
	SeqStream time.Time
	// Since is the time rule, on the NATS server's clock: the first record stored at or
	// after it; zero: new records (those stored after the consumer is created).
	Since time.Time
	// URLSet is when the agent URL was last set, on the server's clock; zero when the
	// entry does not say.
	URLSet time.Time
}

// PipelineStart is where a new pipeline consumer of p starts: right after the raw
// stream's last sequence when the agent URL was set (AgentSinceSeq, exact) while the
// stream still holds that history; else from when the URL was set (AgentSince, less the
// margins of ServerStart); else from when the entry was written (its URL was set by then:
// never earlier records, and a pipeline process that starts after records arrived, as
// after an outage, still takes them); else from new records.
func (p Project) PipelineStart() PipelineStart {
	since := p.AgentSince
	if since.IsZero() {
		since = p.WrittenAt
	}
	s := PipelineStart{Since: p.ServerStart(since), URLSet: p.ServerStart(p.AgentSince)}
	if p.AgentSinceSeq > 0 && !p.AgentSince.IsZero() {
		// The stream AgentSinceSeq was read from existed when the URL was set: by the
		// server's clock, at the latest the conversion's margin after it.
		at, known := p.ServerTime(p.AgentSince)
		s.AfterSeq, s.SeqStream = p.AgentSinceSeq, at.Add(margin(known))
	}
	return s
}

// Seq is the first sequence the consumer takes by AfterSeq on a raw stream created at
// created (server's clock) whose last sequence is lastSeq, or 0 when that number says
// nothing about this stream: none was recorded, or NATS was wiped (the stream was created
// after the URL was set, or it does not reach that sequence), and the time rule applies.
func (s PipelineStart) Seq(created time.Time, lastSeq uint64) uint64 {
	if s.AfterSeq == 0 || s.SeqStream.IsZero() || lastSeq < s.AfterSeq || created.After(s.SeqStream) {
		return 0
	}
	return s.AfterSeq + 1
}

// ServerStart turns since, a moment of the writer's clock written in p (Sink.Since,
// AgentSince), into the NATS server's clock less a margin for what the conversion cannot
// know. With the writer's clock offset (entries stamped WrittenAt) that is the latency of
// the control plane's write, under a second; without it, a clock skew between the two
// machines, for which a minute is allowed. Zero stays zero.
func (p Project) ServerStart(since time.Time) time.Time {
	if since.IsZero() {
		return time.Time{}
	}
	t, known := p.ServerTime(since)
	return t.Add(-margin(known))
}

// margin is how far a time converted by ServerTime may be off.
func margin(known bool) time.Duration {
	if known {
		return WriteMargin
	}
	return SkewMargin
}

const (
	WriteMargin = time.Second
	SkewMargin  = time.Minute
)
