package console

import (
	"context"
	"time"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/dryrun"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelinecfg"
)

// The dry run's evaluation is internal/collector/dryrun's, the one the backlog preview uses too:
// the records of a read, oldest first, through a compiled pipeline as the trigger,
// window and incident processors run them, with nothing sent and nothing stored.

const (
	// dryRunEvalTime bounds the CPU one dry run may take (OTTL over up to 1000 records):
	// past it the answer says timed_out and holds what was evaluated.
	dryRunEvalTime = 5 * time.Second
	// maxDryRunCallBytes bounds the calls of an answer: window calls repeat their
	// windows, so 1000 triggers could otherwise make gigabytes.
	maxDryRunCallBytes = 8 << 20
	// maxDryRunRecordBytes bounds the matched records of an answer, as maxDryRunCallBytes
	// bounds its calls: a budget of its own, so a run with many large matches still
	// shows its calls.
	maxDryRunRecordBytes = maxDryRunCallBytes
	// maxDryRunErrors bounds the listed evaluation errors.
	maxDryRunErrors = 100
	// maxDryRunHeldBytes is the memory budget of one dry run's evaluation: the records it
	// keeps after their transforms (legacy: the matches, for the calls; window: the
	// windows; incident: the context and the events of each incident's next call). Each record is bounded by the record limit, but 1000 of them are not:
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

// The answer's types are the shared evaluator's (docs/contract.md#section-12).
type (
	dryRunAnswer = dryrun.Answer
	dryRunError  = dryrun.Error
	dryRunRecord = dryrun.MatchedRecord
)

// evaluate runs the records of a read, oldest first, as one batch: the dry run shows the
// calls of its matches in arrays of batch_size, as one pulled batch would make them (in
// legacy mode; window and incident calls do not depend on batches).
func evaluate(ctx context.Context, c *pipelinecfg.Compiled, recs []storedRecord, lim dryRunLimits) *dryRunAnswer {
	rs := make([]dryrun.Record, len(recs))
	for i, r := range recs {
		rs[i] = dryrun.Record{Seq: r.seq, Time: r.time, Signal: r.signal, SourceID: r.sourceID, Data: r.data}
	}
	return dryrun.Evaluate(ctx, c, rs, dryrun.Limits{EvalTime: lim.evalTime, CallBytes: lim.callBytes, RecordBytes: lim.recordBytes,
		Errors: lim.errors, MaxRecordBytes: lim.maxRecordBytes, HeldBytes: lim.heldBytes})
}
