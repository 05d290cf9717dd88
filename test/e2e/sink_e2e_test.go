package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/apikey"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
	"github.com/otelcol-svc/otelcol-svc/internal/webhooksig"
	"github.com/otelcol-svc/otelcol-svc/sdk/go/agentsdk"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// sinkProject publishes a project whose results go to the given destinations, and returns
// a key to post results with and the project's signing secret.
func sinkProject(t *testing.T, m *mirror.Store, base, id string, sinks ...mirror.Sink) (key, secret string) {
	t.Helper()
	secret = webhooksig.NewSecret()
	since := time.Now().UTC()
	for i := range sinks {
		sinks[i].Enabled = true
		sinks[i].Since = since
	}
	require.NoError(t, m.PutProject(context.Background(), mirror.Project{ID: id, Version: 1, SigningSecret: secret, Sinks: sinks}))
	key = apikey.Generate(apikey.KindProject)
	require.NoError(t, m.PutKey(context.Background(), apikey.Hash(key), mirror.KeyEntry{KeyID: "k-" + id, ProjectID: id, Scope: mirror.ScopeProject}))
	if base != "" {
		waitAccepted(t, base, key)
	}
	return key, secret
}

func postResult(t *testing.T, base, key, requestID, payload string) {
	t.Helper()
	body := fmt.Sprintf(`{"request_id": %q, "payload": %s}`, requestID, payload)
	r := post(t, base+"/internal/agent-output", key, "application/json", []byte(body), nil)
	require.Equal(t, http.StatusAccepted, r.StatusCode, "%s", r.Body)
}

// replay rebuilds a delivery as the request a webhook receiver would hand to the SDK.
func replay(c agentCall, body []byte) *http.Request {
	r := httptest.NewRequest(c.Method, "/results", bytes.NewReader(body))
	r.Header = c.Header.Clone()
	return r
}

// sentinelID is the request id of the result postSentinel sends; it sorts after the
// tests' own ids.
const sentinelID = "req_zz_sentinel"

// postSentinel posts one more result after those under test and waits until each of the
// destinations has it. A destination reads the output stream with its own consumer and
// takes one result after the other in stream order (one sink process here), so once the
// sentinel has arrived, every delivery an earlier result causes, a wrong or a second one
// too, has arrived before it: beforeSentinel then holds all there is to check.
func postSentinel(t *testing.T, base, key string, dests ...*testAgent) {
	t.Helper()
	postResult(t, base, key, sentinelID, `{"text": "sentinel"}`)
	for _, d := range dests {
		require.Eventually(t, func() bool { return byRequest(d.delivered())[sentinelID] > 0 }, 20*time.Second, 10*time.Millisecond,
			"the sentinel result never reached %s", d.URL)
	}
}

// beforeSentinel returns the deliveries that came before the sentinel.
func beforeSentinel(t *testing.T, calls []agentCall) []agentCall {
	t.Helper()
	for i, c := range calls {
		if c.Header.Get("X-Request-Id") == sentinelID {
			return calls[:i]
		}
	}
	t.Fatal("no sentinel among the deliveries")
	return nil
}

// byRequest counts the deliveries a destination took, by X-Request-Id.
func byRequest(calls []agentCall) map[string]int {
	n := map[string]int{}
	for _, c := range calls {
		n[c.Header.Get("X-Request-Id")]++
	}
	return n
}

func TestResultReachesWebhookAndChatOnce(t *testing.T) {
	e := startEmbedded(t, nil)
	hook, slack, plain := startAgent(t), startAgent(t), startAgent(t)
	key, secret := sinkProject(t, e.m, e.col.HTTP, "sinks-once",
		mirror.Sink{ID: "s_hook", Kind: "webhook", URL: hook.URL + "/results", Method: http.MethodPut, Headers: map[string]string{"X-Team": "ops"}},
		mirror.Sink{ID: "s_slack", Kind: "chat", URL: slack.URL, Format: "slack", TextTemplate: "{service}: {summary} ({count} errors)"},
		mirror.Sink{ID: "s_plain", Kind: "chat", URL: plain.URL, Format: "discord"},
	)

	payload := `{"summary": "checkout is failing", "service": "checkout", "count": 12, "ratio": 1.50}`
	postResult(t, e.col.HTTP, key, "req_one", payload)
	postResult(t, e.col.HTTP, key, "req_two", `{"status": "degraded", "errors": 3}`)
	for i := 0; i < 3; i++ {
		postResult(t, e.col.HTTP, key, fmt.Sprintf("req_more_%d", i), fmt.Sprintf(`{"text": "result %d"}`, i))
	}
	postSentinel(t, e.col.HTTP, key, hook, slack, plain)

	calls := beforeSentinel(t, hook.delivered())
	require.Len(t, calls, 5, "once each")
	first := calls[0]
	assert.Equal(t, http.MethodPut, first.Method, "the configured method")
	assert.Equal(t, "ops", first.Header.Get("X-Team"), "the configured headers")
	assert.Equal(t, "req_one", first.Header.Get("X-Request-Id"), "the request id the agent answered")
	assert.Equal(t, payload, string(first.Body), "the payload as the agent sent it, byte for byte")
	// Verifiable with the agent SDK, as a webhook receiver would.
	wh, err := agentsdk.VerifyWebhook(replay(first, first.Body), secret)
	require.NoError(t, err, "signed with the project's secret")
	assert.Equal(t, "req_one", wh.RequestID)
	assert.Equal(t, payload, string(wh.Payload))
	assert.NotEmpty(t, wh.WebhookID)
	_, err = agentsdk.VerifyWebhook(replay(first, []byte(`{"summary": "forged"}`)), secret)
	assert.ErrorIs(t, err, agentsdk.ErrSignature, "an altered body fails verification")
	for id, n := range byRequest(calls) {
		assert.Equal(t, 1, n, "request %s delivered once", id)
	}

	msgs := beforeSentinel(t, slack.delivered())
	require.Len(t, msgs, 5)
	var m struct{ Text string }
	require.NoError(t, json.Unmarshal(msgs[0].Body, &m))
	assert.Equal(t, "checkout: checkout is failing (12 errors)", m.Text, "the template over the payload's fields")
	require.NoError(t, json.Unmarshal(msgs[1].Body, &m))
	assert.Equal(t, "```\n{\"status\":\"degraded\",\"errors\":3}\n```", m.Text,
		"a template that finds none of its fields falls back to the default text, not \":  ( errors)\"")

	var d struct{ Content string }
	msgs = beforeSentinel(t, plain.delivered())
	require.Len(t, msgs, 5)
	require.NoError(t, json.Unmarshal(msgs[0].Body, &d))
	assert.Equal(t, "checkout is failing", d.Content, "no template: the summary field")
	require.NoError(t, json.Unmarshal(msgs[1].Body, &d))
	assert.Equal(t, "```\n"+`{"status":"degraded","errors":3}`+"\n```", d.Content,
		"no template and no text, summary or message field: the payload as compact JSON")
	require.NoError(t, json.Unmarshal(msgs[2].Body, &d))
	assert.Equal(t, "result 0", d.Content, "no template: the text field")
}

// A destination that fails for a while retries alone: the healthy ones get each result
// exactly once meanwhile, and the failing one gets everything once it recovers.
func TestFailingDestinationCatchesUpAlone(t *testing.T) {
	e := startEmbedded(t, map[string]string{
		"SVC_SINK_RETRY_INITIAL_INTERVAL": "50ms", "SVC_SINK_RETRY_MAX_INTERVAL": "200ms",
		// Shorter than the outage: results waiting behind the failing one must be kept
		// alive, not delivered twice.
		"SVC_SINK_ACK_WAIT": "1s",
	})
	a, b, flaky := startAgent(t), startAgent(t), startAgent(t)
	var broken atomic.Bool
	broken.Store(true)
	flaky.setRespond(func(int, *http.Request) (int, time.Duration) {
		if broken.Load() {
			return http.StatusInternalServerError, 0
		}
		return http.StatusOK, 0
	})
	key, _ := sinkProject(t, e.m, e.col.HTTP, "sinks-flaky",
		mirror.Sink{ID: "s_a", Kind: "webhook", URL: a.URL},
		mirror.Sink{ID: "s_b", Kind: "chat", URL: b.URL, Format: "slack"},
		mirror.Sink{ID: "s_flaky", Kind: "webhook", URL: flaky.URL},
	)
	const n = 30
	for i := 0; i < n; i++ {
		postResult(t, e.col.HTTP, key, fmt.Sprintf("req_%02d", i), fmt.Sprintf(`{"text": "result %d"}`, i))
	}
	for _, d := range []*testAgent{a, b} {
		require.Eventually(t, func() bool { return len(d.delivered()) >= n }, 20*time.Second, 10*time.Millisecond)
	}
	// The outage must outlast the ack wait; the stub's own clock marks it: a failed
	// attempt arriving more than 2.5 s (over twice SVC_SINK_ACK_WAIT) after the first.
	require.Eventually(t, func() bool {
		got := flaky.received()
		return len(got) >= 5 && got[len(got)-1].At.Sub(got[0].At) > 2500*time.Millisecond
	}, 20*time.Second, 10*time.Millisecond, "the failing destination is retried past the ack wait")
	// Meanwhile the destination was offered the first result only, again and again, each
	// time answered 500: the results behind it waited their turn rather than skipping
	// ahead, and none was given up on.
	outage := flaky.received()
	statuses := map[int]int{}
	for _, c := range outage {
		statuses[c.Status]++
	}
	assert.Equal(t, map[string]int{"req_00": len(outage)}, byRequest(outage), "attempts during the outage, by request id")
	assert.Equal(t, map[int]int{http.StatusInternalServerError: len(outage)}, statuses, "answers during the outage")

	broken.Store(false)
	require.Eventually(t, func() bool { return len(byRequest(flaky.delivered())) == n }, 30*time.Second, 20*time.Millisecond,
		"everything reaches the destination once it recovers")
	postSentinel(t, e.col.HTTP, key, a, b, flaky)
	for name, d := range map[string]*testAgent{"a": a, "b": b, "recovered": flaky} {
		got := byRequest(beforeSentinel(t, d.delivered()))
		assert.Len(t, got, n, name)
		for id, c := range got {
			assert.Equal(t, 1, c, "destination %s got %s once", name, id)
		}
	}
	// In order, too: a destination's results go one after the other.
	var order []string
	for _, c := range beforeSentinel(t, flaky.delivered()) {
		order = append(order, c.Header.Get("X-Request-Id"))
	}
	assert.IsIncreasing(t, order)
}

// A destination that refuses a result (a 4xx other than 408/429) does not hold up the
// others: the result goes to the project's dead-letter stream with the reason.
func TestRefusedResultIsDeadLettered(t *testing.T) {
	e := startEmbedded(t, nil)
	hook := startAgent(t)
	hook.setRespond(func(n int, _ *http.Request) (int, time.Duration) {
		if n == 0 {
			return http.StatusBadRequest, 0
		}
		return http.StatusOK, 0
	})
	key, _ := sinkProject(t, e.m, e.col.HTTP, "sinks-dlq", mirror.Sink{ID: "s_hook", Kind: "webhook", URL: hook.URL})
	postResult(t, e.col.HTTP, key, "req_refused", `{"text": "first"}`)
	postResult(t, e.col.HTTP, key, "req_taken", `{"text": "second"}`)
	require.Eventually(t, func() bool { return len(hook.delivered()) == 1 }, 20*time.Second, 10*time.Millisecond)
	assert.Equal(t, "req_taken", hook.delivered()[0].Header.Get("X-Request-Id"))

	var dl *jetstream.RawStreamMsg
	require.Eventually(t, func() bool {
		s, err := e.js.Stream(context.Background(), streams.DeadLetterStream("sinks-dlq"))
		if err != nil {
			return false
		}
		dl, err = s.GetLastMsgForSubject(context.Background(), streams.DeadLetterSubject("sinks-dlq", "sink"))
		return err == nil
	}, 10*time.Second, 20*time.Millisecond)
	assert.Equal(t, `{"text": "first"}`, string(dl.Data), "the payload, to replay")
	assert.Equal(t, "req_refused", dl.Header.Get(streams.HeaderRequestID))
	assert.Equal(t, "s_hook", dl.Header.Get(streams.HeaderDLQSink))
	assert.Equal(t, "400", dl.Header.Get(streams.HeaderDLQStatus))
	assert.Contains(t, dl.Header.Get(streams.HeaderDLQReason), "webhook answered 400")
}

// The sink role alone (configs/sink.yaml) is killed with SIGKILL mid-run and restarted:
// every result reaches every destination.
func TestSinkKill9LosesNothing(t *testing.T) {
	const n = 400
	nt := testenv.StartNATS(t)
	_, m := connectMirror(t, nt.URL())
	hook, chat := startAgent(t), startAgent(t)
	// Slow enough that the kill lands mid-run.
	for _, d := range []*testAgent{hook, chat} {
		d.setRespond(func(int, *http.Request) (int, time.Duration) { return http.StatusOK, 2 * time.Millisecond })
	}
	vars := map[string]string{"NATS_URL": nt.URL(), "SVC_OUTBOUND_ALLOW": "127.0.0.0/8", "SVC_STREAM_REPLICAS": "1",
		// Its results come under made-up request ids, hundreds of them: past the hourly
		// allowance for those (100) they would be refused.
		"SVC_UNMATCHED_RESULTS_PER_HOUR": "0"}
	recv := testenv.StartCollector(t, testenv.CollectorOptions{Config: "configs/receiver.yaml", Env: vars})
	key, _ := sinkProject(t, m, recv.HTTP, "sinks-crash",
		mirror.Sink{ID: "s_hook", Kind: "webhook", URL: hook.URL},
		mirror.Sink{ID: "s_chat", Kind: "chat", URL: chat.URL, Format: "slack"},
	)
	sink := testenv.StartCollector(t, testenv.CollectorOptions{Config: "configs/sink.yaml", Env: vars})

	posted := make(chan error, 1)
	go func() {
		for i := 0; i < n; i++ {
			body := fmt.Sprintf(`{"request_id": "req_%04d", "payload": {"text": "result %d"}}`, i, i)
			req, _ := http.NewRequest(http.MethodPost, recv.HTTP+"/internal/agent-output", strings.NewReader(body))
			req.Header.Set("X-API-Key", key)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode != http.StatusAccepted {
					err = fmt.Errorf("result %d answered %d", i, resp.StatusCode)
				}
			}
			if err != nil {
				posted <- err
				return
			}
		}
		posted <- nil
	}()
	require.Eventually(t, func() bool { return len(hook.delivered()) > n/4 }, 60*time.Second, 5*time.Millisecond)
	sink.Kill()
	before := len(byRequest(hook.delivered()))
	sink.Start()
	require.NoError(t, <-posted)
	for name, d := range map[string]*testAgent{"webhook": hook, "chat": chat} {
		require.Eventually(t, func() bool { return len(byRequest(d.delivered())) == n }, 60*time.Second, 20*time.Millisecond,
			"every result reaches the %s after the restart (%d of %d)", name, len(byRequest(d.delivered())), n)
		t.Logf("%s: killed after %d results; %d deliveries for %d results", name, before, len(d.delivered()), n)
	}
}

// A disabled destination stops receiving at once and loses its cursor; enabled again, it
// gets what arrives from then on, not what it missed while disabled.
func TestDisabledDestinationStopsAndRestartsFromThen(t *testing.T) {
	e := startEmbedded(t, nil)
	keep, toggled := startAgent(t), startAgent(t)
	sinks := []mirror.Sink{
		{ID: "s_keep", Kind: "webhook", URL: keep.URL, Method: http.MethodPost},
		{ID: "s_toggle", Kind: "webhook", URL: toggled.URL, Method: http.MethodPost},
	}
	key, secret := sinkProject(t, e.m, e.col.HTTP, "sinks-toggle", sinks...)
	put := func(version int64, toggleEnabled bool) {
		t.Helper()
		p := mirror.Project{ID: "sinks-toggle", Version: version, SigningSecret: secret, Sinks: append([]mirror.Sink(nil), sinks...)}
		p.Sinks[1].Enabled, p.Sinks[1].Since = toggleEnabled, time.Now().UTC()
		require.NoError(t, e.m.PutProject(context.Background(), p))
	}
	consumers := func() []string {
		t.Helper()
		stream, err := e.js.Stream(context.Background(), streams.OutputStream("sinks-toggle"))
		require.NoError(t, err)
		var names []string
		lister := stream.ConsumerNames(context.Background())
		for name := range lister.Name() {
			names = append(names, name)
		}
		require.NoError(t, lister.Err())
		return names
	}

	postResult(t, e.col.HTTP, key, "req_before", `{"n":1}`)
	for _, d := range []*testAgent{keep, toggled} {
		require.Eventually(t, func() bool { return len(d.delivered()) == 1 }, 20*time.Second, 10*time.Millisecond)
	}
	require.ElementsMatch(t, []string{"svc-sink-s_keep", "svc-sink-s_toggle"}, consumers())

	sinks[0].Enabled, sinks[1].Enabled = true, true
	put(2, false)
	require.Eventually(t, func() bool { return len(consumers()) == 1 }, 10*time.Second, 20*time.Millisecond,
		"the disabled destination's cursor is deleted")
	assert.Equal(t, []string{"svc-sink-s_keep"}, consumers())
	postResult(t, e.col.HTTP, key, "req_while_disabled", `{"n":2}`)
	require.Eventually(t, func() bool { return len(keep.delivered()) == 2 }, 20*time.Second, 10*time.Millisecond)
	// A new cursor starts a second before the destination was enabled (the latency of
	// the control plane's write); what was stored earlier than that is not replayed. That
	// second must pass: no event marks it.
	time.Sleep(1200 * time.Millisecond)

	put(3, true)
	require.Eventually(t, func() bool { return len(consumers()) == 2 }, 10*time.Second, 20*time.Millisecond)
	postResult(t, e.col.HTTP, key, "req_after", `{"n":3}`)
	postSentinel(t, e.col.HTTP, key, keep, toggled)
	assert.Equal(t, map[string]int{"req_before": 1, "req_after": 1}, byRequest(beforeSentinel(t, toggled.delivered())),
		"nothing from while it was disabled, nothing twice")
	assert.Equal(t, map[string]int{"req_before": 1, "req_while_disabled": 1, "req_after": 1}, byRequest(beforeSentinel(t, keep.delivered())))
}
