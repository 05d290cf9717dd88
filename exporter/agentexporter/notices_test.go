package agentexporter

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelinedata"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/principal"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
	"github.com/otelcol-svc/otelcol-svc/receiver/jetstreamreceiver"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

const dashboard = "https://dash.example.com"

// startSinkRole runs the sink role as configs/sink.yaml does: the JetStream receiver
// reading each enabled destination's cursor on the project's output stream, feeding an
// agent exporter that delivers to the destinations. It returns once the cursors of the
// given destinations exist, so that nothing published after it is missed.
func (e *env) startSinkRole(t *testing.T, projectID string, sinks ...string) *running {
	t.Helper()
	r := e.start(t, func(c *Config) {
		c.DashboardURL = dashboard
		c.Retry.MaxElapsedTime = 300 * time.Millisecond
	})
	f := jetstreamreceiver.NewFactory()
	cfg := f.CreateDefaultConfig().(*jetstreamreceiver.Config)
	cfg.NATS.URL = e.nats.URL()
	cfg.Consume = jetstreamreceiver.ConsumeOutput
	cfg.Durable = "svc-sink"
	cfg.BatchSize = 10
	cfg.AckWait = 5 * time.Second
	cfg.RetryDelay = 100 * time.Millisecond
	require.NoError(t, cfg.Validate())
	rcv, err := f.CreateLogs(context.Background(), receivertest.NewNopSettings(f.Type()), cfg, r.exp.(consumer.Logs))
	require.NoError(t, err)
	require.NoError(t, rcv.Start(context.Background(), e.host))
	t.Cleanup(func() { _ = rcv.Shutdown(context.Background()) })
	for _, s := range sinks {
		require.Eventually(t, func() bool {
			_, err := e.js.Consumer(context.Background(), streams.OutputStream(projectID), "svc-sink-"+s)
			return err == nil
		}, 10*time.Second, 10*time.Millisecond, "the cursor of destination %s", s)
	}
	return r
}

// publishResult stores an agent's result on the project's output stream, as the ingest
// receiver does, and wakes the sink role.
func (e *env) publishResult(t *testing.T, nc *nats.Conn, projectID, id, body string) {
	t.Helper()
	_, err := e.js.PublishMsg(context.Background(), &nats.Msg{Subject: streams.OutputSubject(projectID), Data: []byte(body),
		Header: nats.Header{streams.HeaderSignal: {"agent_output"}, streams.HeaderRequestID: {id}, streams.HeaderMsgID: {"out:" + id}}})
	require.NoError(t, err)
	require.NoError(t, nc.Publish(streams.WakeSubject(streams.WakeOutput, projectID), nil))
}

// notices are the failure notices among what a destination received, decoded.
func notices(t *testing.T, got []received) []failureBody {
	t.Helper()
	var out []failureBody
	for _, g := range got {
		var b failureBody
		if json.Unmarshal(g.body, &b) == nil && b.Type == failureNoticeType {
			out = append(out, b)
		}
	}
	return out
}

// untilSentinel waits until a destination has received the sentinel result, published
// after everything the test expects it to have got: what it holds then is all it got
// before, since each destination's cursor delivers in order.
func untilSentinel(t *testing.T, a *agent) []received {
	t.Helper()
	require.Eventually(t, func() bool {
		for _, g := range a.requests() {
			if strings.Contains(string(g.body), "sentinel") {
				return true
			}
		}
		return false
	}, 10*time.Second, 10*time.Millisecond)
	var before []received
	for _, g := range a.requests() {
		if strings.Contains(string(g.body), "sentinel") {
			break
		}
		before = append(before, g)
	}
	return before
}

// An agent answering 500 with a short retry budget; the project's
// webhook destination receives one failure notice, with the delivery's id and a link to
// it in the dashboard, and its chat destination the notice's text (not through its
// template) with the same link.
func TestDeadLetteredCallIsToldToTheDestinationsOnce(t *testing.T) {
	e := newEnv(t)
	ag := newAgent(t, func(_ int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusInternalServerError) })
	hook, chat := newAgent(t, nil), newAgent(t, nil)
	p := sinkProject("told",
		mirror.Sink{ID: "s_hook", Kind: "webhook", URL: hook.srv.URL},
		mirror.Sink{ID: "s_chat", Kind: "chat", Format: "slack", URL: chat.srv.URL, TextTemplate: ":rotating_light: [{severity}] {text}"})
	p.Name = "checkout-prod"
	p.Pipeline.AgentEndpointURL = ag.srv.URL
	e.putProject(t, p)
	pipeline := e.start(t, func(c *Config) {
		c.DashboardURL = dashboard
		c.Retry.MaxElapsedTime = 200 * time.Millisecond
	})
	e.startSinkRole(t, "told", "s_hook", "s_chat")

	require.NoError(t, consume(pipeline, "told", records(1)))
	dl := e.deadLetters(t, "told")
	require.Len(t, dl, 1, "the call was dead-lettered")
	id := dl[0].Header.Get(streams.HeaderRequestID)
	require.Greater(t, len(ag.requests()), 1, "after retries")

	link := dashboard + "/projects/told/deliveries?delivery=" + id
	require.Eventually(t, func() bool { return len(notices(t, hook.requests())) == 1 }, 10*time.Second, 10*time.Millisecond,
		"the webhook destination is told")
	nc, _ := testenv.Connect(t, e.nats.URL())
	e.publishResult(t, nc, "told", "req_sentinel", `{"text":"sentinel"}`)
	got := notices(t, untilSentinel(t, hook))
	require.Len(t, got, 1, "one notice")
	n := got[0]
	assert.Equal(t, "delivery_failed", n.Type)
	assert.Equal(t, id, n.DeliveryID)
	assert.Equal(t, "agent_call", n.Kind)
	assert.Equal(t, link, n.URL)
	assert.Contains(t, n.Error, "last: 500")
	assert.True(t, strings.HasPrefix(n.Text, "otelcol-svc: in project checkout-prod, a call to the agent failed and was dead-lettered: "), n.Text)

	chats := untilSentinel(t, chat)
	require.Len(t, chats, 1)
	var m struct{ Text string }
	require.NoError(t, json.Unmarshal(chats[0].body, &m))
	assert.Equal(t, n.Text+"\n<"+link+"|View the failed delivery in the dashboard>", m.Text,
		"the chat gets the notice in the service's words, not through its template, with the link")
}

// A storm: 20 dead-lettered calls, made by two pipeline processes, give the destination
// one notice at once and one more when the interval ends, counting the rest; never one
// per failure, and not one per process.
func TestAStormOfFailuresIsOneNoticePerInterval(t *testing.T) {
	e := newEnv(t)
	ag := newAgent(t, func(_ int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusBadRequest) })
	hook := newAgent(t, nil)
	p := sinkProject("storm", mirror.Sink{ID: "s_hook", Kind: "webhook", URL: hook.srv.URL})
	p.Pipeline.AgentEndpointURL = ag.srv.URL
	p.Pipeline.BatchSize = 1
	e.putProject(t, p)
	const interval = 2 * time.Second
	start := func() *running {
		return e.start(t, func(c *Config) { c.DashboardURL = dashboard; c.FailureNotices.Interval = interval })
	}
	a, b := start(), start()
	e.startSinkRole(t, "storm", "s_hook")

	require.NoError(t, consume(a, "storm", records(10)))
	require.NoError(t, consume(b, "storm", records(10)))
	require.Len(t, e.deadLetters(t, "storm"), 20)

	require.Eventually(t, func() bool { return len(notices(t, hook.requests())) == 2 }, 10*time.Second, 10*time.Millisecond,
		"the rest are told when the interval ends")
	nc, _ := testenv.Connect(t, e.nats.URL())
	e.publishResult(t, nc, "storm", "req_sentinel", `{"text":"sentinel"}`)
	before := untilSentinel(t, hook)
	got := notices(t, before)
	require.Len(t, got, 2, "two notices for 20 failures")
	// Each notice tells one failure and counts the others it covers (a process reports
	// what failed while its last report was in flight together).
	assert.Equal(t, 20, 2+got[0].More+got[1].More, "every failure told or counted once: %d and %d more", got[0].More, got[1].More)
	if got[1].More > 1 {
		assert.Contains(t, got[1].Text, fmt.Sprintf(" %d more deliveries failed since ", got[1].More))
	}
	assert.GreaterOrEqual(t, before[1].at.Sub(before[0].at), interval-100*time.Millisecond,
		"the second notice waited for the interval")
}

// A destination that fails is not told of its own failure (it would fail again, and
// telling it would be a loop); the other destinations are. A notice that cannot be
// delivered is not itself notified about.
func TestNoNoticeToTheFailingDestination(t *testing.T) {
	e := newEnv(t)
	// broken refuses the first result (400: dead-lettered at once) and takes the rest.
	var broken *agent
	broken = newAgent(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		if strings.Contains(string(broken.requests()[n-1].body), "boom") {
			w.WriteHeader(http.StatusBadRequest)
		}
	})
	other := newAgent(t, nil)
	e.putProject(t, sinkProject("loop",
		mirror.Sink{ID: "s_broken", Kind: "webhook", URL: broken.srv.URL},
		mirror.Sink{ID: "s_other", Kind: "webhook", URL: other.srv.URL}))
	e.startSinkRole(t, "loop", "s_broken", "s_other")
	nc, _ := testenv.Connect(t, e.nats.URL())

	e.publishResult(t, nc, "loop", "req_boom", `{"text":"boom"}`)
	require.Eventually(t, func() bool { return len(notices(t, other.requests())) == 1 }, 10*time.Second, 10*time.Millisecond)
	n := notices(t, other.requests())[0]
	assert.Equal(t, "destination", n.Kind)
	assert.Equal(t, []string{"s_broken"}, n.AboutDestinations)
	assert.Contains(t, n.Text, "a delivery to destination s_broken (webhook) failed and was dead-lettered: webhook answered 400")
	assert.True(t, strings.HasPrefix(n.URL, dashboard+"/projects/loop/deliveries?delivery=snk_"), n.URL)

	e.publishResult(t, nc, "loop", "req_sentinel", `{"text":"sentinel"}`)
	got := untilSentinel(t, broken)
	require.Len(t, got, 1, "the broken destination got its result, and no notice about itself")
	assert.Contains(t, string(got[0].body), "boom")
}

// A notice that fails to reach a destination is dead-lettered like any delivery, but is
// never the subject of another notice. The positive signal: a result dead-lettered after
// it is told, and its notice is the project's first, counting no other failure (a notice
// of the notice would have come first, or been counted in "more").
func TestAFailedNoticeIsNotNotified(t *testing.T) {
	e := newEnv(t)
	broken := newAgent(t, func(_ int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusBadRequest) })
	other := newAgent(t, nil)
	e.putProject(t, sinkProject("quiet",
		mirror.Sink{ID: "s_broken", Kind: "webhook", URL: broken.srv.URL},
		mirror.Sink{ID: "s_other", Kind: "webhook", URL: other.srv.URL}))
	r := e.start(t, func(c *Config) { c.FailureNotices.Interval = time.Hour })

	ld, lrs := pipelinedata.New()
	pipelinedata.Append(lrs, pipelinedata.Item{Body: []byte(`{"type":"usage_notice","text":"otelcol-svc: 80%"}`), Signal: streams.SignalNotice,
		Kind: pipelinedata.KindResult, Seq: 1, SinkID: "s_broken", RequestID: "notice-acct-1", MsgID: "notice-acct-1"})
	require.NoError(t, r.exp.ConsumeLogs(principal.NewContext(context.Background(), principal.Principal{ProjectID: "quiet"}), ld))
	require.Len(t, e.deadLetters(t, "quiet"), 1, "the notice was dead-lettered")

	// Then a result to the same destination is dead-lettered: that one is told.
	require.NoError(t, consumeResult(r, "quiet", "s_broken", `{"text":"checkout is failing"}`))
	want := sinkDeliveryID(pipelinedata.Item{MsgID: "out:req_1:abc"}, "s_broken")
	var first failureBody
	require.Eventually(t, func() bool {
		s, err := e.js.Stream(context.Background(), streams.OutputStream("quiet"))
		if err != nil {
			return false
		}
		m, err := s.GetMsg(context.Background(), 1)
		if err != nil {
			return false
		}
		return json.Unmarshal(m.Data, &first) == nil
	}, 10*time.Second, 10*time.Millisecond, "the result's failure is told")
	assert.Equal(t, failureNoticeType, first.Type)
	assert.Equal(t, want, first.DeliveryID, "the project's first notice is about the result, not the notice")
	assert.Zero(t, first.More, "no other failure (the notice's) was counted")
}

// Usage notices reach chat destinations in the service's words, not through the
// destination's text template (a template once made them ":rotating_light: [] checkout-prod:
// 100% of…"), with a link to the project's usage; an agent's result goes through the
// template and links to its own delivery.
func TestNoticesSkipTheTemplateAndResultsLinkToTheirDelivery(t *testing.T) {
	e := newEnv(t)
	slack := newAgent(t, nil)
	e.putProject(t, sinkProject("words",
		mirror.Sink{ID: "s_slack", Kind: "chat", Format: "slack", URL: slack.srv.URL, TextTemplate: ":rotating_light: [{severity}] {text}"}))
	r := e.start(t, func(c *Config) { c.DashboardURL = dashboard + "/" })

	const text = "otelcol-svc: the account of project checkout-prod has used 100% of this month's 10,000 events; new events are refused (429 quota_exceeded) until 1 December 2026 00:00 UTC."
	ld, lrs := pipelinedata.New()
	pipelinedata.Append(lrs, pipelinedata.Item{Body: []byte(`{"type":"usage_notice","text":"` + text + `","percent":100}`), Signal: streams.SignalNotice,
		Kind: pipelinedata.KindResult, Seq: 3, SinkID: "s_slack", RequestID: "notice-acct-2026-11-10000-100-words", MsgID: "notice-acct-2026-11-10000-100-words"})
	require.NoError(t, r.exp.ConsumeLogs(principal.NewContext(context.Background(), principal.Principal{ProjectID: "words"}), ld))
	require.NoError(t, consumeResult(r, "words", "s_slack", `{"severity":"high","text":"checkout is failing"}`))
	require.Len(t, slack.requests(), 2)

	var m struct{ Text string }
	require.NoError(t, json.Unmarshal(slack.requests()[0].body, &m))
	assert.Equal(t, text+"\n<"+dashboard+"/projects/words/usage|View usage in the dashboard>", m.Text)

	require.NoError(t, json.Unmarshal(slack.requests()[1].body, &m))
	want := ":rotating_light: [high] checkout is failing\n<" + dashboard + "/projects/words/deliveries?delivery=" +
		sinkDeliveryID(pipelinedata.Item{MsgID: "out:req_1:abc"}, "s_slack") + "|View this delivery in the dashboard>"
	assert.Equal(t, want, m.Text, "a result keeps its template and links to its delivery")
}

// Without a dashboard address there is no link: never a wrong one.
func TestNoDashboardNoLink(t *testing.T) {
	e := newEnv(t)
	slack := newAgent(t, nil)
	e.putProject(t, sinkProject("nolink", mirror.Sink{ID: "s_slack", Kind: "chat", Format: "slack", URL: slack.srv.URL}))
	r := e.start(t, nil)
	require.NoError(t, consumeResult(r, "nolink", "s_slack", `{"text":"checkout is failing"}`))
	require.Len(t, slack.requests(), 1)
	assert.JSONEq(t, `{"text":"checkout is failing"}`, string(slack.requests()[0].body))
}

func TestDashboardURLIsValidated(t *testing.T) {
	for _, bad := range []string{"cp.example.com", "ftp://cp.example.com", "https://cp.example.com/?a=b", "https://u:p@cp.example.com", "https://cp.example.com/#x"} {
		cfg := defaultConfig()
		cfg.DashboardURL = bad
		assert.ErrorContains(t, cfg.Validate(), "dashboard_url", bad)
	}
	cfg := defaultConfig()
	cfg.DashboardURL = "https://cp.example.com/console"
	assert.NoError(t, cfg.Validate())
}

// A target that keeps failing opens its circuit: the project's destinations are told
// that deliveries to it are paused, before any call's budget runs out.
func TestAnOpenCircuitIsTold(t *testing.T) {
	e := newEnv(t)
	ag := newAgent(t, func(_ int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) })
	hook := newAgent(t, nil)
	p := sinkProject("circuit", mirror.Sink{ID: "s_hook", Kind: "webhook", URL: hook.srv.URL})
	p.Pipeline.AgentEndpointURL = ag.srv.URL
	e.putProject(t, p)
	pipeline := e.start(t, func(c *Config) {
		c.DashboardURL = dashboard
		c.Target.Circuit = CircuitConfig{Failures: 3, ProbeInterval: time.Minute}
		c.Retry.MaxElapsedTime = time.Minute
	})
	e.startSinkRole(t, "circuit", "s_hook")

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- consumeCtx(ctx, pipeline, "circuit", records(1)) }()
	require.Eventually(t, func() bool { return len(notices(t, hook.requests())) == 1 }, 10*time.Second, 10*time.Millisecond)
	cancel()
	<-done
	n := notices(t, hook.requests())[0]
	assert.Equal(t, "circuit_open", n.Kind)
	assert.Contains(t, n.Text, "deliveries to "+targetOrigin(ag.srv.URL)+" are paused after sustained failure")
	assert.True(t, strings.HasPrefix(n.URL, dashboard+"/projects/circuit/deliveries?delivery="), n.URL)
}

// A notice that cannot be published (the output stream refuses it) is not lost with the
// interval it claimed: it is counted back as pending and sent once the stream takes it.
func TestANoticeThatCouldNotBePublishedIsSentLater(t *testing.T) {
	e := newEnv(t)
	ag := newAgent(t, func(_ int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusBadRequest) })
	hook := newAgent(t, nil)
	p := sinkProject("later", mirror.Sink{ID: "s_hook", Kind: "webhook", URL: hook.srv.URL})
	p.Pipeline.AgentEndpointURL = ag.srv.URL
	e.putProject(t, p)
	pipeline := e.start(t, func(c *Config) { c.DashboardURL = dashboard; c.FailureNotices.Interval = time.Second })
	e.startSinkRole(t, "later", "s_hook")
	ctx := context.Background()

	// The output stream full: it holds one message and takes no more.
	nc, _ := testenv.Connect(t, e.nats.URL())
	e.publishResult(t, nc, "later", "req_filler", `{"text":"filler"}`)
	s, err := e.js.Stream(ctx, streams.OutputStream("later"))
	require.NoError(t, err)
	full := s.CachedInfo().Config
	full.MaxMsgs = 1
	_, err = e.js.UpdateStream(ctx, full)
	require.NoError(t, err)

	require.NoError(t, consume(pipeline, "later", records(1)))
	id := e.deadLetters(t, "later")[0].Header.Get(streams.HeaderRequestID)
	require.Eventually(t, func() bool {
		kv, err := e.js.KeyValue(ctx, FailureBucket)
		if err != nil {
			return false
		}
		entry, err := kv.Get(ctx, "later")
		var st noticeState
		return err == nil && json.Unmarshal(entry.Value(), &st) == nil && st.Pending == 1 && st.Last != nil && st.Last.DeliveryID == id
	}, 10*time.Second, 10*time.Millisecond, "the notice not published is pending again")

	full.MaxMsgs = -1
	_, err = e.js.UpdateStream(ctx, full)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(notices(t, hook.requests())) == 1 }, 10*time.Second, 10*time.Millisecond,
		"sent once the stream takes it")
	assert.Equal(t, id, notices(t, hook.requests())[0].DeliveryID)
}
