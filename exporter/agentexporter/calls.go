package agentexporter

import (
	"strconv"

	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/otelcol-svc/otelcol-svc/components/agentbody"
	"github.com/otelcol-svc/otelcol-svc/components/pipelinedata"
)

// call is one POST to the agent.
type call struct {
	body []byte
	// records counts what the call delivers: the batch's records, or 1 for a window call.
	records int
	// seqs are the raw stream sequences of the records (a window call: its trigger's),
	// for the ledger and the delivery log.
	seqs []uint64
	// traceID is the first record's (or the trigger's) W3C trace id that has one; ""
	// when none does.
	traceID string
	// group is a window call's group key: calls of one group are delivered in order,
	// across batches (ordering.go). Legacy calls have none: they share one lane per
	// project, so they keep the stream's order.
	group string
	// suppressed sums what cooldowns held back before the call's legacy records, sent
	// as X-Suppressed-Count (a window call says it in its body).
	suppressed int64
}

// buildCalls turns a pipeline batch into calls, keeping the items' order: records go in
// JSON arrays of at most size records, a window call goes alone, and records before it
// are sent before it.
func buildCalls(ld plog.Logs, size int) []call {
	var calls []call
	var batch [][]byte
	var seqs []uint64
	var traceID string
	var suppressed int64
	flush := func() {
		if len(batch) > 0 {
			calls = append(calls, call{body: agentbody.Array(batch), records: len(batch), seqs: seqs, traceID: traceID, suppressed: suppressed})
			batch, seqs, traceID, suppressed = batch[:0], nil, "", 0
		}
	}
	pipelinedata.Each(ld, func(lr plog.LogRecord) {
		it := pipelinedata.Read(lr)
		if len(it.Body) == 0 {
			// Not JSON: it would make the whole array invalid for the agent.
			return
		}
		if it.Kind == pipelinedata.KindWindowCall {
			flush()
			calls = append(calls, call{body: it.Body, records: 1, seqs: []uint64{it.Seq}, traceID: recordTraceID(it.Body, true), group: it.Group})
			return
		}
		batch = append(batch, it.Body)
		seqs = append(seqs, it.Seq)
		suppressed += it.Suppressed
		if traceID == "" {
			traceID = recordTraceID(it.Body, false)
		}
		if len(batch) >= size {
			flush()
		}
	})
	flush()
	return calls
}

// suppressedHeader tells the agent, on a legacy call, how many triggers cooldowns held
// back before its records; nil when none were.
func suppressedHeader(c call) map[string]string {
	if c.suppressed <= 0 {
		return nil
	}
	return map[string]string{"X-Suppressed-Count": strconv.FormatInt(c.suppressed, 10)}
}
