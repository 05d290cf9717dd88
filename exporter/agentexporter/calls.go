package agentexporter

import (
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/otelcol-svc/otelcol-svc/components/pipelinedata"
)

// call is one POST to the agent.
type call struct {
	body []byte
	// records counts what the call delivers: the batch's records, or 1 for a window call.
	records int
}

// buildCalls turns a pipeline batch into calls, keeping the items' order: records go in
// JSON arrays of at most size records, a window call goes alone, and records before it
// are sent before it.
func buildCalls(ld plog.Logs, size int) []call {
	var calls []call
	var batch [][]byte
	flush := func() {
		if len(batch) > 0 {
			calls = append(calls, call{body: joinArray(batch), records: len(batch)})
			batch = batch[:0]
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
			calls = append(calls, call{body: it.Body, records: 1})
			return
		}
		batch = append(batch, it.Body)
		if len(batch) >= size {
			flush()
		}
	})
	flush()
	return calls
}

// joinArray builds "[" + bodies joined by "," + "]". The records are inserted as they
// are, never decoded and re-encoded, so the agent gets them byte for byte.
func joinArray(bodies [][]byte) []byte {
	n := 2 + len(bodies)
	for _, b := range bodies {
		n += len(b)
	}
	out := make([]byte, 0, n)
	out = append(out, '[')
	for i, b := range bodies {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, b...)
	}
	return append(out, ']')
}
