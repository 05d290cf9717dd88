package sinkexporter

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelinedata"
	"github.com/otelcol-svc/otelcol-svc/internal/delivery"
	"github.com/otelcol-svc/otelcol-svc/internal/deliverylog"
	"github.com/otelcol-svc/otelcol-svc/internal/incident"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
	"github.com/otelcol-svc/otelcol-svc/internal/textfmt"
)

// deadLetterKindSink is the subject token of results a destination never took.
const deadLetterKindSink = "sink"

func (e *sinkExporter) settleResult(ctx context.Context, proj mirror.Project, it pipelinedata.Item) error {
	sink, ok := findSink(proj, it.SinkID)
	if !ok || !sink.Enabled {
		// Removed or disabled since the result was fetched: the receiver stops this
		// destination's consumer, and nothing more is owed to it.
		e.tel.deliveryEnded(ctx, sinkKind(sink), delivery.OutcomeSkipped, 0)
		return nil
	}
	if n, ok := readNotice(it); ok && slices.Contains(n.AboutDestinations, sink.ID) {
		// A notice about this destination's own failure: it would not take it either,
		// and telling it would be a loop.
		e.tel.deliveryEnded(ctx, sink.Kind, delivery.OutcomeSkipped, 0)
		return nil
	} else if ok && sink.Kind == kindChat && callNotice(n) {
		// An incoming chat webhook cannot edit a message: the call's notice would be a
		// second message for one call, whose result follows as its own, and nobody acts
		// on it. Webhooks get every notice; a slack_app root is updated in place.
		e.tel.deliveryEnded(ctx, sink.Kind, delivery.OutcomeSkipped, 0)
		return nil
	}
	_, err := e.deliverResult(ctx, proj, sink, it, sinkDeliveryID(it, sink.ID), "")
	return err
}

// sending is what delivering one item to one destination takes.
type sending struct {
	delivery.Request
	// done runs once the destination took the item, before it is settled (a Slack
	// root's thread is recorded); an error leaves the item to be delivered again.
	done func(ctx context.Context) error
	// already: the destination has the item (a redelivery after it was posted), which
	// is settled as delivered without sending it again.
	already bool
}

// errLater is why an item cannot be delivered now without failing it: it is neither
// sent nor logged (nor dead-lettered), and comes again (the incidents' bucket cannot be
// read, a delivery interrupted by a stop).
type errLater struct{ why string }

func (e *errLater) Error() string { return e.why }

// sinkDeliveryID names the delivery of one result to one destination: the same on every
// redelivery of that result to that destination (the log keeps its latest try), another
// for each destination.
func sinkDeliveryID(it pipelinedata.Item, sinkID string) string {
	key := it.MsgID
	if key == "" {
		key = "seq:" + strconv.FormatUint(it.Seq, 10)
	}
	sum := sha256.Sum256([]byte(key + "|" + sinkID))
	return "snk_" + hex.EncodeToString(sum[:16])
}

// deliverResult delivers one result to sink under delivery id id (a replay names the
// delivery it replays in replayOf), logging it, and settles it: delivered, or
// dead-lettered. An error means neither: it must be delivered again.
func (e *sinkExporter) deliverResult(ctx context.Context, proj mirror.Project, sink mirror.Sink, it pipelinedata.Item, id, replayOf string) (bool, error) {
	o, err := e.sinkRequest(ctx, proj, sink, it, id)
	var later *errLater
	if errors.As(err, &later) {
		return false, fmt.Errorf("result %s for sink %s of project %s: %w; it will be delivered again", it.RequestID, sink.ID, proj.ID, err)
	}
	sent := o.Body
	if err != nil {
		sent = it.Body
	}
	e.engine.Log().Record(proj.ID, deliverylog.Delivery{ID: id, Kind: deliverylog.KindSink, SinkID: sink.ID, SinkKind: sink.Kind,
		RequestID: it.RequestID, SourceSeq: it.Seq, Records: 1, RequestBody: sent, Unmatched: it.Unmatched, ReplayOf: replayOf})
	start := time.Now()
	var res delivery.Result
	switch {
	case err != nil:
		res = delivery.Result{Reason: err.Error()}
	case o.already:
		res = delivery.Result{Delivered: true}
	default:
		o.LogID = id
		res = e.engine.Deliver(ctx, o.Request)
	}
	switch {
	case res.Delivered:
		if o.done != nil {
			if err := o.done(ctx); err != nil {
				e.engine.Log().Abandon(proj.ID, id, "delivered, but "+err.Error()+": the result is delivered again")
				return false, fmt.Errorf("result %s for sink %s of project %s was delivered but %w; it will be delivered again",
					it.RequestID, sink.ID, proj.ID, err)
			}
		}
		e.engine.Log().Finish(proj.ID, id, deliverylog.Final{State: deliverylog.StateDelivered})
		_ = e.engine.Log().AddDestination(ctx, proj.ID, sink.ID, it.Seq, true, replayOf != "") // never fails: derived from the cursor
		e.tel.deliveryEnded(ctx, sink.Kind, delivery.OutcomeDelivered, time.Since(start))
		return true, nil
	case res.Aborted:
		e.engine.Log().Abandon(proj.ID, id, "interrupted by shutdown; the result is delivered again")
		return false, fmt.Errorf("result %s for sink %s of project %s interrupted: %w; it will be delivered again",
			it.RequestID, sink.ID, proj.ID, res.Cause)
	}
	target := sink.URL
	if sink.Kind == kindSlackApp {
		target = e.cfg.SlackAPIURL
	}
	h := delivery.DeadLetterHeaders(it.RequestID, res, target)
	h.Set(streams.HeaderDLQSink, sink.ID)
	h.Set(streams.HeaderDLQKind, sink.Kind)
	// The payload as the agent sent it, whatever the destination was sent: replaying it
	// goes through the same rendering.
	seq, err := e.engine.PublishDeadLetter(ctx, proj.ID, deadLetterKindSink, it.Body, h)
	if err != nil {
		e.engine.Log().Abandon(proj.ID, id, res.Reason+"; not dead-lettered (the dead-letter stream was unavailable): the result is delivered again")
		return false, fmt.Errorf("result %s for sink %s of project %s failed (%s) and could not be dead-lettered: %w; it will be delivered again",
			it.RequestID, sink.ID, proj.ID, res.Reason, err)
	}
	// Counted before the ack: the delivered figure is the cursor's settled results less
	// the dead letters counted, so one acked uncounted would show as delivered.
	if err := e.engine.Log().AddDestination(ctx, proj.ID, sink.ID, it.Seq, false, replayOf != ""); err != nil {
		e.engine.Log().Abandon(proj.ID, id, res.Reason+"; dead-lettered but not counted in the ledger: the result is delivered again")
		return false, fmt.Errorf("result %s for sink %s of project %s was dead-lettered (%s) but %w; it will be delivered again",
			it.RequestID, sink.ID, proj.ID, res.Reason, err)
	}
	e.engine.Log().Finish(proj.ID, id, deliverylog.Final{State: deliverylog.StateDeadLettered, DeadLetterSeq: seq, Error: res.Reason})
	e.tel.deliveryEnded(ctx, sink.Kind, delivery.OutcomeDeadLettered, time.Since(start))
	if !streams.IsNotice(it.Signal, it.RequestID, it.Unmatched) {
		// A notice that failed is not notified about: that would be the loop.
		e.engine.Failed(proj.ID, delivery.Failure{DeliveryID: id, Kind: delivery.FailedDestination, Error: res.Reason,
			SinkID: sink.ID, SinkKind: sink.Kind, About: []string{sink.ID}})
	}
	e.logger.Warn("sink delivery dead-lettered",
		zap.String("project", proj.ID),
		zap.String("sink", sink.ID),
		zap.String("request_id", it.RequestID),
		zap.String("reason", res.Reason),
		zap.Int("status", res.Status),
		zap.Int("attempts", res.Attempts),
		zap.String("destination", delivery.Origin(target)))
	return false, nil
}

// Kinds of destination.
const (
	kindWebhook  = "webhook"
	kindChat     = "chat"
	kindSlackApp = "slack_app"
)

// sinkRequest is what a destination is sent for one result (docs/contract.md#section-8) under
// delivery id id. An *errLater means not yet.
func (e *sinkExporter) sinkRequest(ctx context.Context, proj mirror.Project, sink mirror.Sink, it pipelinedata.Item, id string) (sending, error) {
	requestID := it.RequestID
	if requestID == "" {
		requestID = "seq_" + strconv.FormatUint(it.Seq, 10)
	}
	o := sending{Request: delivery.Request{
		Who: sink.Kind, URLField: "the sink's url", Project: proj.ID,
		Target: sink.URL, RequestID: requestID,
	}}
	n, notice := readNotice(it)
	inc, err := e.incidentOf(ctx, proj, it, n)
	if err != nil {
		return o, err
	}
	switch sink.Kind {
	case kindWebhook:
		o.Method, o.Headers, o.Body = sink.Method, sink.Headers, it.Body
		// webhook-id names the result, the same on every attempt and redelivery, so the
		// receiving side can deduplicate.
		o.SignID, o.Secret = it.MsgID, proj.SigningSecret
		if o.SignID == "" {
			o.SignID = requestID
		}
		if inc.id != "" {
			// The service's header after the destination's own: a configured one of the
			// same name does not hide which incident the result or notice is about.
			h := make(map[string]string, len(sink.Headers)+1)
			for k, v := range sink.Headers {
				if !strings.EqualFold(k, headerIncidentID) {
					h[k] = v
				}
			}
			h[headerIncidentID] = inc.id
			o.Headers = h
		}
		return o, nil
	case kindChat:
		label, link := "View this delivery in the dashboard", e.engine.DeliveryLink(proj.ID, id)
		tpl, title, payload := sink.TextTemplate, "", it.Body
		switch {
		case inc.notice != nil:
			// One line in the protocol's words ("[Incident] <title>: <what happened>"),
			// whatever the destination's template, linking to the incident.
			tpl, payload = "", noticeChatPayload(inc.notice)
			label, link = "View the incident in the dashboard", e.incidentLink(proj.ID, inc.id)
		case notice:
			// The service's own words: the destination's template is written for the
			// agent's results.
			tpl = ""
			switch {
			case n.URL != "":
				label, link = "View the failed delivery in the dashboard", n.URL
			case n.Type == "usage_notice":
				label, link = "View usage in the dashboard", e.engine.ProjectLink(proj.ID, "usage")
			}
		case inc.result:
			title = inc.title
		}
		body, err := chatBody(sink, tpl, title, payload, label, link)
		if err != nil {
			return o, err
		}
		o.Body = body
		return o, nil
	case kindSlackApp:
		return e.slackRequest(ctx, proj, sink, it, id, n, notice, inc, o)
	}
	return o, fmt.Errorf("sink kind %q is not known to this version", sink.Kind)
}

// chatBody renders a result as the message the sink's platform accepts
// (textfmt.ChatBodyTitled: template tpl or default text, Slack escaping, the platform's
// size limits, the incident's title before it when there is one, and the link to the
// delivery as its last line).
func chatBody(sink mirror.Sink, tpl, title string, payload []byte, label, link string) ([]byte, error) {
	doc, err := textfmt.Decode(payload)
	if err != nil {
		// The receiver stores only JSON; say so rather than send an empty message.
		return nil, fmt.Errorf("the result is not JSON: %v", err)
	}
	return textfmt.ChatBodyTitled(textfmt.Platform(sink.Format, sink.URL), title, tpl, payload, doc, label, link)
}

// noticeFields are what the sink role reads of a notice (usage, failure, incident).
type noticeFields struct {
	Type              string   `json:"type"`
	URL               string   `json:"url"`
	AboutDestinations []string `json:"about_destinations"`
	// An incident notice's (incident.Notice's JSON).
	Transition string           `json:"transition"`
	By         string           `json:"by"`
	Incident   incident.Summary `json:"incident"`
	Text       string           `json:"text"`
}

// readNotice reports whether it is the service's notice rather than an agent's result,
// with the fields the sink role needs.
func readNotice(it pipelinedata.Item) (noticeFields, bool) {
	var n noticeFields
	if !streams.IsNotice(it.Signal, it.RequestID, it.Unmatched) {
		return n, false
	}
	_ = json.Unmarshal(it.Body, &n) // the service wrote it; a field it cannot read is left empty
	return n, true
}

// callNotice reports whether n tells only that the agent was called.
func callNotice(n noticeFields) bool {
	return n.Type == incident.NoticeUpdated && n.Transition == "call"
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
