package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// Incident mode end to end (docs/incidents.md), with the built collector: one incident
// per fingerprint however many events arrive, an agent call when it opens and at most one
// per group_interval after, one Slack thread per incident kept up to date, resolution,
// reopening, and the on-call's buttons.

const (
	stormEvents   = 10_000
	stormDuration = 60 * time.Second
	groupWait     = 5 * time.Second
	groupInterval = 20 * time.Second
	// callSlack: calls are made by a ticker (SVC_INCIDENT_TICK) after the interval, never
	// before it; the agent's clock measures the spacing, so only its own resolution and
	// the gap between receipt and the caller's completion time could shave anything off.
	callSlack = 500 * time.Millisecond
)

var stormServices = []string{"checkout", "payments", "search"}

// incidentPipeline is the storm's pipeline: errors open (or join) the incident of their
// service, a record saying the alert resolved resolves it.
func incidentPipeline(agentURL string) mirror.Pipeline {
	return mirror.Pipeline{
		Mode:             mirror.ModeIncident,
		AgentEndpointURL: agentURL,
		Trigger:          `severity_number >= 17`,
		Fingerprint:      `resource_attributes["service.name"]`,
		ResolveWhen:      `attributes["alert.state"] == "resolved"`,
		GroupWait:        groupWait.String(),
		GroupInterval:    groupInterval.String(),
		ResolveAfter:     "30m",
		ReopenWithin:     "10m",
	}
}

func randomSuffix() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// A 60 s storm of 10,000 errors from three services: three incidents, three opening
// calls, updates no closer than group_interval, one Slack thread per incident holding
// every agent result with its root message kept current; then resolution (Slack and a
// webhook say so) and a reopening; and, during the storm, the Acknowledge button.
func TestIncidentStorm(t *testing.T) {
	t.Parallel()
	slack := testenv.NewSlack(t)
	e := startEmbedded(t, map[string]string{"SVC_SLACK_API_URL": slack.URL()})
	agent := startIncidentAgent(t)
	hook := startNoticeHook(t)
	prj := "inc-storm-" + randomSuffix()
	signing := "8f742231b10e8888abcd99yyyzzz85a5"
	const slackSink, hookSink = "snk_slack", "snk_hook"
	key := e.deliveryProject(t, prj, incidentPipeline(agent.URL), nil,
		mirror.Sink{ID: slackSink, Kind: "slack_app", BotToken: slack.Token, SigningSecret: signing, Channel: "C0INCIDENTS"},
		mirror.Sink{ID: hookSink, Kind: "webhook", URL: hook.URL})
	agent.postResultsTo(e.col.HTTP, key)
	byKey := map[string]string{"X-API-Key": key}

	began := time.Now()
	storm := startErrorStorm(t, []string{e.col.HTTP}, key, stormServices, stormEvents, stormDuration)

	// (c) The on-call presses Acknowledge in Slack while the storm goes on.
	var incs map[string]incidentSummary
	require.Eventually(t, func() bool {
		incs = byFingerprint(t, listIncidents(t, e.col.HTTP, prj, "", byKey))
		return len(incs) == len(stormServices)
	}, 30*time.Second, 100*time.Millisecond, "three services in error never made three incidents")
	ack := incs["payments"]
	require.NotEmpty(t, ack.ID, "an incident per service: %+v", incs)
	require.Eventually(t, func() bool { return slackRoot(slack, ack.ID) != nil }, 30*time.Second, 50*time.Millisecond,
		"the incident's root message was never posted to Slack")

	// The on-call reads the agent's first finding, then takes the incident.
	require.Eventually(t, func() bool { return answeredTimes(agent.answered(), ack.ID, "opened") > 0 },
		groupWait+20*time.Second, 50*time.Millisecond, "no opening call after group_wait")
	press := slackButton(t, "incident_acknowledge", ack.ID, "alice")
	forged := postSlack(t, e.col.HTTP, prj, slackSink, "not-the-signing-secret", time.Now(), press)
	assert.Equal(t, http.StatusUnauthorized, forged.StatusCode, "%s", forged.Body)
	assert.Equal(t, "signature_invalid", errorCode(t, forged))
	stale := postSlack(t, e.col.HTTP, prj, slackSink, signing, time.Now().Add(-6*time.Minute), press)
	assert.Equal(t, http.StatusUnauthorized, stale.StatusCode, "a signed request older than 5 minutes is a replay: %s", stale.Body)
	assert.Equal(t, "signature_invalid", errorCode(t, stale))
	unchanged := getIncident(t, e.col.HTTP, prj, ack.ID, byKey)
	assert.Equal(t, "open", unchanged.Status, "a refused interaction changes nothing")
	assert.Empty(t, unchanged.AcknowledgedBy, "a refused interaction changes nothing")

	pressed := time.Now()
	r := postSlack(t, e.col.HTTP, prj, slackSink, signing, time.Now(), press)
	require.Equal(t, http.StatusOK, r.StatusCode, "%s", r.Body)
	require.Less(t, time.Since(pressed), 3*time.Second, "Slack wants its answer within 3 s")
	require.Eventually(t, func() bool {
		d := getIncident(t, e.col.HTTP, prj, ack.ID, byKey)
		return d.Status == "acknowledged" && d.AcknowledgedBy == "slack:alice"
	}, time.Second, 20*time.Millisecond, "the button press did not acknowledge the incident within a second: %+v",
		getIncident(t, e.col.HTTP, prj, ack.ID, byKey).incidentSummary)
	require.Eventually(t, func() bool {
		u := slackLastUpdate(slack, slackRoot(slack, ack.ID))
		return strings.Contains(slackField(u, "Acknowledged by"), "alice") && strings.Contains(slackField(u, "Status"), "acknowledged")
	}, 10*time.Second, 50*time.Millisecond, "the root message never showed who acknowledged it")
	t.Logf("acknowledged from Slack %s into the storm", pressed.Sub(began).Round(100*time.Millisecond))

	// (a) The storm's end: every event counted and reported to the agent.
	sent, failed := storm.wait()
	require.Zero(t, failed, "every storm request must be accepted")
	total := 0
	for _, n := range sent {
		total += n
	}
	require.Equal(t, stormEvents, total)
	require.Eventually(t, func() bool {
		incs = byFingerprint(t, listIncidents(t, e.col.HTTP, prj, "", byKey))
		for _, svc := range stormServices {
			i := incs[svc]
			if i.Counts.Events != int64(sent[svc]) || i.Counts.NewEvents != 0 {
				return false
			}
		}
		return true
	}, groupInterval+30*time.Second, 200*time.Millisecond, "the incidents never counted and reported every event; sent %v, incidents %+v", sent, incs)
	require.Len(t, incs, len(stormServices), "one incident per service")

	answered := agent.answered()
	require.Empty(t, repeatedRequestIDs(answered), "a call the agent answered was made again")
	calls := callsOf(answered)
	for _, svc := range stormServices {
		inc := incs[svc]
		cs := calls[inc.ID]
		require.NotEmpty(t, cs, "%s: no calls", svc)
		require.Equal(t, 1, answeredTimes(answered, inc.ID, "opened"), "%s: one opening call: %+v", svc, cs)
		assert.Equal(t, "opened", cs[0].Reason, "%s: the first call is the opening one", svc)
		var reported int
		for i, c := range cs {
			reported += c.Sent + c.LeftOut
			assert.Contains(t, []string{"opened", "updated"}, c.Reason, "%s: call %d", svc, i)
			if i > 0 {
				gap := c.At.Sub(cs[i-1].At)
				assert.GreaterOrEqual(t, gap, groupInterval-callSlack, "%s: calls %d and %d only %s apart (group_interval %s)", svc, i-1, i, gap, groupInterval)
			}
		}
		// Opened ~5 s in, then at most one per 20 s while events keep coming: 3 updates
		// over a 60 s storm, and one more for the last events.
		assert.LessOrEqual(t, len(cs), 1+int(stormDuration/groupInterval)+1, "%s: calls %d", svc, len(cs))
		assert.Equal(t, sent[svc], reported, "%s: every event reaches the agent once, in a call or counted as left out", svc)
		assert.Empty(t, repeatedEvents(t, cs), "%s: events carried by two calls", svc)
		assert.Equal(t, int64(sent[svc]), cs[len(cs)-1].Events, "%s: the last call's counts are the incident's", svc)
		assert.Equal(t, int64(len(cs)), inc.Counts.Calls, "%s: the calls the incident counts are those the agent got", svc)
		t.Logf("%s: %s, %d events, %d calls at %v", svc, inc.ID, inc.Counts.Events, len(cs), offsets(cs, began))
	}

	// The Slack channel: one root per incident, every result in its thread, the root
	// updated in place to the incident's final counts.
	roots := slackRoots(slack)
	require.Len(t, roots, len(stormServices), "one root message per incident")
	require.Eventually(t, func() bool {
		results := agent.resultsPosted()
		for _, svc := range stormServices {
			inc := incs[svc]
			root := slackRoot(slack, inc.ID)
			if root == nil {
				return false
			}
			replies := slackReplyTexts(slack, root)
			for _, c := range calls[inc.ID] {
				text, ok := results[c.RequestID]
				if !ok || !slices.ContainsFunc(replies, func(r string) bool { return strings.Contains(r, text) }) {
					return false
				}
			}
			u := slackLastUpdate(slack, root)
			if slackField(u, "Events") != strconv.Itoa(sent[svc]) {
				return false
			}
		}
		return true
	}, 20*time.Second, 100*time.Millisecond, "every result is a reply in its incident's thread and the roots show the final counts")
	for _, svc := range stormServices {
		d := getIncident(t, e.col.HTTP, prj, incs[svc].ID, byKey)
		assert.Contains(t, d.LastResult, "analysis ", "%s: the last result is attached to the incident", svc)
	}

	// (b) A resolving event resolves its service's incident only.
	resolving := incs["checkout"]
	errorLogs(t, e.col.HTTP, key, map[string]int{"checkout": 1}, 9, map[string]string{"alert.state": "resolved"})
	require.Eventually(t, func() bool {
		return getIncident(t, e.col.HTTP, prj, resolving.ID, byKey).Status == "resolved"
	}, 20*time.Second, 50*time.Millisecond, "the resolving event never resolved the incident")
	for _, svc := range []string{"payments", "search"} {
		assert.NotEqual(t, "resolved", getIncident(t, e.col.HTTP, prj, incs[svc].ID, byKey).Status, "%s is not resolved by checkout's event", svc)
	}
	require.Eventually(t, func() bool {
		for _, n := range hook.notices() {
			if n.Type == "incident.resolved" && n.Incident.ID == resolving.ID && n.Incident.Status == "resolved" && n.ProjectID == prj {
				return true
			}
		}
		return false
	}, 20*time.Second, 50*time.Millisecond, "the webhook never got incident.resolved")
	require.Eventually(t, func() bool {
		u := slackLastUpdate(slack, slackRoot(slack, resolving.ID))
		return strings.Contains(slackField(u, "Status"), "resolved")
	}, 20*time.Second, 50*time.Millisecond, "the root message never said resolved")
	require.Eventually(t, func() bool {
		return answeredTimes(agent.answered(), resolving.ID, "resolved") > 0
	}, 20*time.Second, 50*time.Millisecond, "the agent is never told that the incident resolved")

	// Within reopen_within, an error reopens the same incident.
	errorLogs(t, e.col.HTTP, key, map[string]int{"checkout": 1}, 17, nil)
	require.Eventually(t, func() bool {
		return getIncident(t, e.col.HTTP, prj, resolving.ID, byKey).Status == "open"
	}, 20*time.Second, 50*time.Millisecond, "an error soon after resolution never reopened the incident")
	list := listIncidents(t, e.col.HTTP, prj, "", byKey)
	assert.Len(t, list, len(stormServices), "reopening makes no new incident: %+v", list)
	assert.Equal(t, resolving.ID, byFingerprint(t, list)["checkout"].ID, "the same incident reopened")
	require.Eventually(t, func() bool {
		for _, n := range hook.notices() {
			if n.Incident.ID == resolving.ID && n.Transition == "reopened" {
				return true
			}
		}
		return false
	}, 20*time.Second, 50*time.Millisecond, "the webhook never heard of the reopening")
	require.Eventually(t, func() bool {
		return strings.Contains(slackField(slackLastUpdate(slack, slackRoot(slack, resolving.ID)), "Status"), "open")
	}, 20*time.Second, 50*time.Millisecond, "the root message never said the incident is open again")
	assert.Len(t, slackRoots(slack), len(stormServices), "a reopened incident keeps its thread")

	// Once only: the hook got each incident's opening and checkout's resolution once (the
	// notices came before the reopening, which it has), the agent one resolved call.
	for _, svc := range stormServices {
		id := incs[svc].ID
		assert.Equal(t, 1, hook.noticeCount(id, "incident.opened"), "%s: incident.opened at the webhook once", svc)
		resolved := 0
		if svc == "checkout" {
			resolved = 1
		}
		assert.Equal(t, resolved, hook.noticeCount(id, "incident.resolved"), "%s: incident.resolved at the webhook", svc)
	}
	assert.Equal(t, 1, answeredTimes(agent.answered(), resolving.ID, "resolved"), "the agent is told once that the incident resolved")
	assert.Empty(t, repeatedRequestIDs(agent.answered()), "a call the agent answered was made again")
}

// offsets are the calls' arrival times since start, for the log.
func offsets(cs []incidentCall, start time.Time) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Reason+"@"+c.At.Sub(start).Round(100*time.Millisecond).String())
	}
	return out
}

// Two pipeline processes share the incidents (events through Redis, state in the KV
// bucket) and the one making an opening call is killed with SIGKILL while the call is in
// flight: still one incident per fingerprint, every event counted once, and each opening
// call answered once, under the request id of the attempt the kill cut off (the other
// process retries the claim the dead one left, as the same call).
func TestIncidentTwoPipelinesKill9(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	nt := testenv.StartNATS(t)
	js, m := connectMirror(t, nt.URL())
	prj := "inc-kill-" + randomSuffix()
	vars := map[string]string{"NATS_URL": nt.URL(), "SVC_OUTBOUND_ALLOW": "127.0.0.0/8", "SVC_STREAM_REPLICAS": "1",
		"REDIS_URL": "redis://127.0.0.1:6379/11", "SVC_INCIDENT_CLAIM_TIMEOUT": "5s", "SVC_PIPELINE_ACK_WAIT": "5s"}
	receiver := testenv.StartCollector(t, testenv.CollectorOptions{Config: "configs/receiver.yaml", Env: vars})
	pipelines := []*testenv.Collector{
		testenv.StartCollector(t, testenv.CollectorOptions{Config: "configs/pipeline.yaml", Env: vars}),
		testenv.StartCollector(t, testenv.CollectorOptions{Config: "configs/pipeline.yaml", Env: vars}),
	}
	pids := []int{pipelines[0].Pid(), pipelines[1].Pid()}
	agent := startIncidentAgent(t)
	// Opening calls take 3 s to answer, so the kill lands while they are in flight.
	agent.setHold(func(reason string) time.Duration {
		if reason == "opened" {
			return 3 * time.Second
		}
		return 0
	})
	e := &env{nats: nt, col: receiver, js: js, m: m}
	key := e.deliveryProject(t, prj, incidentPipeline(agent.URL), nil)
	agent.postResultsTo(receiver.HTTP, key)
	byKey := map[string]string{"X-API-Key": key}

	storm := startErrorStorm(t, []string{receiver.HTTP}, key, stormServices, 3000, 20*time.Second)
	// The process to kill is the one whose connection the opening call came on (the agent
	// holds it open for 3 s meanwhile).
	var victim *testenv.Collector
	var first incidentCall
	for deadline := time.After(60 * time.Second); victim == nil; {
		select {
		case c := <-agent.arrived:
			if c.Reason != "opened" {
				continue
			}
			pid := callerPid(t, c.From, agent.URL, pids)
			require.NotZero(t, pid, "the opening call from %s came from neither pipeline process %v", c.From, pids)
			first, victim = c, pipelines[slices.Index(pids, pid)]
		case <-deadline:
			t.Fatal("no opening call within a minute")
		}
	}
	t.Logf("opening call %s of %s arrived from pid %d; kill -9 it", first.RequestID, first.IncidentID, victim.Pid())
	victim.Kill()
	require.Eventually(t, func() bool {
		return slices.ContainsFunc(agent.cutOff(), func(c incidentCall) bool { return c.RequestID == first.RequestID })
	}, 10*time.Second, 20*time.Millisecond, "the opening call in flight was not cut off by the kill: no takeover tested")
	sent, failed := storm.wait()
	require.Zero(t, failed)

	// Done when every batch is acknowledged (the killed process's redelivered after the
	// ack wait), so the counts below are final.
	cons, err := js.Consumer(ctx, streams.RawStream(prj), "svc-pipeline")
	require.NoError(t, err)
	var incs map[string]incidentSummary
	require.Eventually(t, func() bool {
		ci, err := cons.Info(ctx)
		if err != nil || ci.NumPending != 0 || ci.NumAckPending != 0 {
			return false
		}
		incs = byFingerprint(t, listIncidents(t, receiver.HTTP, prj, "", byKey))
		if len(incs) != len(stormServices) {
			return false
		}
		answered := agent.answered()
		for _, svc := range stormServices {
			if answeredTimes(answered, incs[svc].ID, "opened") == 0 || incs[svc].Counts.Calls == 0 || incs[svc].Counts.Events < int64(sent[svc]) {
				return false
			}
		}
		return true
	}, 90*time.Second, 200*time.Millisecond, "every incident's opening call must be made (by the surviving process) and every event counted (the killed one's batches redelivered); sent %v, incidents %+v", sent, incs)

	answered, cut := agent.answered(), agent.cutOff()
	assert.Empty(t, repeatedRequestIDs(answered), "a call the agent answered was made again")
	for _, svc := range stormServices {
		inc := incs[svc]
		assert.Equal(t, 1, answeredTimes(answered, inc.ID, "opened"), "%s: the opening call answered once, whoever made it: %+v", svc, callsOf(answered)[inc.ID])
		assert.Equal(t, int64(sent[svc]), inc.Counts.Events, "%s: every event counted once", svc)
	}
	for _, c := range cut {
		retried := slices.ContainsFunc(answered, func(a incidentCall) bool {
			return a.RequestID == c.RequestID && a.IncidentID == c.IncidentID && a.Reason == c.Reason
		})
		assert.True(t, retried, "the %s call %s of %s cut off by the kill was not answered under the same request id; answered: %+v",
			c.Reason, c.RequestID, c.IncidentID, callsOf(answered)[c.IncidentID])
	}
	list := listIncidents(t, receiver.HTTP, prj, "", byKey)
	assert.Len(t, list, len(stormServices), "one incident per fingerprint: %+v", list)
	t.Logf("calls cut off by the kill: %d; sent %v", len(cut), sent)
}

// Only owners and admins act on incidents: a member's console token (from the control
// plane) is refused and changes nothing; the owner's acknowledges. The slack_app
// destination is made through the API and shows where Slack must post.
func TestIncidentActionsNeedOwnerOrAdmin(t *testing.T) {
	t.Parallel()
	e := startEmbedded(t, nil)
	receiverURL := "https://in.example.com"
	cp := testenv.StartControlPlane(t, map[string]string{"NATS_URL": e.col.EmbeddedNATSURL(), "SVC_DATA_DIR": t.TempDir(),
		"SVC_OUTBOUND_ALLOW": "127.0.0.0/8", "SVC_PUBLIC_RECEIVER_URL": receiverURL})
	agent := startIncidentAgent(t)

	status, out := api(t, "POST", cp.URL+"/api/v1/auth/signup", "", map[string]string{"email": "owner@example.com", "password": "correct horse battery staple"})
	require.Equal(t, http.StatusCreated, status, "%v", out)
	owner := out["token"].(string)
	status, out = api(t, "POST", cp.URL+"/api/v1/auth/signup", "", map[string]string{"email": "member@example.com", "password": "correct horse battery staple"})
	require.Equal(t, http.StatusCreated, status, "%v", out)
	member := out["token"].(string)
	status, out = api(t, "POST", cp.URL+"/api/v1/projects", owner, map[string]string{"name": "incidents"})
	require.Equal(t, http.StatusCreated, status, "%v", out)
	prj := out["id"].(string)
	base := cp.URL + "/api/v1/projects/" + prj
	status, out = api(t, "POST", base+"/members", owner, map[string]string{"email": "member@example.com", "role": "member"})
	require.Equal(t, http.StatusCreated, status, "%v", out)
	// It sends, posts the agent's results and reads the console (read).
	status, out = api(t, "POST", base+"/keys", owner, map[string]any{"name": "ingest", "scopes": []string{"ingest", "results", "read"}})
	require.Equal(t, http.StatusCreated, status, "%v", out)
	key := out["key"].(string)
	status, out = api(t, "PUT", base+"/pipeline", owner, map[string]any{"mode": "incident", "agent_endpoint_url": agent.URL, "group_wait": "1s"})
	require.Equal(t, http.StatusOK, status, "%v", out)
	assert.Equal(t, "incident", out["mode"])
	assert.Equal(t, false, out["window_enabled"])
	status, out = api(t, "POST", base+"/sinks", owner, map[string]any{"kind": "slack_app", "bot_token": "xoxb-1-secret-bot", "signing_secret": "slack-signing-secret-1234", "channel": "C0INCIDENTS"})
	require.Equal(t, http.StatusCreated, status, "%v", out)
	assert.Equal(t, receiverURL+"/slack/interactions/"+prj+"/"+out["id"].(string), out["interactions_url"])
	assert.NotContains(t, out, "xoxb-1-secret-bot")
	status, out = api(t, "GET", base+"/sinks/"+out["id"].(string), member, nil)
	require.Equal(t, http.StatusOK, status, "%v", out)
	assert.Equal(t, "[redacted]", out["bot_token"], "a saved bot token is never shown again")
	assert.Equal(t, "[redacted]", out["signing_secret"])

	agent.postResultsTo(e.col.HTTP, key)
	waitAccepted(t, e.col.HTTP, key)
	require.Equal(t, http.StatusAccepted, post(t, e.col.HTTP+"/v1/events", key, "application/json", []byte(`{"error":"disk full"}`), nil).StatusCode)
	byKey := map[string]string{"X-API-Key": key}
	var inc incidentSummary
	require.Eventually(t, func() bool {
		l := listIncidents(t, e.col.HTTP, prj, "", byKey)
		if len(l) == 1 {
			inc = l[0]
		}
		return len(l) == 1
	}, 20*time.Second, 50*time.Millisecond, "the event never opened an incident")

	consoleTokenOf := func(login string) string {
		status, out := api(t, "POST", base+"/console-token", login, nil)
		require.Equal(t, http.StatusOK, status, "%v", out)
		return out["token"].(string)
	}
	act := func(token, action string) response {
		return post(t, e.col.HTTP+"/console/v1/projects/"+prj+"/incidents/"+inc.ID+"/"+action, "", "application/json", []byte(`{}`), bearer(token))
	}
	memberTok := consoleTokenOf(member)
	require.Eventually(t, func() bool {
		return get(t, e.col.HTTP+"/console/v1/projects/"+prj+"/incidents", bearer(memberTok)).StatusCode == http.StatusOK
	}, 10*time.Second, 50*time.Millisecond, "the receiver never took the control plane's console tokens")
	for _, a := range []string{"acknowledge", "resolve", "mute", "reinvestigate"} {
		r := act(memberTok, a)
		assert.Equal(t, http.StatusForbidden, r.StatusCode, "a member may not %s: %s", a, r.Body)
		assert.Equal(t, "forbidden", errorCode(t, r))
	}
	r := post(t, e.col.HTTP+"/console/v1/projects/"+prj+"/incidents/"+inc.ID+"/acknowledge", key, "application/json", []byte(`{}`), nil)
	assert.Equal(t, http.StatusForbidden, r.StatusCode, "an API key reads incidents, never acts: %s", r.Body)
	d := getIncident(t, e.col.HTTP, prj, inc.ID, bearer(memberTok))
	assert.Equal(t, "open", d.Status, "refused actions change nothing")
	assert.Empty(t, d.AcknowledgedBy)

	r = act(consoleTokenOf(owner), "acknowledge")
	require.Equal(t, http.StatusOK, r.StatusCode, "%s", r.Body)
	d = getIncident(t, e.col.HTTP, prj, inc.ID, byKey)
	assert.Equal(t, "acknowledged", d.Status)
	assert.Equal(t, "user:owner@example.com", d.AcknowledgedBy, "acknowledged by the owner, named by the email on the console token")
}
