package agentexporter

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/delivery"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

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
		c.Target.Circuit = delivery.CircuitConfig{Failures: 3, ProbeInterval: time.Minute}
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
	// The origin as the circuit names it: the test server's URL is already scheme://host:port.
	assert.Contains(t, n.Text, "deliveries to "+ag.srv.URL+" are paused after sustained failure")
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
		kv, err := e.js.KeyValue(ctx, delivery.FailureBucket)
		if err != nil {
			return false
		}
		entry, err := kv.Get(ctx, "later")
		// The bucket's entry as internal/delivery writes it (noticeState).
		var st struct {
			Pending int
			Last    *delivery.Failure
		}
		return err == nil && json.Unmarshal(entry.Value(), &st) == nil && st.Pending == 1 && st.Last != nil && st.Last.DeliveryID == id
	}, 10*time.Second, 10*time.Millisecond, "the notice not published is pending again")

	full.MaxMsgs = -1
	_, err = e.js.UpdateStream(ctx, full)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(notices(t, hook.requests())) == 1 }, 10*time.Second, 10*time.Millisecond,
		"sent once the stream takes it")
	assert.Equal(t, id, notices(t, hook.requests())[0].DeliveryID)
}
