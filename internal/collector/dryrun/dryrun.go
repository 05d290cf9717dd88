// Package dryrun evaluates a compiled pipeline over stored records as the data plane
// runs it, holding everything in memory and touching no store: the console's dry run
// (receiver/ingestreceiver/internal/console) and the backlog preview
// (internal/collector/validationresponder) both use it, so that what they announce is one
// evaluation, not two that could drift apart.
//
// The records go through internal/collector/pipelineeval, the evaluation the trigger
// processor (legacy mode), the window processor (window mode) and the incident processor
// (incident mode) run, with its windows in memory and no cooldowns, and the bodies the agent exporter would POST are built by
// the same code (internal/agentbody):
//
//   - legacy mode: each record through the trigger, then the transforms; the matched
//     records of each batch (Flush ends one) in arrays of batch_size, in order, and under
//     Limits.MaxCallBytes when set, split as the agent exporter splits them. The live
//     pipeline's batches are what it pulled from the stream; a backlog's are fixed
//     (validation.BacklogBatchRecords), so its preview is exact.
//   - window mode: each record through the transforms, then the trigger (a call) and the
//     context filter (kept for later windows). A trigger's window is the kept records of
//     its group among these same records, stored within window_duration before it, cut
//     to the window budget: the live pipeline reads its window store (Redis), which may
//     hold records older than these.
//   - incident mode: each record through the transforms, then the trigger (its event
//     opens or joins its fingerprint's incident), resolve_when (resolves it) and the
//     context filter (kept as its fingerprint's context). The incidents live in memory,
//     played over the records' stored times (incident.go): the opening call group_wait
//     after opening, an update call per group_interval when new events came, the
//     resolution by resolve_when or after resolve_after without events and its call,
//     reopen_within. Incident.Due decides each call, as in the incident processor's
//     ticker, and each call's window is the context of its fingerprint among these same
//     records. Answer plays on after the last record as if no other came. Events are
//     applied one record at a time, where the processor applies a batch at once.
//   - cooldowns and call budgets are not applied: they hang on live state (what was
//     called when) that a trial must neither read nor change. They only hold calls back.
//     Nor does a trial see the incidents already open in the store, or people's actions.
//
// It imports the collector's OTTL (through pipelinecfg): the control plane, which links
// no collector code, asks a data-plane process instead.
package dryrun

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/otelcol-svc/otelcol-svc/internal/agentbody"
	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/ottlevent"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelinecfg"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelineeval"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
)

// Record is one message of a project's raw stream.
type Record struct {
	Seq      uint64
	Time     time.Time
	Signal   string
	SourceID string
	Data     []byte
}

// Limits bound an evaluation and its answer.
type Limits struct {
	// EvalTime bounds the evaluation's time: past it the answer says TimedOut and holds
	// what was evaluated.
	EvalTime time.Duration
	// CallBytes and RecordBytes bound the call bodies and matched records the answer
	// lists; what does not fit is counted in CallsLeftOut and RecordsLeftOut.
	CallBytes   int
	RecordBytes int
	// Errors bounds the listed evaluation errors.
	Errors int
	// MaxRecordBytes is each record's limit while transformed (SVC_MAX_RECORD_BYTES, as
	// in the pipeline); 0 is ottlevent's default.
	MaxRecordBytes int
	// HeldBytes is the memory budget of what the evaluation keeps (legacy: a batch's
	// matches; window: the windows; incident: the context and each incident's events
	// for its next call); past it the evaluation stops and the answer says
	// MemoryBudgetExceeded. 0 is no budget.
	HeldBytes int
	// MaxCallBytes, when set, splits a legacy array as the agent exporter does under its
	// max_call_bytes; a single record past it is an error (the exporter dead-letters it
	// unsent). 0 splits by batch_size alone.
	MaxCallBytes int
	// Count evaluates for the counts alone: nothing is listed (calls and records are all
	// left out, their bodies never built), window mode keeps no windows and incident
	// mode no context nor events.
	Count bool
}

// Error is a record the pipeline would skip or dead-letter, as its processors log it.
type Error struct {
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

// MatchedRecord is a matched record: Record as stored, Transformed as the agent would get
// it (legacy mode: after the transforms; window mode: the call's trigger).
type MatchedRecord struct {
	Seq         uint64          `json:"seq"`
	Time        string          `json:"time"`
	Signal      string          `json:"signal"`
	SourceID    string          `json:"source_id,omitempty"`
	Record      json.RawMessage `json:"record"`
	Transformed json.RawMessage `json:"transformed"`
}

// Answer is the answer of docs/contract.md#section-12, with what the dashboard also shows.
type Answer struct {
	// Mode is "legacy", "window" or "incident".
	Mode      string `json:"mode"`
	Evaluated int    `json:"evaluated"`
	// Matched counts the records the trigger matched (legacy: those that would be sent;
	// window: the triggers; incident: the events that open or join incidents),
	// MatchedSeqs names them.
	Matched     int      `json:"matched"`
	MatchedSeqs []uint64 `json:"matched_seqs"`
	// Incidents (incident mode only) is how many incidents the records would open: a
	// reopened one counts once, a fingerprint's new incident after one resolved
	// counts again.
	Incidents *int `json:"incidents,omitempty"`
	// Records are the matched records, stored and transformed.
	Records []MatchedRecord   `json:"records"`
	Calls   []json.RawMessage `json:"calls"`
	Errors  []Error           `json:"errors"`
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
	// it kept passed the memory budget.
	MemoryBudgetExceeded bool `json:"memory_budget_exceeded,omitempty"`
}

// TotalCalls is every agent call the evaluation found, listed or left out.
func (a *Answer) TotalCalls() int { return len(a.Calls) + a.CallsLeftOut }

// maxErrorMessage bounds each listed error's message.
const maxErrorMessage = 1024

// Evaluator runs records through a compiled pipeline, one at a time, oldest first.
type Evaluator struct {
	ctx         context.Context
	c           *pipelinecfg.Compiled
	lim         Limits
	ans         *Answer
	deadline    time.Time
	stopped     bool
	callBytes   int
	recordBytes int
	// held is what a batch's matches keep (legacy mode); with the windows' bytes
	// (window mode), against lim.HeldBytes.
	held int
	// matched are the current batch's matches (legacy mode).
	matched []matchedBody
	eval    *pipelineeval.Evaluator
	// windows are the trial's windows (window mode), in place of the window store, or
	// the context of each fingerprint (incident mode).
	windows *pipelineeval.MemoryWindows
	// sim is incident mode's incidents (incident.go); incidents counts those opened.
	sim       *incidentSim
	incidents int
}

type matchedBody struct {
	seq  uint64
	body []byte
	// failed: a record dead-lettered in the batch (too large after its transforms),
	// which the agent exporter sends no array across.
	failed bool
}

// New starts an evaluation; its time limit runs from now.
func New(ctx context.Context, c *pipelinecfg.Compiled, lim Limits) *Evaluator {
	ans := &Answer{Mode: c.Mode, MatchedSeqs: []uint64{}, Records: []MatchedRecord{}, Calls: []json.RawMessage{}, Errors: []Error{}}
	if ans.Mode == "" { // compiled by hand, not by pipelinecfg.Compile
		ans.Mode = mirror.ModeLegacy
		if c.Window {
			ans.Mode = mirror.ModeWindow
		}
	}
	windows := pipelineeval.NewMemoryWindows()
	// Cooldowns and call budgets hang on live state (what was called when) that a
	// trial must neither read nor change: none is injected.
	eval := pipelineeval.New(pipelineeval.Options{Windows: windows, MaxRecordBytes: lim.MaxRecordBytes, NoWindows: lim.Count})
	e := &Evaluator{ctx: ctx, c: c, lim: lim, ans: ans, deadline: time.Now().Add(lim.EvalTime), eval: eval, windows: windows}
	if ans.Mode == mirror.ModeIncident {
		e.sim = newIncidentSim(c.Incident)
		ans.Incidents = &e.incidents
	}
	return e
}

// Evaluate runs recs, oldest first, as one batch.
func Evaluate(ctx context.Context, c *pipelinecfg.Compiled, recs []Record, lim Limits) *Answer {
	e := New(ctx, c, lim)
	for _, r := range recs {
		if !e.Add(r) {
			break
		}
	}
	return e.Answer()
}

// Add evaluates one record; false when the evaluation has stopped (time or memory
// budget) and the record was not evaluated.
func (e *Evaluator) Add(r Record) bool {
	if e.stop() {
		return false
	}
	e.ans.Evaluated++
	switch {
	case e.sim != nil:
		e.incident(r)
	case e.c.Window:
		e.window(r)
	default:
		e.legacy(r)
	}
	return true
}

// Flush ends a batch: in legacy mode its matches become calls. Window and incident
// calls do not depend on batches.
func (e *Evaluator) Flush() {
	if len(e.matched) == 0 {
		return
	}
	size, maxBytes := e.c.BatchSize, e.lim.MaxCallBytes
	var batch [][]byte
	batchBytes := 2 // the array's brackets
	flush := func() {
		if len(batch) > 0 {
			e.call(func() []byte { return agentbody.Array(batch) })
			batch, batchBytes = nil, 2
		}
	}
	// As the agent exporter's buildCalls splits a batch: at most size records and, under
	// max_call_bytes, a smaller array rather than a body past it.
	for _, m := range e.matched {
		if m.failed {
			flush()
			continue
		}
		if len(m.body) == 0 {
			continue // not JSON: the exporter leaves it out of the array
		}
		if maxBytes > 0 && len(m.body)+2 > maxBytes {
			flush()
			e.fail(m.seq, "call", errCallTooLarge)
			continue
		}
		if maxBytes > 0 && len(batch) > 0 && batchBytes+1+len(m.body) > maxBytes {
			flush()
		}
		if len(batch) > 0 {
			batchBytes++ // the comma
		}
		batchBytes += len(m.body)
		batch = append(batch, m.body)
		if len(batch) >= size {
			flush()
		}
	}
	flush()
	for _, m := range e.matched {
		e.held -= len(m.body)
	}
	clear(e.matched)
	e.matched = e.matched[:0]
}

var errCallTooLarge = errors.New(apierror.PayloadTooLarge + ": the record alone is larger than the call body limit (SVC_MAX_CALL_BYTES); the pipeline dead-letters it unsent")

// Answer ends the last batch and returns the answer. In incident mode the incidents'
// lifecycle then plays on as if no other record came: the calls still due (opening,
// updates, the resolution after resolve_after and its call) are in the answer.
func (e *Evaluator) Answer() *Answer {
	e.Flush()
	if e.sim != nil {
		e.tick(time.Time{})
	}
	return e.ans
}

func (e *Evaluator) stop() bool {
	if e.stopped {
		return true
	}
	if e.ctx.Err() != nil || time.Now().After(e.deadline) {
		e.ans.TimedOut, e.stopped = true, true
	} else if e.lim.HeldBytes > 0 && e.held+e.windows.Bytes > e.lim.HeldBytes {
		e.ans.MemoryBudgetExceeded, e.stopped = true, true
	}
	return e.stopped
}

// legacy runs the trigger processor's evaluation (pipelineeval), without cooldowns.
func (e *Evaluator) legacy(r Record) {
	res, _ := e.eval.Legacy(e.ctx, "", e.c, item(r)) // no cooldowns, so no store to fail
	switch res.Outcome {
	case pipelineeval.Failed:
		e.fail(r.Seq, res.Step, res.Err)
		return
	case pipelineeval.TooLarge:
		// The pipeline dead-letters it: a barrier between calls.
		e.fail(r.Seq, res.Step, res.Err)
		e.matched = append(e.matched, matchedBody{seq: r.Seq, failed: true})
		return
	case pipelineeval.Matched:
	default:
		return
	}
	e.ans.Matched++
	e.ans.MatchedSeqs = append(e.ans.MatchedSeqs, r.Seq)
	e.matchedRecord(r, res.Body)
	e.matched = append(e.matched, matchedBody{seq: r.Seq, body: res.Body})
	e.held += len(res.Body)
}

// window runs the window processor's evaluation (pipelineeval) with the windows of
// these records in memory in place of the window store, at each record's stored time.
func (e *Evaluator) window(r Record) {
	res, _ := e.eval.Window(e.ctx, "", e.c, item(r)) // in-memory windows and no cooldowns: no store to fail
	if res.Skipped {
		e.fail(r.Seq, res.Step, res.Err)
		return
	}
	if res.TriggerErr != nil {
		e.fail(r.Seq, pipelineeval.StepTrigger, res.TriggerErr)
	}
	if res.Triggered {
		e.ans.Matched++
		e.ans.MatchedSeqs = append(e.ans.MatchedSeqs, r.Seq)
		e.matchedRecord(r, res.Body)
		e.call(func() []byte { return res.Call.Body }) // no call under Count, which lists none
	}
	if res.FilterErr != nil {
		e.fail(r.Seq, pipelineeval.StepContextFilter, res.FilterErr)
	}
}

func item(r Record) pipelineeval.Item {
	return pipelineeval.Item{Seq: r.Seq, Signal: r.Signal, Body: r.Data, Time: r.Time}
}

// call adds a body to the answer within the answer's byte budget; build is called only
// for a body that may be listed.
func (e *Evaluator) call(build func() []byte) {
	if e.lim.Count || e.callBytes >= e.lim.CallBytes {
		e.ans.CallsLeftOut++
		return
	}
	body := build()
	if e.callBytes+len(body) > e.lim.CallBytes {
		e.ans.CallsLeftOut++
		e.callBytes = e.lim.CallBytes // calls after one left out would be out of order
		return
	}
	// A record that is not JSON (sent undecoded): the agent would get these bytes,
	// shown as a string.
	body = jsonOrString(body)
	e.callBytes += len(body)
	e.ans.Calls = append(e.ans.Calls, body)
}

// matchedRecord adds a matched record to the answer within the records' byte budget.
// Once one is left out so are all later ones: the listed records are always the first
// of matched_seqs, in order.
func (e *Evaluator) matchedRecord(r Record, transformed []byte) {
	if e.lim.Count || e.recordBytes >= e.lim.RecordBytes {
		e.ans.RecordsLeftOut++
		return
	}
	stored, sent := jsonOrString(r.Data), jsonOrString(transformed)
	n := len(stored) + len(sent)
	if e.recordBytes+n > e.lim.RecordBytes {
		e.ans.RecordsLeftOut++
		e.recordBytes = e.lim.RecordBytes
		return
	}
	e.recordBytes += n
	e.ans.Records = append(e.ans.Records, MatchedRecord{Seq: r.Seq, Time: r.Time.UTC().Format(time.RFC3339Nano),
		Signal: r.Signal, SourceID: r.SourceID, Record: stored, Transformed: sent})
}

// fail notes a record the pipeline would skip, as its processors log it.
func (e *Evaluator) fail(seq uint64, step string, err error) {
	if len(e.ans.Errors) >= e.lim.Errors {
		e.ans.ErrorsLeftOut++
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
	e.ans.Errors = append(e.ans.Errors, Error{Seq: seq, Code: code, Status: status, Message: msg})
}

// jsonOrString keeps JSON as it is and shows anything else (a record stored undecoded
// that is not JSON) as a JSON string, so the answer stays JSON.
func jsonOrString(b []byte) json.RawMessage {
	if json.Valid(b) {
		return b
	}
	s, _ := json.Marshal(string(b))
	return s
}
