package agentexporter

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.uber.org/zap"

	"github.com/otelcol-svc/otelcol-svc/components/mirror"
	"github.com/otelcol-svc/otelcol-svc/components/pipelinedata"
	"github.com/otelcol-svc/otelcol-svc/components/streams"
	"github.com/otelcol-svc/otelcol-svc/components/textfmt"
)

// deadLetterKindSink is the subject token of results a destination never took.
const deadLetterKindSink = "sink"

// isResults reports whether a batch holds agent results for the sink role (the JetStream
// receiver in output mode) rather than records for an agent. A batch is one or the other,
// so its first item tells.
func isResults(ld plog.Logs) bool {
	rls := ld.ResourceLogs()
	if rls.Len() == 0 || rls.At(0).ScopeLogs().Len() == 0 || rls.At(0).ScopeLogs().At(0).LogRecords().Len() == 0 {
		return false
	}
	return pipelinedata.KindOf(rls.At(0).ScopeLogs().At(0).LogRecords().At(0)) == pipelinedata.KindResult
}

// pushResults delivers each result to its destination, in order. Like agent calls, a
// result is settled (delivered or dead-lettered) before the next; only an interrupted
// delivery fails the batch, which is then redelivered.
func (e *agentExporter) pushResults(ctx context.Context, proj mirror.Project, ld plog.Logs) error {
	var err error
	pipelinedata.Each(ld, func(lr plog.LogRecord) {
		if err == nil {
			err = e.settleResult(ctx, proj, pipelinedata.Read(lr))
		}
	})
	return err
}

func (e *agentExporter) settleResult(ctx context.Context, proj mirror.Project, it pipelinedata.Item) error {
	sink, ok := findSink(proj, it.SinkID)
	if !ok || !sink.Enabled {
		// Removed or disabled since the result was fetched: the receiver stops this
		// destination's consumer, and nothing more is owed to it.
		e.tel.deliveryEnded(ctx, sinkKind(sink), outcomeSkipped, 0)
		return nil
	}
	o, err := e.sinkRequest(proj, sink, it)
	start := time.Now()
	var res result
	if err != nil {
		res = result{reason: err.Error()}
	} else {
		res = e.deliver(ctx, o)
	}
	switch {
	case res.delivered:
		e.tel.deliveryEnded(ctx, sink.Kind, outcomeDelivered, time.Since(start))
		return nil
	case res.aborted:
		return fmt.Errorf("result %s for sink %s of project %s interrupted: %w; it will be delivered again",
			it.RequestID, sink.ID, proj.ID, context.Cause(ctx))
	}
	h := deadLetterHeaders(it.RequestID, res, sink.URL)
	h.Set(streams.HeaderDLQSink, sink.ID)
	h.Set(streams.HeaderDLQKind, sink.Kind)
	// The payload as the agent sent it, whatever the destination was sent: replaying it
	// goes through the same rendering.
	if err := e.publishDeadLetter(ctx, proj.ID, deadLetterKindSink, it.Body, h); err != nil {
		return fmt.Errorf("result %s for sink %s of project %s failed (%s) and could not be dead-lettered: %w; it will be delivered again",
			it.RequestID, sink.ID, proj.ID, res.reason, err)
	}
	e.tel.deliveryEnded(ctx, sink.Kind, outcomeDeadLettered, time.Since(start))
	e.logger.Warn("sink delivery dead-lettered",
		zap.String("project", proj.ID),
		zap.String("sink", sink.ID),
		zap.String("request_id", it.RequestID),
		zap.String("reason", res.reason),
		zap.Int("status", res.status),
		zap.Int("attempts", res.attempts),
		zap.String("destination", origin(sink.URL)))
	return nil
}

// sinkRequest is what a destination is sent for one result (contract section 8).
func (e *agentExporter) sinkRequest(proj mirror.Project, sink mirror.Sink, it pipelinedata.Item) (outgoing, error) {
	requestID := it.RequestID
	if requestID == "" {
		requestID = "seq_" + strconv.FormatUint(it.Seq, 10)
	}
	o := outgoing{
		who: sink.Kind, urlField: "the sink's url", project: proj.ID,
		target: sink.URL, requestID: requestID,
	}
	switch sink.Kind {
	case "webhook":
		o.method, o.headers, o.body = sink.Method, sink.Headers, it.Body
		// webhook-id names the result, the same on every attempt and redelivery, so the
		// receiving side can deduplicate.
		o.signID, o.secret = it.MsgID, proj.SigningSecret
		if o.signID == "" {
			o.signID = requestID
		}
		return o, nil
	case "chat":
		body, err := chatBody(sink, it.Body)
		if err != nil {
			return o, err
		}
		o.body = body
		return o, nil
	}
	return o, fmt.Errorf("sink kind %q is not known to this version", sink.Kind)
}

// chatBody renders a result as the message the sink's platform accepts (textfmt.ChatBody:
// template or default text, Slack escaping, the platform's size limits).
func chatBody(sink mirror.Sink, payload []byte) ([]byte, error) {
	doc, err := textfmt.Decode(payload)
	if err != nil {
		// The receiver stores only JSON; say so rather than send an empty message.
		return nil, fmt.Errorf("the result is not JSON: %v", err)
	}
	return textfmt.ChatBody(textfmt.Platform(sink.Format, sink.URL), sink.TextTemplate, payload, doc)
}

func findSink(proj mirror.Project, id string) (mirror.Sink, bool) {
	for _, s := range proj.Sinks {
		if s.ID == id {
			return s, true
		}
	}
	return mirror.Sink{}, false
}

func sinkKind(s mirror.Sink) string {
	if s.Kind == "" {
		return "unknown"
	}
	return s.Kind
}
