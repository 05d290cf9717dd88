package sinkexporter

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelinedata"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/principal"
	"github.com/otelcol-svc/otelcol-svc/internal/deliverylog"
	"github.com/otelcol-svc/otelcol-svc/internal/incident"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/slackapp"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
	"github.com/otelcol-svc/otelcol-svc/internal/webhooksig"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// incidentProject is a project in incident mode with the given destinations.
func incidentProject(id string, sinks ...mirror.Sink) mirror.Project {
	p := sinkProject(id, sinks...)
	p.Pipeline.Mode = mirror.ModeIncident
	return p
}

func slackSink(id string, s *testenv.Slack) mirror.Sink {
	return mirror.Sink{ID: id, Kind: kindSlackApp, BotToken: s.Token, SigningSecret: "shh", Channel: "C_INC"}
}

// opened is an incident of project just opened, with its incident.opened notice and a
// call claimed under request id reqID (as the incident processor does before calling).
type opened struct {
	st     *incident.Store
	inc    incident.Incident
	notice incident.Notice
	set    incident.Settings
	fph    string
}

func (e *env) openIncident(t *testing.T, project, fingerprint, title, reqID string) opened {
	t.Helper()
	ctx := context.Background()
	st, err := incident.Open(ctx, e.js, 1)
	require.NoError(t, err)
	set := incident.Settings{GroupInterval: time.Second, ResolveAfter: time.Hour}
	now := time.Now()
	res, err := st.Apply(ctx, project, set, incident.Join{Fingerprint: fingerprint, BatchKey: "b1", Events: 3, Title: title, At: now})
	require.NoError(t, err)
	require.True(t, res.Opened)
	require.Len(t, res.Notices, 1)
	require.Equal(t, incident.NoticeOpened, res.Notices[0].Type)
	fph := incident.FingerprintHash(fingerprint)
	_, ok, err := st.Claim(ctx, project, fph, incident.ReasonOpened, reqID, "test", now, set, time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	return opened{st: st, inc: res.Incident, notice: res.Notices[0], set: set, fph: fph}
}

func noticeItem(project, sinkID string, n incident.Notice, seq uint64) pipelinedata.Item {
	return pipelinedata.Item{Body: n.Body(project), Signal: streams.SignalNotice, Kind: pipelinedata.KindResult, Seq: seq,
		SinkID: sinkID, RequestID: n.MsgID(), MsgID: n.MsgID()}
}

func resultItem(sinkID, reqID, body string, seq uint64) pipelinedata.Item {
	return pipelinedata.Item{Body: []byte(body), Signal: "agent_output", Kind: pipelinedata.KindResult, Seq: seq,
		SinkID: sinkID, RequestID: reqID, MsgID: "out:" + reqID}
}

func consume(r *running, project string, items ...pipelinedata.Item) error {
	ld, lrs := pipelinedata.New()
	for _, it := range items {
		pipelinedata.Append(lrs, it)
	}
	return r.exp.ConsumeLogs(principal.NewContext(context.Background(), principal.Principal{ProjectID: project}), ld)
}

func blocksText(m testenv.SlackMessage) string { return string(m.Blocks) }

// The sink role as shipped: the incident.opened notice posts one root to the channel,
// later notices update it in place, and the result of the incident's call goes into its
// thread and shows as the root's last result, once, however often it is delivered.
func TestSlackAppIncidentThread(t *testing.T) {
	e := newEnv(t)
	slack := testenv.NewSlack(t)
	e.slackAPIURL = slack.URL()
	e.putProject(t, incidentProject("inc1", slackSink("s_app", slack)))
	r := e.startSinkRole(t, "inc1", "s_app")
	nc, js := testenv.Connect(t, e.nats.URL())
	ctx := context.Background()
	o := e.openIncident(t, "inc1", "checkout/db", "DB connections exhausted", "req_inc")

	require.NoError(t, incident.Publish(ctx, js, nc, "inc1", o.notice))
	require.Eventually(t, func() bool { return len(slack.Roots()) == 1 }, 10*time.Second, 10*time.Millisecond)
	root := slack.Roots()[0]
	assert.Equal(t, "C_INC", root.Channel)
	assert.Contains(t, blocksText(root), `"action_id":"incident_acknowledge"`)
	assert.Contains(t, blocksText(root), `"value":"`+o.inc.ID+`"`)
	require.Eventually(t, func() bool {
		cur, err := o.st.Get(ctx, "inc1", o.inc.ID)
		return err == nil && cur.Chat["s_app"].TS == root.TS
	}, 10*time.Second, 10*time.Millisecond, "the root's ts is the incident's thread for this destination")

	_, notices, err := o.st.Act(ctx, "inc1", o.inc.ID, incident.ActionAcknowledge, "slack:alice", time.Now())
	require.NoError(t, err)
	require.NotEmpty(t, notices)
	for _, n := range notices {
		require.NoError(t, incident.Publish(ctx, js, nc, "inc1", n))
	}
	require.Eventually(t, func() bool { return len(slack.Updates()) == 1 }, 10*time.Second, 10*time.Millisecond)
	cur, _ := slack.Current(root.TS)
	assert.Contains(t, blocksText(cur), `Acknowledged by*\nslack:alice`)
	assert.Len(t, slack.Roots(), 1, "updated in place, never a second root")

	e.publishResult(t, nc, "inc1", "req_inc", `{"text":"pgbouncer pool is full; <!channel> raise max_client_conn"}`)
	require.Eventually(t, func() bool { return len(slack.Replies(root.TS)) == 1 && len(slack.Updates()) == 2 }, 10*time.Second, 10*time.Millisecond)
	reply := slack.Replies(root.TS)[0]
	assert.True(t, strings.HasPrefix(reply.Text, "pgbouncer pool is full; &lt;!channel&gt; raise max_client_conn"), reply.Text)
	assert.Equal(t, "C_INC", reply.Channel)
	cur, _ = slack.Current(root.TS)
	assert.Contains(t, blocksText(cur), `Last result*\npgbouncer pool is full`)
	require.Eventually(t, func() bool {
		inc, err := o.st.Get(ctx, "inc1", o.inc.ID)
		if err != nil {
			return false
		}
		for _, en := range inc.Timeline {
			if en.Type == "chat" && en.SinkID == "s_app" && en.RequestID == "req_inc" {
				return true
			}
		}
		return false
	}, 10*time.Second, 10*time.Millisecond, "the reply is in the incident's timeline")

	// Delivered again (a redelivery after a crash): not posted twice.
	require.NoError(t, consume(r, "inc1", resultItem("s_app", "req_inc", `{"text":"pgbouncer pool is full"}`, 99)))
	assert.Len(t, slack.Replies(root.TS), 1)
	assert.Len(t, slack.Roots(), 1)
}

// The incident.opened notice dead-lettered (the app not in the channel while its user
// sets things up): the incident's next notice posts the root at once, showing the
// incident as it is now, and records it; the opened notice delivered again (a replay,
// or late) then updates that root rather than posting a second one.
func TestSlackAppNoticePostsAMissingRoot(t *testing.T) {
	e := newEnv(t)
	slack := testenv.NewSlack(t)
	e.putProject(t, incidentProject("inc2", slackSink("s_app", slack)))
	r := e.start(t, func(c *Config) { c.SlackAPIURL = slack.URL() })
	ctx := context.Background()
	o := e.openIncident(t, "inc2", "fp", "Checkout 5xx", "req_2")

	slack.Refuse("not_in_channel")
	require.NoError(t, consume(r, "inc2", noticeItem("inc2", "s_app", o.notice, 1)))
	require.Len(t, e.deadLetters(t, "inc2"), 1, "the opened notice was dead-lettered")
	assert.Empty(t, slack.Roots())

	_, acked, err := o.st.Act(ctx, "inc2", o.inc.ID, incident.ActionAcknowledge, "user:bob@example.com", time.Now())
	require.NoError(t, err)
	require.Len(t, acked, 1)
	require.NoError(t, consume(r, "inc2", noticeItem("inc2", "s_app", acked[0], 2)), "posted now, not handed back to wait")
	roots := slack.Roots()
	require.Len(t, roots, 1)
	assert.Equal(t, "C_INC", roots[0].Channel)
	assert.Contains(t, blocksText(roots[0]), "user:bob@example.com")
	cur, err := o.st.Get(ctx, "inc2", o.inc.ID)
	require.NoError(t, err)
	assert.Equal(t, roots[0].TS, cur.Chat["s_app"].TS, "recorded as the incident's thread")

	require.NoError(t, consume(r, "inc2", noticeItem("inc2", "s_app", o.notice, 1)))
	assert.Len(t, slack.Roots(), 1)
	require.Len(t, slack.Updates(), 1)
	assert.Equal(t, roots[0].TS, slack.Updates()[0].TS)
	assertNoToken(t, r, slack)
}

// The result of an incident's call whose root was never posted posts the root first,
// then goes into its thread and shows as its last result.
func TestSlackAppResultPostsAMissingRoot(t *testing.T) {
	e := newEnv(t)
	slack := testenv.NewSlack(t)
	e.putProject(t, incidentProject("inc3", slackSink("s_app", slack)))
	r := e.start(t, func(c *Config) { c.SlackAPIURL = slack.URL() })
	ctx := context.Background()
	o := e.openIncident(t, "inc3", "fp", "Disk full", "req_3")
	slack.Refuse("not_in_channel")
	require.NoError(t, consume(r, "inc3", noticeItem("inc3", "s_app", o.notice, 1)))
	require.Len(t, e.deadLetters(t, "inc3"), 1)

	require.NoError(t, consume(r, "inc3", resultItem("s_app", "req_3", `{"text":"cleaned /var/log"}`, 5)))
	roots := slack.Roots()
	require.Len(t, roots, 1)
	assert.Contains(t, blocksText(roots[0]), "Disk full")
	replies := slack.Replies(roots[0].TS)
	require.Len(t, replies, 1)
	assert.True(t, strings.HasPrefix(replies[0].Text, "cleaned /var/log"), replies[0].Text)
	require.Len(t, slack.Updates(), 1)
	assert.Contains(t, blocksText(slack.Updates()[0]), `Last result*\ncleaned /var/log`)
	cur, err := o.st.Get(ctx, "inc3", o.inc.ID)
	require.NoError(t, err)
	assert.Equal(t, roots[0].TS, cur.Chat["s_app"].TS)
	assert.Len(t, e.deadLetters(t, "inc3"), 1, "nothing more dead-lettered")
	assertNoToken(t, r, slack)
}

// A result whose root Slack refuses too is dead-lettered saying why (replayed once the
// app is in the channel), rather than handed back again and again.
func TestSlackAppResultRootRefused(t *testing.T) {
	e := newEnv(t)
	slack := testenv.NewSlack(t)
	e.putProject(t, incidentProject("inc6", slackSink("s_app", slack)))
	r := e.start(t, func(c *Config) { c.SlackAPIURL = slack.URL() })
	e.openIncident(t, "inc6", "fp", "Disk full", "req_6")

	slack.Refuse("not_in_channel")
	require.NoError(t, consume(r, "inc6", resultItem("s_app", "req_6", `{"text":"cleaned /var/log"}`, 5)))
	dls := e.deadLetters(t, "inc6")
	require.Len(t, dls, 1)
	assert.Contains(t, dls[0].Header.Get(streams.HeaderDLQReason), "root message was not posted: slack_app refused the request: not_in_channel")
	assert.Equal(t, `{"text":"cleaned /var/log"}`, string(dls[0].Data))
	assert.Empty(t, slack.Messages())
	for k, v := range dls[0].Header {
		assert.NotContains(t, strings.Join(v, " "), slack.Token, k)
	}
	assertNoToken(t, r, slack)
}

// Two deliveries post a root for the same incident at once (two sink processes, or a
// replay beside the stream): the root recorded first stays the thread, and the other
// delivery updates it to the incident's state and replies in it.
func TestSlackAppRootRecordedElsewhere(t *testing.T) {
	e := newEnv(t)
	slack := testenv.NewSlack(t)
	ctx := context.Background()
	e.putProject(t, incidentProject("inc7", slackSink("s_app", slack)))
	o := e.openIncident(t, "inc7", "fp", "Queue backlog", "req_7")
	_, acked, err := o.st.Act(ctx, "inc7", o.inc.ID, incident.ActionAcknowledge, "slack:carol", time.Now())
	require.NoError(t, err)
	require.Len(t, acked, 1)

	// The other writer's root, posted and recorded while this one's is on its way.
	other := slackapp.Send(ctx, http.DefaultClient, slack.URL(), slack.Token, "test", slackapp.Root("C_INC", "", o.inc.Summary()))
	require.True(t, other.OK())
	var (
		raced  atomic.Bool
		racing atomic.Value // the incident whose root the other writer records
	)
	racing.Store(o.inc.ID)
	var racingThread atomic.Value
	racingThread.Store(incident.ChatThread{Channel: other.Channel, TS: other.TS})
	target, err := url.Parse(slack.URL())
	require.NoError(t, err)
	target.Path = "" // the request's own path is the API's
	fwd := httputil.NewSingleHostReverseProxy(target)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if strings.HasSuffix(req.URL.Path, "chat.postMessage") && raced.CompareAndSwap(false, true) {
			th := racingThread.Load().(incident.ChatThread)
			assert.NoError(t, o.st.SetChatThread(ctx, "inc7", racing.Load().(string), "s_app", th))
		}
		fwd.ServeHTTP(w, req)
	}))
	t.Cleanup(proxy.Close)
	r := e.start(t, func(c *Config) { c.SlackAPIURL = proxy.URL + "/api/" })

	require.NoError(t, consume(r, "inc7", noticeItem("inc7", "s_app", acked[0], 2)))
	require.True(t, raced.Load())
	require.Empty(t, e.deadLetters(t, "inc7"))
	cur, err := o.st.Get(ctx, "inc7", o.inc.ID)
	require.NoError(t, err)
	assert.Equal(t, other.TS, cur.Chat["s_app"].TS, "the first root recorded stays")
	require.Len(t, slack.Updates(), 2, "the thread's root shows the incident as it is, the copy says it is one")
	assert.Equal(t, other.TS, slack.Updates()[0].TS)
	assert.Contains(t, blocksText(slack.Updates()[0]), "slack:carol")
	var mine string
	for _, m := range slack.Roots() {
		if m.TS != other.TS {
			mine = m.TS
		}
	}
	copyNow, ok := slack.Current(mine)
	require.True(t, ok, "this delivery's own root was posted")
	assert.NotContains(t, blocksText(copyNow), "action_id", "the copy no later notice updates has no buttons")
	assert.Contains(t, copyNow.Text, "_Queue backlog_ is followed in another message")

	// A result in the same race replies in the recorded thread.
	o2 := e.openIncident(t, "inc7", "fp2", "Disk full", "req_8")
	other2 := slackapp.Send(ctx, http.DefaultClient, slack.URL(), slack.Token, "test", slackapp.Root("C_INC", "", o2.inc.Summary()))
	require.True(t, other2.OK())
	racing.Store(o2.inc.ID)
	racingThread.Store(incident.ChatThread{Channel: other2.Channel, TS: other2.TS})
	raced.Store(false)
	require.NoError(t, consume(r, "inc7", resultItem("s_app", "req_8", `{"text":"cleaned /var/log"}`, 9)))
	require.True(t, raced.Load())
	require.Len(t, slack.Replies(other2.TS), 1)
	cur, err = o.st.Get(ctx, "inc7", o2.inc.ID)
	require.NoError(t, err)
	assert.Equal(t, other2.TS, cur.Chat["s_app"].TS)
	assertNoToken(t, r, slack)
}

// A root deleted in Slack: the next notice's chat.update finds no message, so the root
// is posted again and becomes the thread, and later notices update the new one rather
// than being dead-lettered.
func TestSlackAppDeletedRootIsPostedAgain(t *testing.T) {
	e := newEnv(t)
	slack := testenv.NewSlack(t)
	e.putProject(t, incidentProject("inc8", slackSink("s_app", slack)))
	r := e.start(t, func(c *Config) { c.SlackAPIURL = slack.URL() })
	ctx := context.Background()
	o := e.openIncident(t, "inc8", "fp", "Checkout 5xx", "req_9")
	require.NoError(t, consume(r, "inc8", noticeItem("inc8", "s_app", o.notice, 1)))
	require.Len(t, slack.Roots(), 1)
	first := slack.Roots()[0]

	slack.Refuse("message_not_found")
	_, acked, err := o.st.Act(ctx, "inc8", o.inc.ID, incident.ActionAcknowledge, "slack:dan", time.Now())
	require.NoError(t, err)
	require.NoError(t, consume(r, "inc8", noticeItem("inc8", "s_app", acked[0], 2)))
	assert.Empty(t, e.deadLetters(t, "inc8"))
	roots := slack.Roots()
	require.Len(t, roots, 2)
	again := roots[1]
	assert.NotEqual(t, first.TS, again.TS)
	assert.Contains(t, blocksText(again), "slack:dan")
	cur, err := o.st.Get(ctx, "inc8", o.inc.ID)
	require.NoError(t, err)
	assert.Equal(t, again.TS, cur.Chat["s_app"].TS, "the new root is the thread")

	_, muted, err := o.st.Act(ctx, "inc8", o.inc.ID, incident.ActionMute, "slack:dan", time.Now())
	require.NoError(t, err)
	require.NoError(t, consume(r, "inc8", noticeItem("inc8", "s_app", muted[0], 3)))
	require.Len(t, slack.Updates(), 1)
	assert.Equal(t, again.TS, slack.Updates()[0].TS)
	assert.Len(t, slack.Roots(), 2)
	assertNoToken(t, r, slack)
}

// assertNoToken: the bot token is in none of the collector's log entries.
func assertNoToken(t *testing.T, r *running, slack *testenv.Slack) {
	t.Helper()
	for _, entry := range r.logs.All() {
		assert.NotContains(t, entry.Message, slack.Token)
		for k, v := range entry.ContextMap() {
			assert.NotContains(t, toString(v), slack.Token, k)
		}
	}
}

// A result of a call that is no incident's goes to the channel, rendered as a chat
// message, and pings nobody.
func TestSlackAppPlainResult(t *testing.T) {
	e := newEnv(t)
	slack := testenv.NewSlack(t)
	e.putProject(t, sinkProject("plain", slackSink("s_app", slack)))
	r := e.start(t, func(c *Config) { c.SlackAPIURL = slack.URL(); c.DashboardURL = dashboard })
	require.NoError(t, consumeResult(r, "plain", "s_app", `{"text":"<!here> checkout is failing"}`))
	msgs := slack.Messages()
	require.Len(t, msgs, 1)
	assert.Empty(t, msgs[0].ThreadTS)
	assert.Equal(t, "C_INC", msgs[0].Channel)
	id := sinkDeliveryID(pipelinedata.Item{MsgID: "out:req_1:abc"}, "s_app")
	assert.Equal(t, "&lt;!here&gt; checkout is failing\n<"+dashboard+"/projects/plain/deliveries?delivery="+id+"|View this delivery in the dashboard>", msgs[0].Text)
	assert.Nil(t, msgs[0].Blocks)
}

// The bot token is sent to Slack only, as a bearer token: the delivery log shows the
// message as JSON and the header redacted, the dead letter and the collector's log
// never hold it.
func TestSlackAppTokenNeverLogged(t *testing.T) {
	e := newEnv(t)
	slack := testenv.NewSlack(t)
	e.putProject(t, sinkProject("tok", slackSink("s_app", slack)))
	r := e.start(t, func(c *Config) { c.SlackAPIURL = slack.URL() })

	require.NoError(t, consumeResult(r, "tok", "s_app", `{"text":"hello"}`))
	calls := slack.Calls()
	require.Len(t, calls, 1)
	assert.Equal(t, "Bearer "+slack.Token, calls[0].Header.Get("Authorization"))
	assert.Empty(t, calls[0].Form.Get("token"))

	id := sinkDeliveryID(pipelinedata.Item{MsgID: "out:req_1:abc"}, "s_app")
	d := e.delivery(t, "tok", id, inState(deliverylog.StateDelivered))
	assert.Equal(t, kindSlackApp, d.SinkKind)
	var body map[string]any
	require.NoError(t, json.Unmarshal(d.RequestBody, &body))
	assert.Equal(t, "chat.postMessage", body["method"])
	assert.Equal(t, "C_INC", body["channel"])
	require.Len(t, d.AttemptLog, 1)
	assert.Equal(t, deliverylog.Redacted, d.AttemptLog[0].RequestHeaders["Authorization"])
	assert.Contains(t, string(d.Answer), `"ok":true`)

	// Refused for good: dead-lettered, saying why, still without the token anywhere.
	slack.Refuse("not_in_channel")
	ld, lrs := pipelinedata.New()
	pipelinedata.Append(lrs, resultItem("s_app", "req_2", `{"text":"again"}`, 8))
	require.NoError(t, r.exp.ConsumeLogs(principal.NewContext(context.Background(), principal.Principal{ProjectID: "tok"}), ld))
	dls := e.deadLetters(t, "tok")
	require.Len(t, dls, 1)
	assert.Contains(t, dls[0].Header.Get(streams.HeaderDLQReason), "not_in_channel (the app is not in the channel: invite it there)")
	id2 := sinkDeliveryID(resultItem("", "req_2", "", 8), "s_app")
	d2 := e.delivery(t, "tok", id2, inState(deliverylog.StateDeadLettered))

	for _, s := range []string{string(d.RequestBody), string(d2.RequestBody), string(d2.Answer), d2.Error} {
		assert.NotContains(t, s, slack.Token)
	}
	for k, v := range dls[0].Header {
		assert.NotContains(t, strings.Join(v, " "), slack.Token, k)
	}
	for _, entry := range r.logs.All() {
		assert.NotContains(t, entry.Message, slack.Token)
		for k, v := range entry.ContextMap() {
			assert.NotContains(t, toString(v), slack.Token, k)
		}
	}
}

func toString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// Slack's rate limit is honoured: a Retry-After within the budget is waited out, and one
// beyond it ends the delivery at once rather than retrying early.
func TestSlackAppRateLimited(t *testing.T) {
	e := newEnv(t)
	slack := testenv.NewSlack(t)
	e.putProject(t, sinkProject("rl", slackSink("s_app", slack)))
	r := e.start(t, func(c *Config) { c.SlackAPIURL = slack.URL() })

	slack.RateLimit(1, 1)
	require.NoError(t, consumeResult(r, "rl", "s_app", `{"text":"hello"}`))
	calls := slack.Calls()
	require.Len(t, calls, 2)
	assert.Equal(t, "ratelimited", calls[0].Answer)
	assert.GreaterOrEqual(t, calls[1].At.Sub(calls[0].At), time.Second, "not before Slack's Retry-After")
	assert.Len(t, slack.Messages(), 1)

	slack.RateLimit(1, 3600)
	require.NoError(t, consume(r, "rl", resultItem("s_app", "req_rl", `{"text":"later"}`, 9)))
	assert.Len(t, slack.Calls(), 3, "no attempt before the hour Slack asked for")
	dls := e.deadLetters(t, "rl")
	require.Len(t, dls, 1)
	assert.Contains(t, dls[0].Header.Get(streams.HeaderDLQReason), "retry after 1h0m0s")
}

// Webhooks get an incident notice as its JSON, signed as any result; the result of an
// incident's call as the agent sent it; both with the incident's id in X-Incident-Id. Chat
// destinations get one line per notice and the result titled with the incident.
func TestIncidentsToWebhookAndChat(t *testing.T) {
	e := newEnv(t)
	hook := newAgent(t, nil)
	chat := newAgent(t, nil)
	p := e.putProject(t, incidentProject("inc4",
		mirror.Sink{ID: "s_hook", Kind: kindWebhook, URL: hook.srv.URL, Headers: map[string]string{"X-Incident-Id": "forged"}},
		mirror.Sink{ID: "s_chat", Kind: kindChat, Format: "slack", URL: chat.srv.URL, TextTemplate: "never {text}"}))
	r := e.start(t, func(c *Config) { c.DashboardURL = dashboard })
	o := e.openIncident(t, "inc4", "fp", "<!channel> Checkout 5xx", "req_4")

	require.NoError(t, consume(r, "inc4",
		noticeItem("inc4", "s_hook", o.notice, 1), noticeItem("inc4", "s_chat", o.notice, 1),
		resultItem("s_hook", "req_4", `{"text":"rolled back v42"}`, 2), resultItem("s_chat", "req_4", `{"text":"rolled back v42"}`, 2)))

	got := hook.requests()
	require.Len(t, got, 2)
	assert.JSONEq(t, string(o.notice.Body("inc4")), string(got[0].body), "the notice's JSON as is")
	require.NoError(t, webhooksig.Verify(p.SigningSecret, got[0].header, got[0].body, time.Now(), time.Minute))
	assert.Equal(t, o.inc.ID, got[0].header.Get("X-Incident-Id"), "the service's header, not the destination's")
	assert.Equal(t, `{"text":"rolled back v42"}`, string(got[1].body))
	assert.Equal(t, o.inc.ID, got[1].header.Get("X-Incident-Id"))
	require.NoError(t, webhooksig.Verify(p.SigningSecret, got[1].header, got[1].body, time.Now(), time.Minute))

	msgs := chat.requests()
	require.Len(t, msgs, 2)
	var m struct{ Text string }
	require.NoError(t, json.Unmarshal(msgs[0].body, &m))
	assert.Equal(t, "[Incident] &lt;!channel&gt; Checkout 5xx: opened (3 events)\n<"+dashboard+"/projects/inc4/incidents/"+o.inc.ID+"|View the incident in the dashboard>", m.Text)
	require.NoError(t, json.Unmarshal(msgs[1].body, &m))
	assert.True(t, strings.HasPrefix(m.Text, "[&lt;!channel&gt; Checkout 5xx] never rolled back v42\n"), m.Text)
}

// An incoming chat webhook gets one message per transition people act on and one per
// result: not the "agent was called" notice, whose result follows as its own message.
// A webhook still gets every notice.
func TestChatSkipsTheCallNotice(t *testing.T) {
	e := newEnv(t)
	hook := newAgent(t, nil)
	chat := newAgent(t, nil)
	e.putProject(t, incidentProject("inc9",
		mirror.Sink{ID: "s_hook", Kind: kindWebhook, URL: hook.srv.URL},
		mirror.Sink{ID: "s_chat", Kind: kindChat, Format: "slack", URL: chat.srv.URL}))
	r := e.start(t, nil)
	ctx := context.Background()
	o := e.openIncident(t, "inc9", "fp", "Checkout 5xx", "req_9")
	_, called, err := o.st.Complete(ctx, "inc9", o.fph, "req_9", incident.OutcomeDelivered, time.Now())
	require.NoError(t, err)
	require.Len(t, called, 1)
	require.Equal(t, "call", called[0].Transition)
	_, acked, err := o.st.Act(ctx, "inc9", o.inc.ID, incident.ActionAcknowledge, "user:carol@example.com", time.Now())
	require.NoError(t, err)
	require.Len(t, acked, 1)
	_, resolved, err := o.st.Act(ctx, "inc9", o.inc.ID, incident.ActionResolve, "user:carol@example.com", time.Now())
	require.NoError(t, err)
	require.Len(t, resolved, 1)

	var items []pipelinedata.Item
	seq := uint64(0)
	add := func(it func(sink string, seq uint64) pipelinedata.Item) {
		seq++
		items = append(items, it("s_hook", seq))
		seq++
		items = append(items, it("s_chat", seq))
	}
	notice := func(n incident.Notice) func(string, uint64) pipelinedata.Item {
		return func(sink string, seq uint64) pipelinedata.Item { return noticeItem("inc9", sink, n, seq) }
	}
	add(notice(o.notice))
	add(notice(called[0]))
	add(func(sink string, seq uint64) pipelinedata.Item {
		return resultItem(sink, "req_9", `{"text":"rolled back v42"}`, seq)
	})
	add(notice(acked[0]))
	add(notice(resolved[0]))
	require.NoError(t, consume(r, "inc9", items...))

	assert.Len(t, hook.requests(), 5, "a webhook gets every notice and the result")
	var texts []string
	for _, m := range chat.requests() {
		var b struct{ Text string }
		require.NoError(t, json.Unmarshal(m.body, &b))
		texts = append(texts, strings.SplitN(b.Text, "\n", 2)[0])
	}
	assert.Equal(t, []string{
		"[Incident] Checkout 5xx: opened (3 events)",
		"[Checkout 5xx] rolled back v42",
		"[Incident] Checkout 5xx: acknowledged by user:carol@example.com",
		"[Incident] Checkout 5xx: resolved by user:carol@example.com",
	}, texts)
}

// A legacy project's results cost no incident lookup and carry no incident header.
func TestNoIncidentOutsideIncidentMode(t *testing.T) {
	e := newEnv(t)
	hook := newAgent(t, nil)
	e.putProject(t, sinkProject("leg", mirror.Sink{ID: "s_hook", Kind: kindWebhook, URL: hook.srv.URL}))
	r := e.start(t, nil)
	e.openIncident(t, "leg", "fp", "x", "req_1")
	require.NoError(t, consumeResult(r, "leg", "s_hook", `{"text":"x"}`))
	require.Len(t, hook.requests(), 1)
	assert.Empty(t, hook.requests()[0].header.Get("X-Incident-Id"))
}

// A slack_app delivery Slack refused is replayed from its dead letter once the app is in
// the channel: the same message, posted.
func TestSlackAppReplay(t *testing.T) {
	e := newEnv(t)
	slack := testenv.NewSlack(t)
	e.putProject(t, sinkProject("srp", slackSink("s_app", slack)))
	r := e.start(t, func(c *Config) { c.SlackAPIURL = slack.URL() })

	slack.Refuse("not_in_channel")
	require.NoError(t, consumeResult(r, "srp", "s_app", `{"text":"hello"}`))
	oldID := sinkDeliveryID(pipelinedata.Item{MsgID: "out:req_1:abc"}, "s_app")
	e.delivery(t, "srp", oldID, inState(deliverylog.StateDeadLettered))
	assert.Empty(t, slack.Messages())

	require.NoError(t, deliverylog.Enqueue(context.Background(), e.js, []deliverylog.Job{
		{Project: "srp", DeliveryID: oldID, ReplayID: "rp1", RequestedAt: time.Now()}}))
	require.Eventually(t, func() bool { return len(slack.Messages()) == 1 }, 10*time.Second, 10*time.Millisecond)
	assert.True(t, strings.HasPrefix(slack.Messages()[0].Text, "hello"))
	assert.Equal(t, "C_INC", slack.Messages()[0].Channel)
}

// Slack's API address is an outbound destination like any other: a loopback one is
// refused unless allow_cidrs allows it, and nothing reaches it.
func TestSlackAppOutboundRules(t *testing.T) {
	e := newEnv(t)
	slack := testenv.NewSlack(t)
	e.putProject(t, sinkProject("ssrf", slackSink("s_app", slack)))
	r := e.start(t, func(c *Config) { c.SlackAPIURL = slack.URL(); c.AllowCIDRs = "" })
	require.NoError(t, consumeResult(r, "ssrf", "s_app", `{"text":"hello"}`))
	dls := e.deadLetters(t, "ssrf")
	require.Len(t, dls, 1)
	assert.Contains(t, dls[0].Header.Get(streams.HeaderDLQReason), "is a loopback address")
	assert.Equal(t, slack.URL(), dls[0].Header.Get(streams.HeaderDLQTarget))
	assert.Empty(t, slack.Calls())
}

// A destination created after an incident opened never gets its incident.opened
// notice: the incident's next notice posts the root at once, without waiting.
func TestSlackAppNewDestinationPostsTheRoot(t *testing.T) {
	e := newEnv(t)
	slack := testenv.NewSlack(t)
	ctx := context.Background()
	o := e.openIncident(t, "inc5", "fp", "Queue backlog", "req_5")
	s := slackSink("s_new", slack)
	s.Since = time.Now()
	e.putProject(t, incidentProject("inc5", s))
	r := e.start(t, func(c *Config) { c.SlackAPIURL = slack.URL() })

	_, acked, err := o.st.Act(ctx, "inc5", o.inc.ID, incident.ActionAcknowledge, "slack:carol", time.Now())
	require.NoError(t, err)
	require.NoError(t, consume(r, "inc5", noticeItem("inc5", "s_new", acked[0], 3)))
	roots := slack.Roots()
	require.Len(t, roots, 1)
	assert.Contains(t, blocksText(roots[0]), "slack:carol")
	cur, err := o.st.Get(ctx, "inc5", o.inc.ID)
	require.NoError(t, err)
	assert.Equal(t, roots[0].TS, cur.Chat["s_new"].TS)
}

// The root deleted in Slack while a result of the incident's call comes: the reply goes
// in the thread as before, and the root's update (message_not_found) posts the root
// again, which becomes the thread and shows the result.
func TestSlackAppResultAfterRootDeleted(t *testing.T) {
	e := newEnv(t)
	slack := testenv.NewSlack(t)
	e.putProject(t, incidentProject("inc9", slackSink("s_app", slack)))
	ctx := context.Background()
	o := e.openIncident(t, "inc9", "fp", "Disk full", "req_10")
	var deleted atomic.Value // the ts of the root deleted in Slack
	deleted.Store("")
	target, err := url.Parse(slack.URL())
	require.NoError(t, err)
	target.Path = ""
	fwd := httputil.NewSingleHostReverseProxy(target)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		req.Body = io.NopCloser(bytes.NewReader(body))
		form, _ := url.ParseQuery(string(body))
		if strings.HasSuffix(req.URL.Path, "chat.update") && form.Get("ts") == deleted.Load().(string) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"ok":false,"error":"message_not_found"}`)
			return
		}
		fwd.ServeHTTP(w, req)
	}))
	t.Cleanup(proxy.Close)
	r := e.start(t, func(c *Config) { c.SlackAPIURL = proxy.URL + "/api/" })
	require.NoError(t, consume(r, "inc9", noticeItem("inc9", "s_app", o.notice, 1)))
	require.Len(t, slack.Roots(), 1)
	first := slack.Roots()[0]
	deleted.Store(first.TS)

	require.NoError(t, consume(r, "inc9", resultItem("s_app", "req_10", `{"text":"cleaned /var/log"}`, 5)))
	require.Len(t, slack.Replies(first.TS), 1)
	roots := slack.Roots()
	require.Len(t, roots, 2)
	cur, ok := slack.Current(roots[1].TS)
	require.True(t, ok)
	assert.Contains(t, blocksText(cur), `Last result*\ncleaned /var/log`)
	inc, err := o.st.Get(ctx, "inc9", o.inc.ID)
	require.NoError(t, err)
	assert.Equal(t, roots[1].TS, inc.Chat["s_app"].TS, "the new root is the thread")
	assertNoToken(t, r, slack)
}
