// Package pipelineeval is the one evaluation of a project's pipeline, record by record:
// the trigger processor (legacy mode, Legacy), the window processor (window mode,
// Window), the incident processor (incident mode, Incident) and the dry run
// (internal/collector/dryrun, behind the console's dry run and the backlog preview) all
// run their records through it, so what a trial announces is what the pipeline does.
//
// What differs between them is injected, never decided here:
//
//   - the window store (Windows): the pipeline's windowstore (Redis or memory), or the
//     dry run's records held in memory (NewMemoryWindows);
//   - the clock (Item.Time): the pipeline stores and reads windows at the time it
//     evaluates, a trial at each record's stored time;
//   - the cooldowns (Options.Cooldowns): the pipeline's windowstore; nil for a trial,
//     which must neither read nor change what was called when;
//   - the record limit while transformed (Options.MaxRecordBytes).
//
// Incident mode uses none of the stores: Incident only says what a record does (opens
// or joins, resolves, is context, under which fingerprint). The incident processor
// keeps the events and context and applies them to the incident store; the dry run
// plays the incidents' lifecycle over the records' stored times.
//
// Metrics and logs stay with the callers (each processor has its own instruments); the
// evaluator returns what happened to each record, in the order it happened.
package pipelineeval

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/otelcol-svc/otelcol-svc/internal/agentbody"
	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/ottlevent"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelinecfg"
	"github.com/otelcol-svc/otelcol-svc/internal/pipelinectx"
	"github.com/otelcol-svc/otelcol-svc/internal/windowstore"
)

// Steps of an evaluation, as errors name them.
const (
	StepRecord        = "record"
	StepTrigger       = "trigger"
	StepTransforms    = "transforms"
	StepContextFilter = "context_filter"
)

// Windows is where window mode keeps the records that passed the context filter:
// windowstore.Store's window half.
type Windows interface {
	Add(ctx context.Context, project, group string, seq uint64, rec []byte, t time.Time, ttl time.Duration) error
	Window(ctx context.Context, project, group string, since time.Time, max int) (recs [][]byte, total int, err error)
}

// Options are an evaluator's stores and limits.
type Options struct {
	// Windows keeps window mode's windows; required for window mode unless NoWindows.
	Windows Windows
	// Cooldowns decide triggers under cooldown_seconds; nil applies no cooldown.
	Cooldowns windowstore.Cooldowns
	// MaxRecordBytes bounds a record while transformed; 0 is ottlevent's default.
	MaxRecordBytes int
	// NoWindows: window mode keeps and reads no windows (a count of triggers needs
	// none): a trigger gets no call and the context filter is not run.
	NoWindows bool
}

// Evaluator runs records through compiled pipelines.
type Evaluator struct {
	o Options
	// reads is what incident mode last decoded records for (incidentReads).
	reads atomic.Pointer[incidentReads]
	// fields is what legacy mode last decoded records for (triggerFields).
	fields atomic.Pointer[triggerFields]
}

type triggerFields struct {
	c   *pipelinecfg.Compiled
	set *ottlevent.FieldSet
}

// triggerFields is c.TriggerFields made once per compiled pipeline, not per record.
func (e *Evaluator) triggerFields(c *pipelinecfg.Compiled) *ottlevent.FieldSet {
	if f := e.fields.Load(); f != nil && f.c == c {
		return f.set
	}
	set := ottlevent.NewFieldSet(c.TriggerFields)
	e.fields.Store(&triggerFields{c: c, set: set})
	return set
}

// New returns an evaluator over o's stores.
func New(o Options) *Evaluator { return &Evaluator{o: o} }

// Item is one record of a project's raw stream.
type Item struct {
	Seq    uint64
	Signal string
	Body   []byte
	// Time is when window mode stores the record and where its trigger's window ends:
	// the pipeline's now, or the record's stored time for a trial over stored records.
	Time time.Time
}

// TooLargeReason is the error a record grown too large by its transforms shows as its
// delivery's error: the contract's code, then which statement and by how much.
func TooLargeReason(err error) string {
	return apierror.RecordTooLargeAfterTransforms + ": " + err.Error()
}

// LegacyOutcome is what legacy mode does with a record.
type LegacyOutcome uint8

const (
	// Dropped: the trigger did not match.
	Dropped LegacyOutcome = iota
	// Matched: the record is sent, as Body.
	Matched
	// Failed: the trigger or a transform could not be evaluated (Step, Err): the
	// record is dropped, never retried, since retrying cannot change the outcome.
	Failed
	// TooLarge: a transform grew the record past the record limit (Err): neither sent
	// nor dropped unseen, it is dead-lettered as stored with TooLargeReason(Err).
	TooLarge
	// Suppressed: matched, but its dedup key is cooling down: held back, counted for
	// the key's next call, and marked suppressed in the batch's ledger outcome.
	Suppressed
)

// LegacyResult is one record's legacy evaluation.
type LegacyResult struct {
	Outcome LegacyOutcome
	// Body is a matched record as the agent gets it; Changed when the transforms
	// changed it (else Body is the stored record).
	Body    []byte
	Changed bool
	// SuppressedBefore is how many triggers of the key the cooldown held back before
	// this matched record (svc.suppressed).
	SuppressedBefore int64
	Step             string
	Err              error
}

// Legacy evaluates one record in legacy mode: the trigger, then the transforms, then
// the cooldown. The error is the cooldown store's (the batch is retried whole); a
// record's own failures are in the result.
func (e *Evaluator) Legacy(ctx context.Context, project string, c *pipelinecfg.Compiled, it Item) (LegacyResult, error) {
	res, rec := e.legacy(ctx, c, it)
	if res.Outcome != Matched || c.Cooldown <= 0 || e.o.Cooldowns == nil {
		return res, nil
	}
	key := ""
	if c.DedupKey != nil {
		if rec == nil {
			// Decoded in part, or not at all: the key may read any field.
			rec, _ = ottlevent.DecodeRecord(it.Body, it.Signal)
		}
		if rec != nil {
			if k, err := c.DedupKey.String(ctx, rec); err == nil {
				key = k // a record without the key's field shares the empty key
			}
		}
	}
	pass, n, err := e.pass(ctx, project, key, it.Seq, c.Cooldown)
	if err != nil {
		return LegacyResult{}, err
	}
	if !pass {
		return LegacyResult{Outcome: Suppressed}, nil
	}
	res.SuppressedBefore = n
	return res, nil
}

// pass decides a trigger under its key's cooldown. A trigger held back is marked
// suppressed in ctx's ledger outcome; one that passes is noted in ctx's Passes, so the
// agent exporter can give its cooldown back when its call budget refuses the call.
func (e *Evaluator) pass(ctx context.Context, project, key string, seq uint64, cooldown time.Duration) (bool, int64, error) {
	pass, n, err := e.o.Cooldowns.Pass(ctx, project, key, seq, cooldown)
	if err != nil {
		return false, 0, err
	}
	if !pass {
		pipelinectx.OutcomeFrom(ctx).Suppressed([]uint64{seq})
		return false, 0, nil
	}
	pipelinectx.PassesFrom(ctx).Took(e.o.Cooldowns, project, key, seq)
	return true, n, nil
}

// partialRecords are scratch records decoded in part only to evaluate: legacy's trigger
// (DecodeRecordFieldsInto) and incident mode's reads (DecodeRecordReadsInto). One goes
// back to the pool when the evaluation of its record ends, so no result may keep it or
// anything of it that is not a copy.
var partialRecords sync.Pool

// legacy runs the trigger, then the transforms. rec is the whole record as the agent
// gets it, or nil when it was not (wholly) decoded.
func (e *Evaluator) legacy(ctx context.Context, c *pipelinecfg.Compiled, it Item) (LegacyResult, *ottlevent.Record) {
	if c.Trigger.String() == "" && c.Transforms == nil {
		return LegacyResult{Outcome: Matched, Body: it.Body}, nil // every record goes as it is: no need to decode it
	}
	// Most records do not match: decode only what the trigger reads, and the whole
	// record only for a match that transforms will change. A record decoded in part
	// only serves the trigger, so one scratch record takes them one after another.
	var rec *ottlevent.Record
	var err error
	if c.TriggerFields != nil {
		scratch, _ := partialRecords.Get().(*ottlevent.Record)
		defer func() {
			if scratch != nil {
				partialRecords.Put(scratch)
			}
		}()
		rec, err = ottlevent.DecodeRecordFieldsInto(scratch, it.Body, it.Signal, e.triggerFields(c))
		if rec != nil {
			scratch = rec
		}
	} else {
		rec, err = ottlevent.DecodeRecord(it.Body, it.Signal)
	}
	if err != nil {
		return LegacyResult{Outcome: Failed, Step: StepRecord, Err: err}, nil
	}
	rec.SetMaxBytes(e.o.MaxRecordBytes)
	match, err := c.Trigger.Match(ctx, rec)
	if err != nil {
		return LegacyResult{Outcome: Failed, Step: StepTrigger, Err: err}, nil
	}
	if !match {
		return LegacyResult{Outcome: Dropped}, nil
	}
	if c.Transforms == nil {
		if c.TriggerFields != nil {
			rec = nil // the scratch record, not the whole record
		}
		return LegacyResult{Outcome: Matched, Body: it.Body}, rec
	}
	if c.TriggerFields != nil {
		if rec, err = ottlevent.DecodeRecord(it.Body, it.Signal); err != nil {
			return LegacyResult{Outcome: Failed, Step: StepRecord, Err: err}, nil
		}
		rec.SetMaxBytes(e.o.MaxRecordBytes)
	}
	if err := c.Transforms.Apply(ctx, rec); err != nil {
		// Dropped rather than sent half transformed, or dead-lettered when it grew
		// too large.
		if errors.Is(err, ottlevent.ErrRecordTooLarge) {
			return LegacyResult{Outcome: TooLarge, Step: StepTransforms, Err: err}, nil
		}
		return LegacyResult{Outcome: Failed, Step: StepTransforms, Err: err}, nil
	}
	if rec.Changed() {
		return LegacyResult{Outcome: Matched, Body: rec.AppendJSON(nil), Changed: true}, rec
	}
	return LegacyResult{Outcome: Matched, Body: it.Body}, rec
}

// WindowResult is one record's window evaluation, in the order its steps ran.
type WindowResult struct {
	// Skipped: the record could not be decoded or transformed (Step, Err): it neither
	// triggers nor joins a window. TooLarge when a transform grew it past the record
	// limit: it is dead-lettered as stored with TooLargeReason(Err).
	Skipped  bool
	TooLarge bool
	Step     string
	Err      error
	// Body is the record after its transforms; Group its group key's value.
	Body  []byte
	Group string
	// Triggered: the trigger matched (TriggerErr: it could not be evaluated, which is
	// no match). Suppressed: the trigger's key was cooling down, so it makes no call.
	Triggered  bool
	TriggerErr error
	Suppressed bool
	// Call is the trigger's call (nil without one, or under NoWindows).
	Call *WindowCall
	// Stored: the context filter passed and the record joined its group's window
	// (FilterErr: the filter could not be evaluated, which is no pass).
	Stored    bool
	FilterErr error
}

// WindowCall is a trigger's {"trigger", "window"} call.
type WindowCall struct {
	Body []byte
	// Window is how many records the call holds; LeftOut how many of the group's
	// window it left out for window_max_events and window_max_bytes; Markers how many
	// records stand in it as markers, cut to the byte budget.
	Window, LeftOut, Markers int
	// Suppressed is how many triggers of the key the cooldown held back before it.
	Suppressed int64
}

// Window evaluates one record in window mode: its transforms; when the trigger matches
// (and its key is not cooling down) its group's window is read for a call; when the
// context filter passes it joins its group's window. The error is a store's (the batch
// is retried whole: adds are idempotent by sequence).
func (e *Evaluator) Window(ctx context.Context, project string, c *pipelinecfg.Compiled, it Item) (WindowResult, error) {
	var res WindowResult
	rec, err := ottlevent.DecodeRecord(it.Body, it.Signal)
	if err != nil {
		return WindowResult{Skipped: true, Step: StepRecord, Err: err}, nil
	}
	rec.SetMaxBytes(e.o.MaxRecordBytes)
	res.Body = it.Body
	if c.Transforms != nil {
		if err := c.Transforms.Apply(ctx, rec); err != nil {
			return WindowResult{Skipped: true, TooLarge: errors.Is(err, ottlevent.ErrRecordTooLarge), Step: StepTransforms, Err: err}, nil
		}
		if rec.Changed() {
			res.Body = rec.AppendJSON(nil)
		}
	}
	if c.GroupKey != nil {
		if res.Group, err = c.GroupKey.String(ctx, rec); err != nil {
			res.Group = "" // a record without the group field goes to the empty group
		}
	}
	res.Triggered, res.TriggerErr = c.Trigger.Match(ctx, rec)
	if res.TriggerErr != nil {
		res.Triggered = false
	}
	if res.Triggered {
		if err := e.trigger(ctx, project, c, it, rec, &res); err != nil {
			return res, err
		}
	}
	if e.o.NoWindows {
		return res, nil
	}
	pass, err := c.ContextFilter.Match(ctx, rec)
	if err != nil {
		res.FilterErr = err
		return res, nil
	}
	if pass {
		if err := e.o.Windows.Add(ctx, project, res.Group, it.Seq, res.Body, it.Time, c.WindowDuration); err != nil {
			return res, fmt.Errorf("window store: %w", err)
		}
		res.Stored = true
	}
	return res, nil
}

// trigger decides a trigger's cooldown and reads its window, cut to the project's
// budget, into its call.
func (e *Evaluator) trigger(ctx context.Context, project string, c *pipelinecfg.Compiled, it Item, rec *ottlevent.Record, res *WindowResult) error {
	var suppressed int64
	if c.Cooldown > 0 && e.o.Cooldowns != nil {
		key := res.Group
		if c.DedupKey != nil {
			var err error
			if key, err = c.DedupKey.String(ctx, rec); err != nil {
				key = "" // as the group key: a record without the field shares the empty key
			}
		}
		pass, n, err := e.pass(ctx, project, key, it.Seq, c.Cooldown)
		if err != nil {
			return err
		}
		if !pass {
			res.Suppressed = true
			return nil
		}
		suppressed = n
	}
	if e.o.NoWindows {
		return nil
	}
	window, total, err := e.o.Windows.Window(ctx, project, res.Group, it.Time.Add(-c.WindowDuration), c.WindowMaxEvents)
	if err != nil {
		return err
	}
	kept, markers := agentbody.FitWindow(window, c.WindowMaxBytes)
	leftOut := total - len(kept)
	res.Call = &WindowCall{Body: agentbody.WindowCall(res.Body, kept, leftOut, suppressed), Window: len(kept),
		LeftOut: leftOut, Markers: markers, Suppressed: suppressed}
	return nil
}
