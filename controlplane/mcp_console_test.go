package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// consoleDo makes the request a console tool answered, exactly as given (method, url,
// headers, body), as an agent would, and returns the receiver's status and JSON answer.
func consoleDo(t *testing.T, out map[string]any) (int, map[string]any) {
	t.Helper()
	var body io.Reader
	if b, ok := out["body"]; ok {
		raw, err := json.Marshal(b)
		require.NoError(t, err)
		body = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(out["method"].(string), out["url"].(string), body)
	require.NoError(t, err)
	for k, v := range out["headers"].(map[string]any) {
		req.Header.Set(k, v.(string))
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var answer map[string]any
	raw, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(raw, &answer)
	return resp.StatusCode, answer
}

// An agent works a project through MCP as a person does in the dashboard: it sees the
// event it posted, the fields, a dry run of a pipeline over it, the deliveries, the
// ledger and the record's trace, all by making the requests the console tools answer
// at the real receiver, with its user's rights: a member's replay is refused before any
// token is issued, the owner's reaches the receiver.
func TestMCPConsoleToolsAtTheReceiver(t *testing.T) {
	n := testenv.StartNATS(t)
	startValidator(t, n.URL())
	col := testenv.StartCollector(t, testenv.CollectorOptions{Config: "configs/receiver.yaml",
		Env: map[string]string{"NATS_URL": n.URL(), "SVC_STREAM_REPLICAS": "1"}})
	cp := testenv.StartControlPlane(t, map[string]string{"NATS_URL": n.URL(), "SVC_JWT_SECRET": testJWTSecret,
		"SVC_DATA_DIR": t.TempDir(), "SVC_PUBLIC_RECEIVER_URL": col.HTTP})
	s := &stack{nats: n, cp: cp}
	owner, _ := s.signup(t, "console-owner@example.com")
	member, _ := s.signup(t, "console-member@example.com")
	pid := call(t, cp.URL, "POST", "/api/v1/projects", owner, map[string]string{"name": "console"}).str("id")
	require.Equal(t, http.StatusCreated, call(t, cp.URL, "POST", "/api/v1/projects/"+pid+"/members", owner, map[string]string{"email": "console-member@example.com"}).Status)
	cs, err := mcpSession(t, cp.URL, owner)
	require.NoError(t, err)

	args := map[string]any{"project_id": pid}
	for k, v := range githubSource("github") {
		args[k] = v
	}
	created, errText := tool(t, cs, "create_source", args)
	require.Empty(t, errText)
	sourceID := created["id"].(string)
	require.Eventually(t, func() bool {
		req, _ := http.NewRequest("POST", created["ingest_url"].(string), strings.NewReader(`{"action":"opened","repo":{"name":"acme/api"},"created_at":"2024-05-01T12:00:00Z"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+created["api_key"].(string))
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode == http.StatusAccepted
	}, 2*time.Second, 20*time.Millisecond)

	// Recent events, through the request the tool answered.
	recent, errText := tool(t, cs, "console_recent_events", map[string]any{"project_id": pid, "source_id": sourceID, "limit": 10})
	require.Empty(t, errText)
	assert.Equal(t, "GET", recent["method"])
	var events []any
	require.Eventually(t, func() bool {
		status, answer := consoleDo(t, recent)
		events, _ = answer["events"].([]any)
		return status == http.StatusOK && len(events) == 1
	}, 10*time.Second, 100*time.Millisecond, "the posted event shows")
	ev := events[0].(map[string]any)
	assert.Equal(t, "opened", ev["record"].(map[string]any)["_event_type"])
	seq := ev["seq"].(float64)

	fields, errText := tool(t, cs, "console_fields", map[string]any{"project_id": pid})
	require.Empty(t, errText)
	status, answer := consoleDo(t, fields)
	require.Equal(t, http.StatusOK, status, "%v", answer)
	assert.Contains(t, mustJSON(t, answer), `"_event_type"`)

	// A dry run of a pipeline not saved: the event matches, and the body the agent would
	// get is the dry run's answer, not the control plane's.
	dry, errText := tool(t, cs, "console_dry_run", map[string]any{"project_id": pid, "limit": 10,
		"pipeline": map[string]any{"trigger": `event["_event_type"] == "opened"`, "agent_endpoint_url": "https://agent.example.com/hook"}})
	require.Empty(t, errText)
	assert.Equal(t, "POST", dry["method"])
	status, answer = consoleDo(t, dry)
	require.Equal(t, http.StatusOK, status, "%v", answer)
	assert.Equal(t, float64(1), answer["evaluated"])
	assert.Equal(t, float64(1), answer["matched"])
	assert.Len(t, answer["calls"], 1)
	// An invalid one is refused by the data plane with the field.
	dry, errText = tool(t, cs, "console_dry_run", map[string]any{"project_id": pid, "pipeline": map[string]any{"trigger": `event["x"] ===`}})
	require.Empty(t, errText)
	status, answer = consoleDo(t, dry)
	assert.Equal(t, http.StatusBadRequest, status)
	assert.Contains(t, mustJSON(t, answer), "invalid_pipeline")

	for _, c := range []struct {
		tool string
		args map[string]any
		key  string
	}{
		{"console_deliveries", map[string]any{"state": "dead_lettered"}, "deliveries"},
		{"console_ledger", map[string]any{}, "received"},
	} {
		c.args["project_id"] = pid
		out, errText := tool(t, cs, c.tool, c.args)
		require.Empty(t, errText, c.tool)
		status, answer := consoleDo(t, out)
		require.Equal(t, http.StatusOK, status, "%s: %v", c.tool, answer)
		assert.Contains(t, answer, c.key, c.tool)
	}
	trace, errText := tool(t, cs, "console_trace", map[string]any{"project_id": pid, "seq": seq})
	require.Empty(t, errText)
	status, answer = consoleDo(t, trace)
	// No pipeline ever called an agent here, so there is nothing to follow the record to:
	// the receiver took the request and said so (not a malformed query).
	assert.Equal(t, http.StatusNotFound, status, "%v", answer)
	assert.Contains(t, mustJSON(t, answer), "nothing to trace")

	// Replay: a member is told who may, and gets no request; the owner's request reaches
	// the receiver, which skips an id it does not know.
	ms, err := mcpSession(t, cp.URL, member)
	require.NoError(t, err)
	_, errText = tool(t, ms, "console_replay", map[string]any{"project_id": pid, "ids": []string{"d_unknown"}})
	assert.Contains(t, errText, "owner or an admin")
	replay, errText := tool(t, cs, "console_replay", map[string]any{"project_id": pid, "ids": []string{"d_unknown"}})
	require.Empty(t, errText)
	status, answer = consoleDo(t, replay)
	require.Equal(t, http.StatusAccepted, status, "%v", answer)
	assert.Equal(t, float64(0), answer["replayed"])
	assert.Len(t, answer["skipped"], 1)
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}
