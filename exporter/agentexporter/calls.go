package agentexporter

import (
	"fmt"
	"strconv"

	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/otelcol-svc/otelcol-svc/internal/agentbody"
	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelinedata"
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
	// failed, when set, is why the call must not be made (a record too large after
	// transforms, a body over max_call_bytes): it is dead-lettered at once with this as
	// its error, body and all, and the agent is not called.
	failed string
	// requestID, set on an incident call, is the id the incident processor issued and
	// recorded with the incident: the call is made under it, never a new one, so a call
	// taken over by another process is the same call to the agent (and its result finds
	// the incident).
	requestID string
	// incident marks an incident call: it is counted in the ledger's incident_calls here,
	// as no pipeline batch settles it.
	incident bool
}

// buildCalls turns a pipeline batch into calls, keeping the items' order: records go in
// JSON arrays of at most size records and at most maxBytes bytes, a window call goes
// alone, and records before it are sent before it. A failed item, and a body that cannot
// fit maxBytes, become failed calls.
func buildCalls(ld plog.Logs, size, maxBytes int) []call {
	var calls []call
	var batch [][]byte
	var seqs []uint64
	var traceID string
	var suppressed int64
	batchBytes := 2 // the array's brackets
	flush := func() {
		if len(batch) > 0 {
			calls = append(calls, call{body: agentbody.Array(batch), records: len(batch), seqs: seqs, traceID: traceID, suppressed: suppressed})
			batch, seqs, traceID, suppressed, batchBytes = batch[:0], nil, "", 0, 2
		}
	}
	pipelinedata.Each(ld, func(lr plog.LogRecord) {
		it := pipelinedata.Read(lr)
		if len(it.Body) == 0 {
			// Not JSON: it would make the whole array invalid for the agent.
			return
		}
		if it.Kind == pipelinedata.KindFailed {
			flush()
			calls = append(calls, call{body: agentbody.Array([][]byte{it.Body}), records: 1, seqs: []uint64{it.Seq},
				traceID: recordTraceID(it.Body, false), group: it.Group, failed: it.Error})
			return
		}
		if it.Kind == pipelinedata.KindIncidentCall {
			flush()
			// One call on its own, counted as one record, its events and window inside it
			// as a window call's are; no raw record stands behind it, so no sequence.
			c := call{body: it.Body, records: 1, group: it.Group, requestID: it.RequestID, incident: true}
			if len(it.Body) > maxBytes {
				c.body, c.failed = agentbody.Marker(it.Body), callTooLarge(len(it.Body), maxBytes)
			}
			calls = append(calls, c)
			return
		}
		if it.Kind == pipelinedata.KindWindowCall {
			flush()
			c := call{body: it.Body, records: 1, seqs: []uint64{it.Seq}, traceID: recordTraceID(it.Body, true), group: it.Group}
			if len(it.Body) > maxBytes {
				c.body, c.failed = agentbody.Marker(it.Body), callTooLarge(len(it.Body), maxBytes)
			}
			calls = append(calls, c)
			return
		}
		if len(it.Body)+2 > maxBytes {
			flush()
			calls = append(calls, call{body: agentbody.Marker(it.Body), records: 1, seqs: []uint64{it.Seq},
				traceID: recordTraceID(it.Body, false), failed: callTooLarge(len(it.Body)+2, maxBytes)})
			return
		}
		if len(batch) > 0 && batchBytes+1+len(it.Body) > maxBytes {
			flush() // a smaller array rather than a body past the limit
		}
		if len(batch) > 0 {
			batchBytes++ // the comma
		}
		batchBytes += len(it.Body)
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

// callTooLarge is the error of a call whose body would pass max_call_bytes.
func callTooLarge(n, limit int) string {
	return fmt.Sprintf("%s: the call's body would be %d bytes, over the call body limit of %d bytes (SVC_MAX_CALL_BYTES); the agent was not called",
		apierror.PayloadTooLarge, n, limit)
}

// suppressedHeader tells the agent, on a legacy call, how many triggers cooldowns held
// back before its records; nil when none were.
func suppressedHeader(c call) map[string]string {
	if c.suppressed <= 0 {
		return nil
	}
	return map[string]string{"X-Suppressed-Count": strconv.FormatInt(c.suppressed, 10)}
}
