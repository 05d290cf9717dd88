package sinkexporter

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/slack-go/slack"
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
// for every later one. Any notice that finds no root in this destination posts it: the
// opened notice is published first and a destination's items come in stream order, so
// a missing root means that notice was dead-lettered (the app not in the channel yet),
// lost, or never meant for this destination (created after the incident opened), and
// waiting would not bring it. An opened notice that comes later after all (published
// again, or handed back and redelivered) finds the root and updates it; two deliveries
// posting at once keep the root recorded first (recordThread).
func (e *sinkExporter) slackNotice(ctx context.Context, proj mirror.Project, sink mirror.Sink, inc incidentRef, o sending) (sending, error) {
	st, err := e.incidentStore(ctx)
	if err != nil {
		return o, &errLater{"the incidents cannot be read (" + err.Error() + ")"}
	}
	sum := inc.notice.Incident
	var (
		thread incident.ChatThread
		has    bool
		record = true
	)
	cur, err := st.Get(ctx, proj.ID, inc.id)
	switch {
	case err == nil:
		// The incident as it is now: a notice delivered late shows no stale state.
		sum = cur.Summary()
		thread, has = cur.Chat[sink.ID]
	case errors.Is(err, incident.ErrNotFound):
		record = false // expired: the notice's own state, and no thread to keep
	default:
		return o, &errLater{"the incident cannot be read (" + err.Error() + ")"}
	}
	if has {
		return e.rootUpdateSending(o, st, proj.ID, inc.id, sink, thread, sum), nil
	}
	var done func(context.Context, slackapp.Answer) error
	if record {
		done = func(ctx context.Context, a slackapp.Answer) error {
			_, err := e.recordThread(ctx, st, proj.ID, inc.id, sink, a)
			return err
		}
	}
	return e.slackSending(o, sink, slackapp.Root(sink.Channel, "", sum), done), nil
}

// threadTries bounds the tries to record a posted root's thread before the notice is
// handed back (and the root posted again).
const threadTries = 4

// recordThread keeps the root Slack took (a) as the incident's thread in sink, and
// returns the thread to use. The first root recorded stays: when another delivery
// recorded one meanwhile (another sink process, a replay), that one is the thread, and
// it is updated to the incident's current state, which this delivery was to show.
func (e *sinkExporter) recordThread(ctx context.Context, st *incident.Store, project, id string, sink mirror.Sink, a slackapp.Answer) (incident.ChatThread, error) {
	t := incident.ChatThread{Channel: a.Channel, TS: a.TS, PostedAt: time.Now().UTC()}
	err := withTries(ctx, func() error { return st.SetChatThread(ctx, project, id, sink.ID, t) })
	if errors.Is(err, incident.ErrNotFound) {
		return t, nil
	}
	if err != nil {
		return t, fmt.Errorf("its Slack thread was not recorded: %w", err)
	}
	cur, err := st.Get(ctx, project, id)
	if err != nil {
		return t, nil // recorded; reading it back is only to learn whether ours won
	}
	won, ok := cur.Chat[sink.ID]
	if !ok || (won.Channel == t.Channel && won.TS == t.TS) {
		return t, nil
	}
	sum := cur.Summary()
	e.updateRoot(ctx, st, project, id, sink, won, sum, "")
	e.retireRoot(ctx, project, id, sink, t, sum)
	return won, nil
}

// retireRoot turns a root that lost the race to be the incident's thread into a pointer
// to the one that won, without the buttons: no later notice updates it, so nobody should
// act on it. A failure is only logged: the copy stays as it was posted.
func (e *sinkExporter) retireRoot(ctx context.Context, project, id string, sink mirror.Sink, t incident.ChatThread, sum incident.Summary) {
	title := textfmt.SlackEscape(textfmt.OneLine(sum.Title, textfmt.MaxTitle))
	if title == "" {
		title = sum.ID
	}
	text := "_" + title + "_ is followed in another message of this channel; this copy is not updated."
	m := slackapp.Message{Channel: t.Channel, TS: t.TS, Text: text,
		Blocks: []slack.Block{slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, text, false, false), nil, nil)}}
	uctx, cancel := context.WithTimeout(ctx, rootUpdateTimeout)
	defer cancel()
	var got slackapp.Answer
	res := e.engine.Deliver(uctx, delivery.Request{Who: kindSlackApp, URLField: "slack_api_url", Project: project,
		Target: e.cfg.SlackAPIURL, Body: m.JSON(), Exchange: e.slackExchange(sink.BotToken, m, &got)})
	if !res.Delivered {
		e.logger.Warn("a second Slack root message of the incident (posted at the same time as the recorded one) was not marked as a copy",
			zap.String("project", project), zap.String("incident", id), zap.String("sink", sink.ID), zap.String("reason", res.Reason))
	}
}

// withTries runs fn until it succeeds, reports the incident gone, or threadTries are
// spent, backing off between tries.
func withTries(ctx context.Context, fn func() error) error {
	var err error
	for i := range threadTries {
		if err = fn(); err == nil || errors.Is(err, incident.ErrNotFound) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond << i):
		}
	}
	return err
}

// rootUpdateSending is the chat.update of the incident's root in thread to show sum. A
// root deleted in Slack (message_not_found) is posted again, in the destination's
// channel, and replaces the thread: every later notice updates the new one rather than
// being dead-lettered.
func (e *sinkExporter) rootUpdateSending(o sending, st *incident.Store, project, id string, sink mirror.Sink,
	thread incident.ChatThread, sum incident.Summary) sending {
	m := slackapp.Root(thread.Channel, thread.TS, sum)
	var (
		got      slackapp.Answer
		reposted bool
	)
	o.Body = m.JSON()
	o.Exchange = e.rootUpdateExchange(sink, m, &got, &reposted)
	o.done = func(ctx context.Context) error {
		if !reposted {
			return nil
		}
		return e.replaceThread(ctx, st, project, id, sink.ID, thread, got)
	}
	return o
}

// rootUpdateExchange updates the root m names, and posts it again when Slack no longer
// has it (reposted is then set, and got is the new root's answer).
func (e *sinkExporter) rootUpdateExchange(sink mirror.Sink, m slackapp.Message, got *slackapp.Answer, reposted *bool) delivery.Exchange {
	update := e.slackExchange(sink.BotToken, m, got)
	again := m
	again.Channel, again.TS = sink.Channel, ""
	post := e.slackExchange(sink.BotToken, again, got)
	return func(ctx context.Context, c *http.Client) delivery.ExchangeResult {
		if *reposted {
			return post(ctx, c) // a retry of the new root
		}
		r := update(ctx, c)
		if got.Error != "message_not_found" {
			return r
		}
		*reposted = true
		return post(ctx, c)
	}
}

// replaceThread records the root posted again (a) in place of the deleted one (old).
func (e *sinkExporter) replaceThread(ctx context.Context, st *incident.Store, project, id, sinkID string, old incident.ChatThread, a slackapp.Answer) error {
	t := incident.ChatThread{Channel: a.Channel, TS: a.TS, PostedAt: time.Now().UTC()}
	if err := withTries(ctx, func() error { return st.ReplaceChatThread(ctx, project, id, sinkID, old, t) }); err != nil && !errors.Is(err, incident.ErrNotFound) {
		return fmt.Errorf("its new Slack root (the old one was deleted) was not recorded: %w", err)
	}
	return nil
}

// slackIncidentResult posts a result of an incident's call in the incident's thread,
// then shows it as the root's last result and in the incident's timeline. An incident
// without a root in this destination gets it first (see slackNotice for why none came).
func (e *sinkExporter) slackIncidentResult(ctx context.Context, proj mirror.Project, sink mirror.Sink, it pipelinedata.Item, id string,
	inc incidentRef, o sending) (sending, error) {
	text, err := slackText("", sink.TextTemplate, it.Body, "View this delivery in the dashboard", e.engine.DeliveryLink(proj.ID, id))
	if err != nil {
		return o, err
	}
	thread, has := inc.inc.Chat[sink.ID]
	if !has {
		var posted bool
		if thread, posted, err = e.postRoot(ctx, proj.ID, sink, inc.id, it.RequestID); err != nil {
			return o, err
		}
		if !posted {
			// The incident is gone (expired): the result goes to the channel, titled with it.
			if text, err = slackText(inc.title, sink.TextTemplate, it.Body, "View this delivery in the dashboard", e.engine.DeliveryLink(proj.ID, id)); err != nil {
				return o, err
			}
			return e.slackSending(o, sink, slackapp.Message{Channel: sink.Channel, Text: text}, nil), nil
		}
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

// postRoot posts the root of incident id, as it is now, to sink's channel and records it,
// returning the thread to reply in; posted is false when the incident is gone. A root
// Slack does not take fails the result with Slack's reason (dead-lettered, replayed once
// the destination is fixed); an interrupted one hands the result back.
func (e *sinkExporter) postRoot(ctx context.Context, project string, sink mirror.Sink, id, requestID string) (incident.ChatThread, bool, error) {
	st, err := e.incidentStore(ctx)
	if err != nil {
		return incident.ChatThread{}, false, &errLater{"the incidents cannot be read (" + err.Error() + ")"}
	}
	cur, err := st.Get(ctx, project, id)
	switch {
	case errors.Is(err, incident.ErrNotFound):
		return incident.ChatThread{}, false, nil
	case err != nil:
		return incident.ChatThread{}, false, &errLater{"the incident cannot be read (" + err.Error() + ")"}
	}
	if t, ok := cur.Chat[sink.ID]; ok {
		return t, true, nil // posted meanwhile
	}
	m := slackapp.Root(sink.Channel, "", cur.Summary())
	var got slackapp.Answer
	res := e.engine.Deliver(ctx, delivery.Request{Who: kindSlackApp, URLField: "slack_api_url", Project: project,
		Target: e.cfg.SlackAPIURL, RequestID: requestID, Body: m.JSON(), Exchange: e.slackExchange(sink.BotToken, m, &got)})
	switch {
	case res.Aborted:
		return incident.ChatThread{}, false, &errLater{"interrupted while posting the incident's Slack root message"}
	case !res.Delivered:
		return incident.ChatThread{}, false, fmt.Errorf("the incident's Slack root message was not posted: %s", res.Reason)
	}
	t, err := e.recordThread(ctx, st, project, id, sink, got)
	if err != nil {
		// Replied in the root posted all the same: handing the result back would post
		// another root.
		e.logger.Warn("the incident's Slack root message was posted but not recorded; a later notice may post another",
			zap.String("project", project), zap.String("incident", id), zap.String("sink", sink.ID), zap.Error(err))
	}
	return t, true, nil
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
	e.updateRoot(ctx, st, project, id, sink, thread, sum, it.RequestID)
}

// updateRoot shows sum in the root of thread, outside any result's delivery (which is
// done whatever this does): a failure is logged, and the next notice updates the root.
func (e *sinkExporter) updateRoot(ctx context.Context, st *incident.Store, project, id string, sink mirror.Sink,
	thread incident.ChatThread, sum incident.Summary, requestID string) {
	m := slackapp.Root(thread.Channel, thread.TS, sum)
	uctx, cancel := context.WithTimeout(ctx, rootUpdateTimeout)
	defer cancel()
	var (
		got      slackapp.Answer
		reposted bool
	)
	res := e.engine.Deliver(uctx, delivery.Request{Who: kindSlackApp, URLField: "slack_api_url", Project: project,
		Target: e.cfg.SlackAPIURL, RequestID: requestID, Body: m.JSON(), Exchange: e.rootUpdateExchange(sink, m, &got, &reposted)})
	if res.Delivered && reposted {
		if err := e.replaceThread(uctx, st, project, id, sink.ID, thread, got); err != nil {
			res.Delivered, res.Reason = false, err.Error()
		}
	}
	if !res.Delivered {
		reason := res.Reason
		if res.Aborted {
			reason = "not answered in time"
		}
		e.logger.Warn("the incident's Slack root message was not updated; the next notice updates it",
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
