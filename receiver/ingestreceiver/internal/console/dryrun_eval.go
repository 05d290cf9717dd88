package console

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/otelcol-svc/otelcol-svc/components/agentbody"
	"github.com/otelcol-svc/otelcol-svc/components/apierror"
	"github.com/otelcol-svc/otelcol-svc/components/ottlevent"
	"github.com/otelcol-svc/otelcol-svc/components/pipelinecfg"
)

// The dry run's evaluation: the records of a read, oldest first, through a compiled
// pipeline as the trigger processor (legacy mode) or the window processor (window mode)
// runs them, and the bodies the agent exporter would POST, built by the same code
// (components/agentbody). It holds everything in memory and touches no store:
//
//   - legacy mode: each record through the trigger, then the transforms; the matched
//     records in arrays of batch_size, in order. (The live pipeline may also send a
//     smaller array when a batch it pulled from the stream ends.)
//   - window mode: each record through the transforms, then the trigger (a call) and the
//     context filter (kept for later windows). A trigger's window is the kept records of
//     its group among these same records, stored within window_duration before it, cut
//     to the window budget: the live pipeline reads its window store (Redis), which may
//     hold records older than the read.
//   - cooldowns and call budgets are not applied: they hang on live state (what was
//     called when) that a trial must neither read nor change.

const (
	// dryRunEvalTime bounds the CPU one dry run may take (OTTL over up to 1000 records):
	// past it the answer says timed_out and holds what was evaluated.
	dryRunEvalTime = 5 * time.Second
	// maxDryRunCallBytes bounds the calls of an answer: window calls repeat their
	// windows, so 1000 triggers could otherwise make gigabytes.
	maxDryRunCallBytes = 8 << 20
	// maxDryRunErrors bounds the listed evaluation errors, and maxErrorMessage each one.
	maxDryRunErrors = 100
	maxErrorMessage = 1024
	// maxDryRunHeldBytes is the memory budget of one dry run's evaluation: the records it
	// keeps after their transforms (legacy: the matches, for the calls; window: the
	// windows). Each record is bounded by the record limit, but 1000 of them are not:
	// past the budget the evaluation stops, says memory_budget_exceeded, and answers
	// what it has. With maxReads runs at once a receiver holds at most 4 × 64 MiB for
	// dry runs, besides the records read (maxReadBytes each).
	maxDryRunHeldBytes = 64 << 20
)

type dryRunLimits struct {
	evalTime  time.Duration
	callBytes int
	// maxRecordBytes is each record's limit while transformed (SVC_MAX_RECORD_BYTES, as
	// in the pipeline); 0 is ottlevent's default. heldBytes is the memory budget.
	maxRecordBytes int
	heldBytes      int
	// recordBytes bounds the matched records listed (stored and transformed bytes).
	recordBytes int
	errors      int
}

type dryRunError struct {
	Seq uint64 `json:"seq"`
	// Code is set for errors a program may act on: record_too_large_after_transforms
	// (a transform grew the record past the record limit; the pipeline dead-letters it).
	Code string `json:"code,omitempty"`
	// Status is the HTTP status the contract gives the code (413 for
	// record_too_large_after_transforms), so a program reads the same figure here as
	// on the dead-lettered delivery; absent for errors without a code.
	Status  int    `json:"status,omitempty"`
	Message string `json:"message"`
}

// dryRunAnswer is contract section 12's answer, with what the dashboard also shows.
type dryRunAnswer struct {
	// Mode is "legacy" or "window".
	Mode      string `json:"mode"`
	Evaluated int    `json:"evaluated"`
	// Matched counts the records the trigger matched (legacy: those that would be sent;
	// window: the triggers), MatchedSeqs names them.
	Matched     int      `json:"matched"`
	MatchedSeqs []uint64 `json:"matched_seqs"`
	// Records are the matched records, stored and transformed (dryrun_records.go).
	Records []dryRunRecord    `json:"records"`
	Calls   []json.RawMessage `json:"calls"`
	Errors  []dryRunError     `json:"errors"`
	// RecordsLeftOut, CallsLeftOut and ErrorsLeftOut count what the answer's bounds
	// left out.
	RecordsLeftOut int `json:"records_left_out,omitempty"`
	CallsLeftOut   int `json:"calls_left_out,omitempty"`
	ErrorsLeftOut  int `json:"errors_left_out,omitempty"`
	// Truncated: fewer records than asked were read, for the read's byte budget.
	Truncated bool `json:"truncated,omitempty"`
	// TimedOut: the evaluation stopped at its time limit after Evaluated records.
	TimedOut bool `json:"timed_out,omitempty"`
	// MemoryBudgetExceeded: the evaluation stopped after Evaluated records because what
	// it kept passed the dry run's memory budget.
	MemoryBudgetExceeded bool `json:"memory_budget_exceeded,omitempty"`
}

type dryRun struct {
	ctx         context.Context
	c           *pipelinecfg.Compiled
	lim         dryRunLimits
	ans         *dryRunAnswer
	callBytes   int
	recordBytes int
	// held is what the evaluation keeps (matches, windows), against lim.heldBytes.
	held int
}

func evaluate(ctx context.Context, c *pipelinecfg.Compiled, recs []storedRecord, lim dryRunLimits) *dryRunAnswer {
	ans := &dryRunAnswer{Mode: "legacy", MatchedSeqs: []uint64{}, Records: []dryRunRecord{}, Calls: []json.RawMessage{}, Errors: []dryRunError{}}
	if c.Window {
		ans.Mode = "window"
	}
	d := &dryRun{ctx: ctx, c: c, lim: lim, ans: ans}
	deadline := time.Now().Add(lim.evalTime)
	stop := func() bool {
		if ctx.Err() != nil || time.Now().After(deadline) {
			ans.TimedOut = true
			return true
		}
		if lim.heldBytes > 0 && d.held > lim.heldBytes {
			ans.MemoryBudgetExceeded = true
			return true
		}
		return false
	}
	if c.Window {
		d.window(recs, stop)
	} else {
		d.legacy(recs, stop)
	}
	return ans
}

// legacy runs the trigger processor's steps (processor/triggerprocessor record).
func (d *dryRun) legacy(recs []storedRecord, stop func() bool) {
	var matched [][]byte
	for _, r := range recs {
		if stop() {
			break
		}
		d.ans.Evaluated++
		body, ok := d.legacyRecord(r)
		if !ok {
			continue
		}
		d.ans.Matched++
		d.ans.MatchedSeqs = append(d.ans.MatchedSeqs, r.seq)
		d.matchedRecord(r, body)
		matched = append(matched, body)
		d.held += len(body)
	}
	for len(matched) > 0 {
		n := min(d.c.BatchSize, len(matched))
		d.call(agentbody.Array(matched[:n]))
		matched = matched[n:]
	}
}

func (d *dryRun) legacyRecord(r storedRecord) ([]byte, bool) {
	c := d.c
	if c.Trigger.String() == "" && c.Transforms == nil {
		return r.data, true // the pipeline sends such records undecoded
	}
	rec, err := ottlevent.DecodeRecord(r.data, r.signal)
	if err != nil {
		d.fail(r.seq, "record", err)
		return nil, false
	}
	rec.SetMaxBytes(d.lim.maxRecordBytes)
	match, err := c.Trigger.Match(d.ctx, rec)
	if err != nil {
		d.fail(r.seq, "trigger", err)
		return nil, false
	}
	if !match {
		return nil, false
	}
	if c.Transforms != nil {
		if err := c.Transforms.Apply(d.ctx, rec); err != nil {
			// The pipeline drops such a record rather than send it half transformed.
			d.fail(r.seq, "transforms", err)
			return nil, false
		}
		if rec.Changed() {
			return rec.AppendJSON(nil), true
		}
	}
	return r.data, true
}

// kept is a record of a window, as the window store holds it.
type kept struct {
	t    time.Time
	body []byte
}

// window runs the window processor's steps (processor/windowprocessor record, trigger)
// with the group's kept records in memory in place of the window store.
func (d *dryRun) window(recs []storedRecord, stop func() bool) {
	c := d.c
	groups := map[string][]kept{}
	for _, r := range recs {
		if stop() {
			break
		}
		d.ans.Evaluated++
		rec, err := ottlevent.DecodeRecord(r.data, r.signal)
		if err != nil {
			d.fail(r.seq, "record", err)
			continue
		}
		rec.SetMaxBytes(d.lim.maxRecordBytes)
		body := r.data
		if c.Transforms != nil {
			if err := c.Transforms.Apply(d.ctx, rec); err != nil {
				d.fail(r.seq, "transforms", err)
				continue
			}
			if rec.Changed() {
				body = rec.AppendJSON(nil)
			}
		}
		group := ""
		if c.GroupKey != nil {
			if group, err = c.GroupKey.String(d.ctx, rec); err != nil {
				group = "" // as the pipeline: a record without the group field goes to the empty group
			}
		}
		match, err := c.Trigger.Match(d.ctx, rec)
		if err != nil {
			d.fail(r.seq, "trigger", err)
		}
		if match {
			d.ans.Matched++
			d.ans.MatchedSeqs = append(d.ans.MatchedSeqs, r.seq)
			d.matchedRecord(r, body)
			if d.callBytes < d.lim.callBytes {
				d.call(d.windowCall(body, groups[group], r.time))
			} else {
				d.ans.CallsLeftOut++
			}
		}
		pass, err := c.ContextFilter.Match(d.ctx, rec)
		if err != nil {
			d.fail(r.seq, "context_filter", err)
		}
		if pass {
			groups[group] = append(groups[group], kept{t: r.time, body: body})
			d.held += len(body)
		}
	}
}

// windowCall is the trigger's body: the group's records within window_duration before
// the trigger, the newest window_max_events of them, cut to window_max_bytes.
func (d *dryRun) windowCall(trigger []byte, group []kept, at time.Time) []byte {
	since := at.Add(-d.c.WindowDuration)
	var window [][]byte
	for _, k := range group {
		if !k.t.Before(since) {
			window = append(window, k.body)
		}
	}
	total := len(window)
	if total > d.c.WindowMaxEvents {
		window = window[total-d.c.WindowMaxEvents:]
	}
	cut, _ := agentbody.FitWindow(window, d.c.WindowMaxBytes)
	return agentbody.WindowCall(trigger, cut, total-len(cut), 0)
}

// call adds a body to the answer within the answer's byte budget.
func (d *dryRun) call(body []byte) {
	if d.callBytes+len(body) > d.lim.callBytes {
		d.ans.CallsLeftOut++
		d.callBytes = d.lim.callBytes // calls after one left out would be out of order
		return
	}
	// A record that is not JSON (sent undecoded): the agent would get these bytes,
	// shown as a string.
	body = jsonOrString(body)
	d.callBytes += len(body)
	d.ans.Calls = append(d.ans.Calls, body)
}

// fail notes a record the pipeline would skip, as its processors log it.
func (d *dryRun) fail(seq uint64, step string, err error) {
	if len(d.ans.Errors) >= d.lim.errors {
		d.ans.ErrorsLeftOut++
		return
	}
	msg, code, status := step+": "+err.Error(), "", 0
	if errors.Is(err, ottlevent.ErrRecordTooLarge) {
		code, status = apierror.RecordTooLargeAfterTransforms, http.StatusRequestEntityTooLarge
	}
	if len(msg) > maxErrorMessage {
		msg = msg[:maxErrorMessage]
		for len(msg) > 0 && !utf8.ValidString(msg) {
			msg = msg[:len(msg)-1]
		}
	}
	d.ans.Errors = append(d.ans.Errors, dryRunError{Seq: seq, Code: code, Status: status, Message: msg})
}
