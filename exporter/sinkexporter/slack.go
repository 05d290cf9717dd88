package sinkexporter

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelinedata"
	"github.com/otelcol-svc/otelcol-svc/internal/delivery"
	"github.com/otelcol-svc/otelcol-svc/internal/incident"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/slackapp"
	"github.com/otelcol-svc/otelcol-svc/internal/textfmt"
)

// A slack_app destination is a Slack app posting with its bot token to its channel
// through Slack's Web API: one root message per incident (posted when the incident
// opens, updated in place with each later notice), the results of the incident's calls in
// its thread, and everything else (results of other calls, the service's notices) as
// messages in the channel. Each call is a delivery like any other (internal/delivery: an
// Exchange): retried, paced per project and origin, logged (the message as JSON, the
// token redacted) and dead-lettered when Slack never takes it.

// slackRequest is what a slack_app destination is sent for an item.
func (e *sinkExporter) slackRequest(ctx context.Context, proj mirror.Project, sink mirror.Sink, it pipelinedata.Item, id string,
	n noticeFields, notice bool, inc incidentRef, o sending) (sending, error) {
	o.Who, o.URLField, o.Target = kindSlackApp, "slack_api_url", e.cfg.SlackAPIURL
	switch {
	case sink.BotToken == "":
		return o, errors.New("the destination has no bot token")
	case sink.Channel == "":
		return o, errors.New("the destination has no channel")
	case inc.notice != nil:
		return e.slackNotice(ctx, proj, sink, inc, o)
	case inc.result:
		return e.slackIncidentResult(ctx, proj, sink, it, id, inc, o)
	}
	label, link := "View this delivery in the dashboard", e.engine.DeliveryLink(proj.ID, id)
	tpl := sink.TextTemplate
	if notice {
		tpl = ""
		switch {
		case n.URL != "":
			label, link = "View the failed delivery in the dashboard", n.URL
		case n.Type == "usage_notice":
			label, link = "View usage in the dashboard", e.engine.ProjectLink(proj.ID, "usage")
		}
	}
	text, err := slackText("", tpl, it.Body, label, link)
	if err != nil {
		return o, err
	}
	return e.slackSending(o, sink, slackapp.Message{Channel: sink.Channel, Text: text}, nil), nil
}

// slackNotice posts the incident's root for its incident.opened notice, and updates it
// for every later one. A later notice whose root is not posted yet waits for it.
func (e *sinkExporter) slackNotice(ctx context.Context, proj mirror.Project, sink mirror.Sink, inc incidentRef, o sending) (sending, error) {
	st, err := e.incidentStore(ctx)
	if err != nil {
		return o, &errLater{"the incidents cannot be read (" + err.Error() + ")"}
	}
	sum, opened := inc.notice.Incident, inc.notice.Incident.OpenedAt
	var (
		thread incident.ChatThread
		has    bool
		record = true
	)
	cur, err := st.Get(ctx, proj.ID, inc.id)
	switch {
	case err == nil:
		// The incident as it is now: a notice delivered late shows no stale state.
		sum, opened = cur.Summary(), cur.OpenedAt
		thread, has = cur.Chat[sink.ID]
	case errors.Is(err, incident.ErrNotFound):
		record = false // expired: the notice's own state, and no thread to keep
	default:
		return o, &errLater{"the incident cannot be read (" + err.Error() + ")"}
	}
	if has {
		return e.slackSending(o, sink, slackapp.Root(thread.Channel, thread.TS, sum), nil), nil
	}
	if inc.notice.Type != incident.NoticeOpened && !e.rootNeverComes(sink, opened) {
		return o, &errLater{"the incident's Slack root message is not posted yet (its incident.opened notice comes first)"}
	}
	var done func(context.Context, slackapp.Answer) error
	if record {
		done = func(ctx context.Context, a slackapp.Answer) error {
			return e.recordThread(ctx, st, proj.ID, inc.id, sink.ID, a)
		}
	}
	return e.slackSending(o, sink, slackapp.Root(sink.Channel, "", sum), done), nil
}

// rootNeverComes reports whether an incident opened at opened has no root to wait for
// in sink: the destination was created (or enabled) after it opened, so its
// incident.opened notice is not among what it receives, or the wait is over (rootWait).
func (e *sinkExporter) rootNeverComes(sink mirror.Sink, opened time.Time) bool {
	return opened.Before(sink.Since) || time.Since(opened) >= e.rootWait()
}

// threadTries bounds the tries to record a posted root's thread before the notice is
// handed back (and the root posted again).
const threadTries = 4

// recordThread keeps the root Slack took as the incident's thread in this destination.
func (e *sinkExporter) recordThread(ctx context.Context, st *incident.Store, project, id, sinkID string, a slackapp.Answer) error {
	t := incident.ChatThread{Channel: a.Channel, TS: a.TS, PostedAt: time.Now().UTC()}
	var err error
	for i := range threadTries {
		if err = st.SetChatThread(ctx, project, id, sinkID, t); err == nil || errors.Is(err, incident.ErrNotFound) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("its Slack thread was not recorded: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond << i):
		}
	}
	return fmt.Errorf("its Slack thread was not recorded: %w", err)
}

// slackIncidentResult posts a result of an incident's call in the incident's thread,
// then shows it as the root's last result and in the incident's timeline.
func (e *sinkExporter) slackIncidentResult(ctx context.Context, proj mirror.Project, sink mirror.Sink, it pipelinedata.Item, id string,
	inc incidentRef, o sending) (sending, error) {
	text, err := slackText("", sink.TextTemplate, it.Body, "View this delivery in the dashboard", e.engine.DeliveryLink(proj.ID, id))
	if err != nil {
		return o, err
	}
	thread, has := inc.inc.Chat[sink.ID]
	if !has {
		if !e.rootNeverComes(sink, inc.inc.OpenedAt) {
			return o, &errLater{"the incident's Slack root message is not posted yet (its incident.opened notice comes first)"}
		}
		// No root will come: the result goes to the channel, titled with its incident.
		if text, err = slackText(inc.title, sink.TextTemplate, it.Body, "View this delivery in the dashboard", e.engine.DeliveryLink(proj.ID, id)); err != nil {
			return o, err
		}
		return e.slackSending(o, sink, slackapp.Message{Channel: sink.Channel, Text: text}, nil), nil
	}
	posted := slices.ContainsFunc(inc.inc.Timeline, func(en incident.Entry) bool {
		return en.Type == "chat" && en.SinkID == sink.ID && en.RequestID == it.RequestID
	})
	s := e.slackSending(o, sink, slackapp.Message{Channel: thread.Channel, ThreadTS: thread.TS, Text: text},
		func(ctx context.Context, _ slackapp.Answer) error {
			e.afterThreadReply(ctx, proj.ID, sink, inc.id, it, thread, posted)
			return nil
		})
	// Redelivered after it was posted: not posted twice.
	s.already = posted
	return s, nil
}

// rootUpdateTimeout bounds the root's update after a reply: the reply is delivered, and
// the next notice updates the root anyway.
const rootUpdateTimeout = 30 * time.Second

// afterThreadReply enters the reply in the incident's timeline and updates the root with
// the last result. Neither fails the delivery: the reply is in the thread.
func (e *sinkExporter) afterThreadReply(ctx context.Context, project string, sink mirror.Sink, id string, it pipelinedata.Item,
	thread incident.ChatThread, inTimeline bool) {
	st, err := e.incidentStore(ctx)
	if err != nil {
		return
	}
	if !inTimeline {
		if err := st.AddTimeline(ctx, project, id, incident.Entry{At: time.Now().UTC(), Type: "chat", SinkID: sink.ID,
			RequestID: it.RequestID, Detail: "result posted in the Slack thread"}); err != nil {
			e.logger.Warn("the result is in the incident's Slack thread but not in its timeline",
				zap.String("project", project), zap.String("incident", id), zap.String("sink", sink.ID), zap.Error(err))
		}
	}
	cur, err := st.Get(ctx, project, id)
	if err != nil {
		return
	}
	sum := cur.Summary()
	sum.LastResult = resultText(it.Body)
	m := slackapp.Root(thread.Channel, thread.TS, sum)
	uctx, cancel := context.WithTimeout(ctx, rootUpdateTimeout)
	defer cancel()
	var got slackapp.Answer
	res := e.engine.Deliver(uctx, delivery.Request{Who: kindSlackApp, URLField: "slack_api_url", Project: project,
		Target: e.cfg.SlackAPIURL, RequestID: it.RequestID, Body: m.JSON(), Exchange: e.slackExchange(sink.BotToken, m, &got)})
	if !res.Delivered {
		reason := res.Reason
		if res.Aborted {
			reason = "not answered in time"
		}
		e.logger.Warn("the incident's Slack root message was not updated with the last result; the next notice updates it",
			zap.String("project", project), zap.String("incident", id), zap.String("sink", sink.ID), zap.String("reason", reason))
	}
}

// slackSending is the delivery of m to a slack_app destination; done, when set, gets
// Slack's answer once it took m.
func (e *sinkExporter) slackSending(o sending, sink mirror.Sink, m slackapp.Message, done func(context.Context, slackapp.Answer) error) sending {
	var got slackapp.Answer
	o.Body = m.JSON()
	o.Exchange = e.slackExchange(sink.BotToken, m, &got)
	if done != nil {
		o.done = func(ctx context.Context) error { return done(ctx, got) }
	}
	return o
}

// slackExchange makes m's call with the engine's client; got holds Slack's last answer.
func (e *sinkExporter) slackExchange(token string, m slackapp.Message, got *slackapp.Answer) delivery.Exchange {
	return func(ctx context.Context, c *http.Client) delivery.ExchangeResult {
		a := slackapp.Send(ctx, c, e.cfg.SlackAPIURL, token, e.userAgent, m)
		*got = a
		refused := a.Error
		if h, ok := slackHints[a.Error]; ok {
			refused += " (" + h + ")"
		}
		return delivery.ExchangeResult{Err: a.Err, Status: a.Status, RetryAfter: a.RetryAfter, Refused: refused,
			Retryable: a.Retryable, Answer: a.Body, Sent: a.Sent}
	}
}

// slackHints say what to do about Slack's refusals that a destination's owner can fix.
var slackHints = map[string]string{
	"not_in_channel":    "the app is not in the channel: invite it there",
	"channel_not_found": "no such channel, or the app cannot see it",
	"invalid_auth":      "the bot token is not valid",
	"not_authed":        "no bot token was sent",
	"token_revoked":     "the bot token was revoked",
	"account_inactive":  "the app was removed from the workspace",
	"missing_scope":     "the app lacks the chat:write scope",
	"message_not_found": "the incident's root message was deleted",
	"is_archived":       "the channel is archived",
}

// slackText is a result's text in a Slack message (as an incoming webhook's, textfmt).
func slackText(title, tpl string, payload []byte, label, link string) (string, error) {
	doc, err := textfmt.Decode(payload)
	if err != nil {
		return "", fmt.Errorf("the result is not JSON: %v", err)
	}
	return textfmt.SlackText(title, tpl, payload, doc, label, link)
}
