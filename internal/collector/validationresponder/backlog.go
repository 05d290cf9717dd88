package validationresponder

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/dryrun"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/ottlevent"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelinecfg"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
	"github.com/otelcol-svc/otelcol-svc/internal/validation"
)

// The backlog preview (internal/validation's BacklogSubject): what processing a range
// of a project's stored records would do, counted by the dry run's evaluator
// (internal/collector/dryrun) in the batches a backlog run hands the pipeline
// (validation.BacklogBatchRecords), so the calls it announces are the run's. Every
// collector role answers it, and a free signup shares the process, so one preview is
// bounded: at most previewsAtOnce at a time per process, previewReadBytes of records read,
// previewTime in all; past a bound it is refused, saying how to narrow the range.

const (
	previewsAtOnce = 2
	// previewReadBytes bounds the records one preview reads: 10,000 records of 3 KB.
	previewReadBytes = 32 << 20
	// previewTime bounds reading and evaluating, within the caller's wait
	// (validation.BacklogTimeout).
	previewTime = 8 * time.Second
	// previewHeldBytes bounds what the evaluation keeps (a batch's matches).
	previewHeldBytes = 32 << 20
	// defaultMaxCallBytes is the agent exporter's default max_call_bytes.
	defaultMaxCallBytes = 12 << 20
)

// Projects is where a preview looks its project up: the data plane's mirror
// (mirrorcache.Cache).
type Projects interface {
	Project(id string) (mirror.Project, bool)
}

// Options are the pipeline's limits a preview evaluates under: the deployment's
// SVC_MAX_CALL_BYTES and SVC_MAX_RECORD_BYTES, which the shipped configs give the agent
// exporter and the processors (OptionsFromEnv); every role runs this responder, and not
// all of them configure those components.
type Options struct {
	MaxCallBytes   int
	MaxRecordBytes int
}

// OptionsFromEnv reads the limits from the environment the configs read them from.
func OptionsFromEnv() Options {
	return Options{MaxCallBytes: envInt("SVC_MAX_CALL_BYTES", defaultMaxCallBytes), MaxRecordBytes: envInt("SVC_MAX_RECORD_BYTES", ottlevent.DefaultMaxRecordBytes)}
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

type previewer struct {
	js       jetstream.JetStream
	projects Projects
	opts     Options
	slots    chan struct{}
	now      func() time.Time
}

func newPreviewer(js jetstream.JetStream, projects Projects, opts Options) *previewer {
	if opts.MaxCallBytes <= 0 {
		opts.MaxCallBytes = defaultMaxCallBytes
	}
	return &previewer{js: js, projects: projects, opts: opts, slots: make(chan struct{}, previewsAtOnce), now: time.Now}
}

// handle answers off the subscription's goroutine, so that a preview being counted does
// not hold up the next; past previewsAtOnce it refuses at once (the caller may retry, and
// another process may be free).
func (pv *previewer) handle(req micro.Request) {
	if pv == nil {
		_ = req.RespondJSON(validation.Refuse(http.StatusServiceUnavailable, apierror.Unavailable,
			"this data-plane process does not preview backlogs; try again"))
		return
	}
	select {
	case pv.slots <- struct{}{}:
	default:
		_ = req.RespondJSON(validation.Refuse(http.StatusServiceUnavailable, apierror.Unavailable,
			"the data plane is counting other backlogs; try again in a few seconds"))
		return
	}
	go func() {
		defer func() { <-pv.slots }()
		r, refusal := validation.ParseBacklogRequest(req.Data(), pv.now().Add(sinceSkew))
		if refusal != nil {
			_ = req.RespondJSON(refusal)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), previewTime)
		defer cancel()
		_ = req.RespondJSON(pv.preview(ctx, r))
	}()
}

// sinceSkew allows a since the control plane's clock put slightly ahead of this one's.
const sinceSkew = time.Minute

// preview counts the request's range.
func (pv *previewer) preview(ctx context.Context, req validation.BacklogRequest) validation.BacklogPreview {
	p, ok := pv.projects.Project(req.ProjectID)
	if !ok {
		return validation.Refuse(http.StatusNotFound, apierror.NotFound,
			fmt.Sprintf("project %s is not in the data plane's configuration yet; try again in a moment", req.ProjectID))
	}
	c, err := pipelinecfg.Compile(req.Pipeline)
	if err != nil {
		return validation.Refuse(http.StatusBadRequest, apierror.InvalidPipeline, err.Error())
	}
	stream, err := pv.js.Stream(ctx, streams.RawStream(req.ProjectID))
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return validation.BacklogPreview{OK: true} // nothing stored yet
	}
	if err != nil {
		return unavailable(err)
	}
	state := stream.CachedInfo().State
	if state.Msgs == 0 {
		return validation.BacklogPreview{OK: true}
	}
	last := state.LastSeq
	if start, ok, err := pv.liveStart(ctx, p, stream.CachedInfo()); errors.Is(err, errNoLiveStart) {
		return validation.Refuse(http.StatusServiceUnavailable, apierror.Unavailable, err.Error()+"; try again in a moment")
	} else if err != nil {
		return unavailable(err)
	} else if ok {
		// What the live pipeline took (or will take) is not a backlog: sent again it
		// would be a second agent call for the same records.
		last = min(last, start-1)
	}
	if last < state.FirstSeq {
		return validation.BacklogPreview{OK: true}
	}
	var first uint64
	if req.Last != nil {
		first = state.FirstSeq
		if n := uint64(*req.Last); last >= n && last-n+1 > first {
			first = last - n + 1
		}
	} else {
		first, err = pv.firstSince(ctx, req.ProjectID, *req.Since, last)
		if err != nil {
			return unavailable(err)
		}
		if first == 0 {
			return validation.BacklogPreview{OK: true} // nothing stored since then
		}
	}
	if n := last - first + 1; n > validation.MaxBacklogRecords {
		msg := fmt.Sprintf("the range holds %d records; a backlog processes at most %d: give a later \"since\", or \"last\": %d",
			n, validation.MaxBacklogRecords, validation.MaxBacklogRecords)
		if m, err := stream.GetMsg(ctx, last-validation.MaxBacklogRecords+1); err == nil {
			msg += fmt.Sprintf(" (the %dth newest record was stored at %s)", validation.MaxBacklogRecords, m.Time.UTC().Format(time.RFC3339))
		}
		return validation.Refuse(http.StatusBadRequest, validation.CodeBacklogTooLarge, msg)
	}
	return pv.count(ctx, req.ProjectID, c, first, last)
}

// pipelineDurable is the pipeline role's consumer on a raw stream: the jetstream
// receiver's default durable (a deployment that renames it gets previews that may
// overlap what its pipeline took).
const pipelineDurable = "svc-pipeline"

// liveStart is the first sequence the project's live pipeline consumer takes: its start
// sequence (agent_since_seq + 1, the raw stream's next record when the agent URL was
// set), from its start time (agent_since less its margin, when the sequence says nothing
// about this stream), from its creation (a consumer started from new records), or from
// the first (a consumer of a release that delivered everything). While the consumer does
// not exist yet (the pipeline role creates it later, or runs nowhere yet) it is where the
// role will start it, by the project's mirror entry (mirror.PipelineStart): a backlog
// started in that gap would otherwise overlap it.
// ok is false when the live pipeline takes nothing stored now (no agent URL, or it
// starts after the stream's last record).
func (pv *previewer) liveStart(ctx context.Context, p mirror.Project, si *jetstream.StreamInfo) (uint64, bool, error) {
	c, err := pv.js.Consumer(ctx, streams.RawStream(p.ID), pipelineDurable)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return pv.plannedStart(ctx, p, si)
	}
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	info := c.CachedInfo()
	since := info.Created
	switch cfg := info.Config; cfg.DeliverPolicy {
	case jetstream.DeliverAllPolicy:
		return 1, true, nil
	case jetstream.DeliverByStartSequencePolicy:
		return max(cfg.OptStartSeq, 1), true, nil
	case jetstream.DeliverByStartTimePolicy:
		if cfg.OptStartTime != nil {
			since = *cfg.OptStartTime
		}
	}
	return pv.startAt(ctx, p.ID, since, si.State.LastSeq)
}

// plannedStart is where the pipeline role will start the project's consumer.
func (pv *previewer) plannedStart(ctx context.Context, p mirror.Project, si *jetstream.StreamInfo) (uint64, bool, error) {
	if p.Pipeline.AgentEndpointURL == "" {
		return 0, false, nil // no live pipeline; setting a URL later starts it after now
	}
	start := p.PipelineStart()
	if seq := start.Seq(si.Created, si.State.LastSeq); seq > 0 {
		return seq, true, nil
	}
	if start.Since.IsZero() {
		// An entry that says neither when the URL was set nor when it was written: the
		// consumer starts from new records when it is created, which this process cannot
		// know; the pipeline role creates it within moments of the entry.
		return 0, false, errNoLiveStart
	}
	return pv.startAt(ctx, p.ID, start.Since, si.State.LastSeq)
}

var errNoLiveStart = errors.New("the project's live pipeline has not started yet")

// startAt is the first sequence stored at or after since, up to last.
func (pv *previewer) startAt(ctx context.Context, project string, since time.Time, last uint64) (uint64, bool, error) {
	seq, err := pv.firstSince(ctx, project, since, last)
	if err != nil || seq == 0 {
		return 0, false, err
	}
	return seq, true, nil
}

// firstSince is the first sequence stored at or after since, up to last; 0 when none is.
func (pv *previewer) firstSince(ctx context.Context, project string, since time.Time, last uint64) (uint64, error) {
	oc, err := pv.orderedConsumer(ctx, project, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartTimePolicy, OptStartTime: &since})
	if err != nil {
		return 0, err
	}
	defer pv.deleteConsumer(project, oc)
	m, err := oc.Next(jetstream.FetchMaxWait(time.Second))
	if errors.Is(err, nats.ErrTimeout) || errors.Is(err, jetstream.ErrNoMessages) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	md, err := m.Metadata()
	if err != nil {
		return 0, err
	}
	if md.Sequence.Stream > last {
		return 0, nil
	}
	return md.Sequence.Stream, nil
}

// count reads records first..last in order and evaluates them in the run's batches.
func (pv *previewer) count(ctx context.Context, project string, c *pipelinecfg.Compiled, first, last uint64) validation.BacklogPreview {
	tooLarge := func(what string) validation.BacklogPreview {
		return validation.Refuse(http.StatusBadRequest, validation.CodeBacklogTooLarge, fmt.Sprintf(
			"the range's %d records %s; give a later \"since\" or a smaller \"last\"", last-first+1, what))
	}
	deadline, _ := ctx.Deadline()
	ev := dryrun.New(ctx, c, dryrun.Limits{EvalTime: time.Until(deadline), MaxRecordBytes: pv.opts.MaxRecordBytes,
		MaxCallBytes: pv.opts.MaxCallBytes, HeldBytes: previewHeldBytes, Count: true})
	oc, err := pv.orderedConsumer(ctx, project, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: first})
	if err != nil {
		return unavailable(err)
	}
	defer pv.deleteConsumer(project, oc)
	// Bounded by bytes too: 500 records of 1 MB would fill the subscription. A pull
	// whose first record exceeds the limit gets nothing: it holds two of the largest.
	it, err := oc.Messages(jetstream.PullMaxMessagesWithBytesLimit(500, max(previewPullBytes, 2*int(pv.js.Conn().MaxPayload()))))
	if err != nil {
		return unavailable(err)
	}
	defer it.Stop()
	ans := validation.BacklogPreview{OK: true}
	read, batch := 0, uint64(0)
	for {
		m, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			if ctx.Err() != nil {
				return tooLarge(fmt.Sprintf("take longer than %s to read and evaluate", previewTime))
			}
			return unavailable(err)
		}
		md, err := m.Metadata()
		if err != nil {
			return unavailable(err)
		}
		seq := md.Sequence.Stream
		if seq > last {
			break
		}
		if read += len(m.Data()); read > previewReadBytes {
			return tooLarge(fmt.Sprintf("hold more than %d MiB to read", previewReadBytes>>20))
		}
		if k := (seq - first) / validation.BacklogBatchRecords; k != batch {
			ev.Flush() // the run hands each batch on alone
			batch = k
		}
		h := m.Headers()
		if !ev.Add(dryrun.Record{Seq: seq, Time: md.Timestamp, Signal: h.Get(streams.HeaderSignal), SourceID: h.Get(streams.HeaderSourceID), Data: m.Data()}) {
			break
		}
		at := md.Timestamp.UTC()
		if ans.Records == 0 {
			ans.FirstSeq, ans.From = seq, &at
		}
		ans.Records++
		ans.LastSeq, ans.To = seq, &at
		if seq == last {
			break
		}
	}
	a := ev.Answer()
	switch {
	case a.TimedOut:
		return tooLarge(fmt.Sprintf("take longer than %s to read and evaluate", previewTime))
	case a.MemoryBudgetExceeded:
		return tooLarge(fmt.Sprintf("keep more than %d MiB of matches in a batch", previewHeldBytes>>20))
	}
	// The range runs to the stream's last sequence when the preview was taken: records
	// stored later are the live pipeline's.
	ans.LastSeq = last
	ans.Matched, ans.Calls = a.Matched, a.TotalCalls()
	return ans
}

// A preview's consumers are the server's until deleted: a user looping previews would
// otherwise leave two or three behind each time (the default inactive threshold is five
// minutes). They are deleted after use; previewInactive removes one that a failed delete
// or a crash left.
const (
	previewInactive  = 10 * time.Second
	previewPullBytes = 4 << 20
)

func (pv *previewer) orderedConsumer(ctx context.Context, project string, cfg jetstream.OrderedConsumerConfig) (jetstream.Consumer, error) {
	cfg.InactiveThreshold, cfg.MaxResetAttempts = previewInactive, 1
	return pv.js.OrderedConsumer(ctx, streams.RawStream(project), cfg)
}

func (pv *previewer) deleteConsumer(project string, c jetstream.Consumer) {
	ci := c.CachedInfo()
	if ci == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = pv.js.DeleteConsumer(ctx, streams.RawStream(project), ci.Name)
}

func unavailable(err error) validation.BacklogPreview {
	return validation.Refuse(http.StatusServiceUnavailable, apierror.Unavailable, "the project's records could not be read: "+err.Error())
}
