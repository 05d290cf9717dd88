package e2e

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/apikey"
	"github.com/otelcol-svc/otelcol-svc/internal/consoletoken"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
	"github.com/otelcol-svc/otelcol-svc/internal/webhooksig"
)

// The delivery log as the console reads it (docs/contract.md#section-11).
type delivery struct {
	ID           string          `json:"id"`
	Kind         string          `json:"kind"`
	SinkID       string          `json:"sink_id"`
	RequestID    string          `json:"request_id"`
	State        string          `json:"state"`
	Attempts     int             `json:"attempts"`
	StatusCode   int             `json:"status_code"`
	Error        string          `json:"error"`
	Records      int             `json:"records"`
	ReplayOf     string          `json:"replay_of"`
	ReplayedBy   string          `json:"replayed_by"`
	Unmatched    bool            `json:"unmatched"`
	RequestBody  json.RawMessage `json:"request_body"`
	ResponseBody json.RawMessage `json:"response_body"`
	AttemptLog   []struct {
		StatusCode int    `json:"status_code"`
		Error      string `json:"error"`
	} `json:"attempt_log"`
}

type ledgerAnswer struct {
	Received     int64 `json:"received"`
	Dropped      int64 `json:"dropped"`
	AgentCalls   int64 `json:"agent_calls"`
	Results      int64 `json:"results"`
	Delivered    int64 `json:"delivered"`
	DeadLettered int64 `json:"dead_lettered"`
	Pending      int64 `json:"pending"`
	Unmatched    int64 `json:"unmatched"`
	Balanced     bool  `json:"balanced"`
}

func listDeliveries(t *testing.T, base, project, query string, h map[string]string) []delivery {
	t.Helper()
	r := get(t, base+"/console/v1/projects/"+project+"/deliveries"+query, h)
	require.Equal(t, http.StatusOK, r.StatusCode, "%s", r.Body)
	var out struct {
		Deliveries []delivery `json:"deliveries"`
	}
	require.NoError(t, json.Unmarshal(r.Body, &out), "%s", r.Body)
	require.NotNil(t, out.Deliveries, "deliveries is a list, never null: %s", r.Body)
	return out.Deliveries
}

func getDelivery(t *testing.T, base, project, id string, h map[string]string) delivery {
	t.Helper()
	r := get(t, base+"/console/v1/projects/"+project+"/deliveries/"+id, h)
	require.Equal(t, http.StatusOK, r.StatusCode, "%s", r.Body)
	var d delivery
	require.NoError(t, json.Unmarshal(r.Body, &d), "%s", r.Body)
	return d
}

func readLedger(t *testing.T, base, project string, h map[string]string) ledgerAnswer {
	t.Helper()
	r := get(t, base+"/console/v1/projects/"+project+"/ledger", h)
	require.Equal(t, http.StatusOK, r.StatusCode, "%s", r.Body)
	var l ledgerAnswer
	require.NoError(t, json.Unmarshal(r.Body, &l), "%s", r.Body)
	return l
}

// deliveryProject publishes a project with an agent, destinations and members (user id →
// role), and returns its API key.
func (e *env) deliveryProject(t *testing.T, id string, p mirror.Pipeline, members map[string]string, sinks ...mirror.Sink) string {
	t.Helper()
	grants := map[string]int64{}
	for u := range members {
		grants[u] = 1
	}
	since := time.Now().UTC()
	for i := range sinks {
		sinks[i].Enabled, sinks[i].Since = true, since
	}
	require.NoError(t, e.m.PutProject(context.Background(), mirror.Project{ID: id, Version: 1, Pipeline: p,
		SigningSecret: webhooksig.NewSecret(), Members: grants, Roles: members, Sinks: sinks}))
	key := apikey.Generate(apikey.KindProject)
	require.NoError(t, e.m.PutKey(context.Background(), apikey.Hash(key), mirror.KeyEntry{KeyID: "k-" + id, ProjectID: id, Scope: mirror.ScopeProject}))
	waitAccepted(t, e.col.HTTP, key)
	return key
}

func userToken(t *testing.T, priv ed25519.PrivateKey, user, project string) map[string]string {
	t.Helper()
	tok, err := consoletoken.Issue(priv, consoletoken.Claims{UserID: user, ProjectID: project, Grant: 1}, 5*time.Minute, time.Now())
	require.NoError(t, err)
	return map[string]string{"Authorization": "Bearer " + tok}
}

func replayDeliveries(t *testing.T, base, project, body string, h map[string]string) response {
	t.Helper()
	hh := map[string]string{"Content-Type": "application/json"}
	for k, v := range h {
		hh[k] = v
	}
	return send(t, http.MethodPost, base+"/console/v1/projects/"+project+"/deliveries/replay", []byte(body), hh)
}

// An agent that answers 404: the call is dead-lettered with what was sent and answered;
// once the agent is fixed an owner replays it, the agent gets the same records once under
// a new request id, the dead letter stays, and the ledger adds up before and after.
func TestDeadLetteredCallIsShownAndReplayedOnce(t *testing.T) {
	e := startEmbedded(t, nil)
	priv := e.consoleKeys(t)
	agent := startAgent(t)
	var fixed atomic.Bool
	agent.setRespond(func(int, *http.Request) (int, time.Duration) {
		if fixed.Load() {
			return http.StatusOK, 0
		}
		return http.StatusNotFound, 0
	})
	const prj = "dlv-replay"
	key := e.deliveryProject(t, prj, mirror.Pipeline{AgentEndpointURL: agent.URL, BatchSize: 10},
		map[string]string{"u_owner": "owner", "u_member": "member"})
	byKey := map[string]string{"X-API-Key": key}
	for i := range 3 {
		r := post(t, e.col.HTTP+"/v1/events", key, "application/json", fmt.Appendf(nil, `{"n":%d}`, i), nil)
		require.Equal(t, http.StatusAccepted, r.StatusCode, "%s", r.Body)
	}
	pipelineSettled(t, e.js, prj)

	var dead []delivery
	require.Eventually(t, func() bool {
		dead = listDeliveries(t, e.col.HTTP, prj, "?state=dead_lettered&kind=agent", byKey)
		return len(dead) > 0
	}, 20*time.Second, 50*time.Millisecond, "the refused call is never shown dead-lettered")
	records := 0
	for _, d := range dead {
		full := getDelivery(t, e.col.HTTP, prj, d.ID, byKey)
		assert.Equal(t, http.StatusNotFound, full.StatusCode)
		assert.Equal(t, "agent", full.Kind)
		assert.Equal(t, d.ID, full.RequestID, "an agent call's delivery is named by its request id")
		assert.Contains(t, string(full.RequestBody), `{"n":`, "the body sent")
		assert.Contains(t, string(full.ResponseBody), "accepted", "the agent's answer")
		require.NotEmpty(t, full.AttemptLog)
		assert.Equal(t, http.StatusNotFound, full.AttemptLog[0].StatusCode)
		records += full.Records
	}
	require.Equal(t, 3, records)
	require.Eventually(t, func() bool {
		l := readLedger(t, e.col.HTTP, prj, byKey)
		return l.Balanced && l.Received == 3 && l.DeadLettered == 3 && l.Pending == 0
	}, 20*time.Second, 50*time.Millisecond, "the ledger before the replay: %+v", readLedger(t, e.col.HTTP, prj, byKey))

	// Only owners and admins replay, with a console token.
	r := replayDeliveries(t, e.col.HTTP, prj, `{"state":"dead_lettered"}`, byKey)
	assert.Equal(t, http.StatusForbidden, r.StatusCode, "an API key does not replay: %s", r.Body)
	r = replayDeliveries(t, e.col.HTTP, prj, `{"state":"dead_lettered"}`, userToken(t, priv, "u_member", prj))
	assert.Equal(t, http.StatusForbidden, r.StatusCode, "a member does not replay: %s", r.Body)
	r = replayDeliveries(t, e.col.HTTP, prj, `{"state":"everything"}`, userToken(t, priv, "u_owner", prj))
	assert.Equal(t, http.StatusBadRequest, r.StatusCode, "%s", r.Body)
	assert.Empty(t, agent.delivered(), "nothing was sent by refused replays")

	fixed.Store(true)
	r = replayDeliveries(t, e.col.HTTP, prj, `{"state":"dead_lettered","kind":"agent"}`, userToken(t, priv, "u_owner", prj))
	require.Equal(t, http.StatusAccepted, r.StatusCode, "%s", r.Body)
	var answer struct {
		Replayed int `json:"replayed"`
	}
	require.NoError(t, json.Unmarshal(r.Body, &answer))
	require.Equal(t, len(dead), answer.Replayed)

	require.Eventually(t, func() bool {
		return len(listDeliveries(t, e.col.HTTP, prj, "?state=delivered&kind=agent", byKey)) == len(dead)
	}, 30*time.Second, 50*time.Millisecond, "the replays were never delivered")
	old := map[string]bool{}
	for _, d := range dead {
		old[d.ID] = true
	}
	seen := map[string]int{}
	for _, c := range agent.delivered() {
		require.False(t, old[c.Header.Get("X-Request-Id")], "a replay is a new call with a new request id")
		var recs []json.RawMessage
		require.NoError(t, json.Unmarshal(c.Body, &recs))
		for _, rec := range recs {
			seen[string(rec)]++
		}
	}
	assert.Equal(t, map[string]int{`{"n":0}`: 1, `{"n":1}`: 1, `{"n":2}`: 1}, seen, "the same records, once")
	for _, d := range listDeliveries(t, e.col.HTTP, prj, "?state=delivered&kind=agent", byKey) {
		assert.True(t, old[d.ReplayOf], "the replay names the call it replays: %+v", d)
	}
	// Replaying all dead letters again sends nothing: each is superseded by its replay.
	require.Eventually(t, func() bool {
		for _, d := range listDeliveries(t, e.col.HTTP, prj, "?state=dead_lettered", byKey) {
			full := getDelivery(t, e.col.HTTP, prj, d.ID, byKey)
			if full.ReplayedBy == "" {
				return false
			}
		}
		return true
	}, 20*time.Second, 50*time.Millisecond, "the replayed dead letters are never marked replayed_by")
	r = replayDeliveries(t, e.col.HTTP, prj, `{"state":"dead_lettered"}`, userToken(t, priv, "u_owner", prj))
	require.Equal(t, http.StatusAccepted, r.StatusCode, "%s", r.Body)
	require.NoError(t, json.Unmarshal(r.Body, &answer))
	assert.Zero(t, answer.Replayed, "dead letters already replayed are not sent again: %s", r.Body)
	// The evidence stays: the dead letters are still on the dead-letter stream.
	assert.Len(t, streamMsgs(t, e.js, streams.DeadLetterStream(prj)), len(dead))
	require.Eventually(t, func() bool {
		l := readLedger(t, e.col.HTTP, prj, byKey)
		return l.Balanced && l.Received == 3 && l.DeadLettered == 0 && l.AgentCalls == 3 && l.Pending == 0
	}, 20*time.Second, 50*time.Millisecond, "the ledger after the replay: %+v", readLedger(t, e.col.HTTP, prj, byKey))
}

// A webhook down for a while: its delivery shows retrying with the attempt log, then
// delivered; the other destination's delivery is not held back.
func TestWebhookDownShowsRetryingThenDelivered(t *testing.T) {
	e := startEmbedded(t, map[string]string{"SVC_SINK_RETRY_INITIAL_INTERVAL": "50ms", "SVC_SINK_RETRY_MAX_INTERVAL": "200ms"})
	down, up := startAgent(t), startAgent(t)
	var back atomic.Bool
	down.setRespond(func(int, *http.Request) (int, time.Duration) {
		if back.Load() {
			return http.StatusOK, 0
		}
		return http.StatusServiceUnavailable, 0
	})
	const prj = "dlv-retry"
	key := e.deliveryProject(t, prj, mirror.Pipeline{}, nil,
		mirror.Sink{ID: "s_down", Kind: "webhook", URL: down.URL},
		mirror.Sink{ID: "s_up", Kind: "webhook", URL: up.URL})
	byKey := map[string]string{"X-API-Key": key}
	postResult(t, e.col.HTTP, key, "req_retry", `{"text":"disk full"}`)

	var retrying delivery
	require.Eventually(t, func() bool {
		for _, d := range listDeliveries(t, e.col.HTTP, prj, "?kind=sink&state=retrying", byKey) {
			if d.SinkID == "s_down" {
				retrying = d
				return d.Attempts >= 2
			}
		}
		return false
	}, 20*time.Second, 20*time.Millisecond, "the failing destination's delivery is never shown retrying")
	full := getDelivery(t, e.col.HTTP, prj, retrying.ID, byKey)
	require.GreaterOrEqual(t, len(full.AttemptLog), 2)
	assert.Equal(t, http.StatusServiceUnavailable, full.AttemptLog[0].StatusCode)
	require.Eventually(t, func() bool { return len(up.delivered()) == 1 }, 20*time.Second, 20*time.Millisecond,
		"the other destination waits for the failing one")
	// The log is written a moment after the delivery (the writer lingers): the other
	// destination's delivery shows delivered while the failing one is still retrying.
	require.Eventually(t, func() bool {
		for _, d := range listDeliveries(t, e.col.HTTP, prj, "?kind=sink", byKey) {
			if d.SinkID == "s_up" {
				return d.State == "delivered"
			}
		}
		return false
	}, 10*time.Second, 20*time.Millisecond, "the other destination's delivery shows delivered")
	assert.Equal(t, "retrying", getDelivery(t, e.col.HTTP, prj, retrying.ID, byKey).State, "the failing one still retries meanwhile")

	back.Store(true)
	require.Eventually(t, func() bool {
		return getDelivery(t, e.col.HTTP, prj, retrying.ID, byKey).State == "delivered"
	}, 20*time.Second, 20*time.Millisecond, "the destination came back but the delivery never shows delivered")
	assert.Len(t, down.delivered(), 1)
}

// A result under a request id the service never issued is delivered and shown unmatched;
// one under a real call's id appears in that call's trace, from the record on.
func TestUnmatchedResultsAndTraceOfARecord(t *testing.T) {
	e := startEmbedded(t, nil)
	hook := startAgent(t)
	agent := startAgent(t)
	const prj = "dlv-trace"
	key := e.deliveryProject(t, prj, mirror.Pipeline{AgentEndpointURL: agent.URL, BatchSize: 10}, nil,
		mirror.Sink{ID: "s_hook", Kind: "webhook", URL: hook.URL})
	byKey := map[string]string{"X-API-Key": key}
	r := post(t, e.col.HTTP+"/v1/events", key, "application/json", []byte(`{"alert":"disk"}`), nil)
	require.Equal(t, http.StatusAccepted, r.StatusCode, "%s", r.Body)
	require.Eventually(t, func() bool { return len(agent.delivered()) == 1 }, 20*time.Second, 20*time.Millisecond)
	callID := agent.delivered()[0].Header.Get("X-Request-Id")
	postResult(t, e.col.HTTP, key, callID, `{"text":"answer"}`)
	postResult(t, e.col.HTTP, key, "req_00000000000000000000000000000000", `{"text":"made up"}`)
	require.Eventually(t, func() bool { return len(hook.delivered()) == 2 }, 20*time.Second, 20*time.Millisecond)

	require.Eventually(t, func() bool {
		n := 0
		for _, d := range listDeliveries(t, e.col.HTTP, prj, "?kind=sink&state=delivered", byKey) {
			if d.RequestID == "req_00000000000000000000000000000000" && d.Unmatched {
				n++
			}
			if d.RequestID == callID && !d.Unmatched {
				n++
			}
		}
		return n == 2
	}, 20*time.Second, 20*time.Millisecond, "the made-up result is not shown unmatched, or the real one is")
	require.Eventually(t, func() bool { return readLedger(t, e.col.HTTP, prj, byKey).Unmatched == 1 }, 20*time.Second, 50*time.Millisecond)

	var trace struct {
		Record *struct {
			Seq uint64 `json:"seq"`
		} `json:"record"`
		Call *struct {
			ID        string `json:"id"`
			RequestID string `json:"request_id"`
		} `json:"call"`
		Results []struct {
			RequestID string `json:"request_id"`
		} `json:"results"`
		Deliveries []struct {
			SinkID string `json:"sink_id"`
			State  string `json:"state"`
		} `json:"deliveries"`
	}
	tr := get(t, e.col.HTTP+"/console/v1/projects/"+prj+"/trace?seq=1", byKey)
	require.Equal(t, http.StatusOK, tr.StatusCode, "%s", tr.Body)
	require.NoError(t, json.Unmarshal(tr.Body, &trace))
	require.NotNil(t, trace.Record)
	require.NotNil(t, trace.Call, "%s", tr.Body)
	assert.Equal(t, callID, trace.Call.RequestID)
	require.Len(t, trace.Results, 1, "%s", tr.Body)
	require.Len(t, trace.Deliveries, 1, "%s", tr.Body)
	assert.Equal(t, "s_hook", trace.Deliveries[0].SinkID)
	assert.Equal(t, "delivered", trace.Deliveries[0].State)
	tr = get(t, e.col.HTTP+"/console/v1/projects/"+prj+"/trace?request_id="+callID, byKey)
	require.Equal(t, http.StatusOK, tr.StatusCode, "%s", tr.Body)
	assert.True(t, strings.Contains(string(tr.Body), `"s_hook"`), "%s", tr.Body)
}

// Project A's key or console token never reads, traces or replays project B's deliveries.
func TestDeliveriesAreTenantIsolated(t *testing.T) {
	e := startEmbedded(t, nil)
	priv := e.consoleKeys(t)
	agent := startAgent(t)
	agent.setRespond(func(int, *http.Request) (int, time.Duration) { return http.StatusNotFound, 0 })
	keyA := e.deliveryProject(t, "dlv-a", mirror.Pipeline{AgentEndpointURL: agent.URL}, map[string]string{"u_a": "owner"})
	keyB := e.deliveryProject(t, "dlv-b", mirror.Pipeline{AgentEndpointURL: agent.URL}, map[string]string{"u_b": "owner"})
	r := post(t, e.col.HTTP+"/v1/events", keyB, "application/json", []byte(`{"secret":"b"}`), nil)
	require.Equal(t, http.StatusAccepted, r.StatusCode)
	var dead []delivery
	require.Eventually(t, func() bool {
		dead = listDeliveries(t, e.col.HTTP, "dlv-b", "?state=dead_lettered", map[string]string{"X-API-Key": keyB})
		return len(dead) == 1
	}, 20*time.Second, 50*time.Millisecond)
	bID := dead[0].ID
	for name, h := range map[string]map[string]string{
		"A's key":   {"X-API-Key": keyA},
		"A's token": userToken(t, priv, "u_a", "dlv-a"),
	} {
		for _, path := range []string{"/deliveries", "/deliveries/" + bID, "/ledger", "/trace?request_id=" + bID, "/trace?seq=1"} {
			r := get(t, e.col.HTTP+"/console/v1/projects/dlv-b"+path, h)
			assert.Equal(t, http.StatusNotFound, r.StatusCode, "%s reading B%s: %s", name, path, r.Body)
			assert.NotContains(t, string(r.Body), "secret", name)
		}
		r := replayDeliveries(t, e.col.HTTP, "dlv-b", `{"ids":["`+bID+`"]}`, h)
		assert.Equal(t, http.StatusNotFound, r.StatusCode, "%s replaying B's: %s", name, r.Body)
		// B's delivery id under A's path is unknown to A.
		r = get(t, e.col.HTTP+"/console/v1/projects/dlv-a/deliveries/"+bID, h)
		assert.Equal(t, http.StatusNotFound, r.StatusCode, "%s: %s", name, r.Body)
		r = replayDeliveries(t, e.col.HTTP, "dlv-a", `{"ids":["`+bID+`"]}`, userToken(t, priv, "u_a", "dlv-a"))
		if r.StatusCode == http.StatusAccepted {
			var a struct {
				Replayed int `json:"replayed"`
			}
			require.NoError(t, json.Unmarshal(r.Body, &a))
			assert.Zero(t, a.Replayed, "A replayed B's delivery through its own path")
		}
	}
	assert.Equal(t, 1, agent.attempts(), "B's call made once, never replayed by A")
}
