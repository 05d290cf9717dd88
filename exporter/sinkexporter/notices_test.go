package sinkexporter

import (
	"context"
	"encoding/json"
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
	"github.com/otelcol-svc/otelcol-svc/internal/delivery"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
	"github.com/otelcol-svc/otelcol-svc/receiver/jetstreamreceiver"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

const dashboard = "https://dash.example.com"

// startSinkRole runs the sink role as configs/sink.yaml does: the JetStream receiver
// reading each enabled destination's cursor on the project's output stream, feeding an
// sink exporter, which delivers to the destinations. It returns once the cursors of the
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
func notices(t *testing.T, got []received) []delivery.FailureBody {
	t.Helper()
	var out []delivery.FailureBody
	for _, g := range got {
		var b delivery.FailureBody
		if json.Unmarshal(g.body, &b) == nil && b.Type == delivery.FailureNoticeType {
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
	var first delivery.FailureBody
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
	assert.Equal(t, delivery.FailureNoticeType, first.Type)
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
