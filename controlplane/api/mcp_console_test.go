package api

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/consoletoken"
	"github.com/otelcol-svc/otelcol-svc/internal/deliverylog"
	"github.com/otelcol-svc/otelcol-svc/internal/incident"
)

// consoleOut is a console tool's answer, or its error text.
type consoleOut struct {
	Method    string            `json:"method"`
	URL       string            `json:"url"`
	Headers   map[string]string `json:"headers"`
	Body      json.RawMessage   `json:"body"`
	ExpiresAt string            `json:"expires_at"`
	How       string            `json:"how"`
	errText   string
}

func consoleCallTool(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) consoleOut {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	require.NoError(t, err, name)
	var out consoleOut
	if res.IsError {
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				out.errText += tc.Text
			}
		}
		return out
	}
	b, err := json.Marshal(res.StructuredContent)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &out), "%s", b)
	return out
}

// Each console tool answers the request a person's dashboard would make, with a console
// token of the caller for that project, and nothing else: the URL, the method and the
// body are the receiver's console API (docs/contract.md#section-11 and #section-12).
func TestMCPConsoleToolsAnswerTheRequest(t *testing.T) {
	connect, pub := mcpServer(t)
	owner := connect("u_1")
	const base = testReceiverURL + "/console/v1/projects/p_1"
	for _, c := range []struct {
		tool   string
		args   map[string]any
		method string
		url    string
		body   string
	}{
		{"console_recent_events", map[string]any{}, "GET", base + "/events", ""},
		{"console_recent_events", map[string]any{"source_id": "src_abc", "limit": 20}, "GET", base + "/events?limit=20&source_id=src_abc", ""},
		{"console_fields", map[string]any{"limit": 1000}, "GET", base + "/fields?limit=1000", ""},
		{"console_dry_run", map[string]any{"pipeline": map[string]any{"trigger": `event["level"] == "error"`, "batch_size": 5}},
			"POST", base + "/pipeline/dry-run", `{"pipeline": {"trigger": "event[\"level\"] == \"error\"", "batch_size": 5}, "limit": 100}`},
		{"console_dry_run", map[string]any{"pipeline": map[string]any{}, "limit": 7}, "POST", base + "/pipeline/dry-run", `{"pipeline": {}, "limit": 7}`},
		{"console_deliveries", map[string]any{"state": "dead_lettered", "kind": "sink", "since": "2026-01-02T03:04:05Z", "limit": 500},
			"GET", base + "/deliveries?kind=sink&limit=500&since=2026-01-02T03%3A04%3A05Z&state=dead_lettered", ""},
		{"console_delivery", map[string]any{"delivery_id": "req_0123-abc"}, "GET", base + "/deliveries/req_0123-abc", ""},
		{"console_ledger", map[string]any{}, "GET", base + "/ledger", ""},
		{"console_trace", map[string]any{"seq": 42}, "GET", base + "/trace?seq=42", ""},
		{"console_trace", map[string]any{"request_id": "req_1"}, "GET", base + "/trace?request_id=req_1", ""},
		{"console_replay", map[string]any{"ids": []string{"d_1", "d_2"}}, "POST", base + "/deliveries/replay", `{"ids": ["d_1", "d_2"]}`},
		{"console_replay", map[string]any{"state": "dead_lettered", "kind": "agent"}, "POST", base + "/deliveries/replay", `{"state": "dead_lettered", "kind": "agent"}`},
		{"console_incidents", map[string]any{}, "GET", base + "/incidents", ""},
		{"console_incidents", map[string]any{"status": "acknowledged", "limit": 200}, "GET", base + "/incidents?limit=200&status=acknowledged", ""},
		{"console_incident", map[string]any{"incident_id": testIncidentID}, "GET", base + "/incidents/" + testIncidentID, ""},
		{"console_incident_action", map[string]any{"incident_id": testIncidentID, "action": "acknowledge"}, "POST", base + "/incidents/" + testIncidentID + "/acknowledge", `{}`},
		{"console_incident_action", map[string]any{"incident_id": testIncidentID, "action": "reinvestigate"}, "POST", base + "/incidents/" + testIncidentID + "/reinvestigate", `{}`},
	} {
		args := map[string]any{"project_id": "p_1"}
		for k, v := range c.args {
			args[k] = v
		}
		out := consoleCallTool(t, owner, c.tool, args)
		require.Empty(t, out.errText, "%s %v", c.tool, c.args)
		assert.Equal(t, c.method, out.Method, c.tool)
		assert.Equal(t, c.url, out.URL, c.tool)
		assert.NotEmpty(t, out.How, c.tool)
		if c.body == "" {
			assert.Empty(t, out.Body, c.tool)
			assert.NotContains(t, out.Headers, "Content-Type", c.tool)
		} else {
			assert.JSONEq(t, c.body, string(out.Body), c.tool)
			assert.Equal(t, "application/json", out.Headers["Content-Type"], c.tool)
		}
		tok, ok := strings.CutPrefix(out.Headers["Authorization"], "Bearer ")
		require.True(t, ok, "%s: %v", c.tool, out.Headers)
		claims, err := consoletoken.Verify([]ed25519.PublicKey{pub}, tok, time.Now())
		require.NoError(t, err, c.tool)
		assert.Equal(t, "u_1", claims.UserID, c.tool)
		assert.Equal(t, "u_1@example.com", claims.Email, "%s: the receiver records actions by the user's email", c.tool)
		assert.Equal(t, "p_1", claims.ProjectID, c.tool)
		expires, err := time.Parse(time.RFC3339, out.ExpiresAt)
		require.NoError(t, err, c.tool)
		assert.WithinDuration(t, time.Now().Add(10*time.Minute), expires, time.Minute, c.tool)
		// The body is one the data plane takes as it is.
		if c.tool == "console_replay" {
			_, err := deliverylog.ParseReplayRequest(out.Body)
			assert.NoError(t, err)
			assert.Len(t, out.Headers["Idempotency-Key"], 32, "a retried replay queues nothing twice")
		}
	}
}

// Arguments are checked as the data plane checks them, before any token is issued, and
// no value can change the request's path or query.
func TestMCPConsoleToolsRefuseBadArguments(t *testing.T) {
	owner := mcpClient(t)
	for _, c := range []struct {
		tool string
		args map[string]any
		says string
	}{
		{"console_recent_events", map[string]any{"limit": 501}, "limit"},
		{"console_recent_events", map[string]any{"limit": 0}, "limit"},
		{"console_recent_events", map[string]any{"source_id": "../../fields"}, "source_id"},
		{"console_recent_events", map[string]any{"source_id": "src_1&limit=9"}, "source_id"},
		{"console_fields", map[string]any{"limit": 1001}, "limit"},
		{"console_dry_run", map[string]any{}, "pipeline"},
		{"console_dry_run", map[string]any{"pipeline": map[string]any{"trigger": "true", "nope": 1}}, "nope"},
		{"console_dry_run", map[string]any{"pipeline": map[string]any{}, "limit": 1001}, "limit"},
		{"console_dry_run", map[string]any{"pipeline": map[string]any{"batch_size": "ten"}}, "batch_size"},
		{"console_deliveries", map[string]any{"state": "lost"}, "state"},
		{"console_deliveries", map[string]any{"kind": "email"}, "kind"},
		{"console_deliveries", map[string]any{"since": "yesterday"}, "since"},
		{"console_deliveries", map[string]any{"limit": 501}, "limit"},
		{"console_delivery", map[string]any{"delivery_id": "d_1/../../ledger"}, "delivery_id"},
		{"console_delivery", map[string]any{"delivery_id": ""}, "delivery_id"},
		{"console_trace", map[string]any{}, "seq"},
		{"console_trace", map[string]any{"seq": 3, "request_id": "req_1"}, "exactly one"},
		{"console_trace", map[string]any{"request_id": "req 1?seq=2"}, "request_id"},
		{"console_replay", map[string]any{}, "ids"},
		{"console_replay", map[string]any{"ids": []string{"d_1"}, "state": "dead_lettered"}, "not both"},
		{"console_replay", map[string]any{"state": "delivered"}, "dead_lettered"},
		{"console_replay", map[string]any{"ids": []string{"d_1", "d 2"}}, "delivery id"},
		{"console_incidents", map[string]any{"status": "closed"}, "status"},
		{"console_incidents", map[string]any{"limit": 201}, "limit"},
		{"console_incident", map[string]any{}, "incident_id"},
		{"console_incident", map[string]any{"incident_id": "inc_abc_1"}, "incident_id"},
		{"console_incident", map[string]any{"incident_id": testIncidentID + "/acknowledge"}, "incident_id"},
		{"console_incident_action", map[string]any{"incident_id": testIncidentID, "action": "delete"}, "action"},
		{"console_incident_action", map[string]any{"incident_id": testIncidentID}, "action"},
		{"console_incident_action", map[string]any{"incident_id": "../deliveries", "action": "resolve"}, "incident_id"},
		{"console_ledger", map[string]any{"project_id": "p_1/../p_2"}, "project_id"},
		{"console_ledger", map[string]any{"project_id": ""}, "project_id"},
	} {
		args := map[string]any{"project_id": "p_1"}
		for k, v := range c.args {
			args[k] = v
		}
		out := consoleCallTool(t, owner, c.tool, args)
		assert.Contains(t, out.errText, c.says, "%s %v", c.tool, c.args)
		assert.Empty(t, out.URL, "%s %v: no request", c.tool, c.args)
	}
}

// Replay changes the project: a member is told it needs the owner or an admin, and gets
// no token; an admin may; someone outside the project learns nothing.
func TestMCPConsoleReplayNeedsOwnerOrAdmin(t *testing.T) {
	connect, _ := mcpServer(t)
	args := map[string]any{"project_id": "p_1", "ids": []string{"d_1"}}
	member := consoleCallTool(t, connect("u_3"), "console_replay", args)
	assert.Contains(t, member.errText, "forbidden")
	assert.Contains(t, member.errText, "owner or an admin")
	assert.Empty(t, member.Headers)

	admin := consoleCallTool(t, connect("u_2"), "console_replay", args)
	require.Empty(t, admin.errText)
	assert.Equal(t, "POST", admin.Method)

	// A member still reads: the read tools answer.
	read := consoleCallTool(t, connect("u_3"), "console_deliveries", map[string]any{"project_id": "p_1", "state": "dead_lettered"})
	require.Empty(t, read.errText)

	stranger := connect("u_4")
	for _, tool := range []string{"console_replay", "console_ledger"} {
		a := map[string]any{"project_id": "p_1", "ids": []string{"d_1"}}
		if tool == "console_ledger" {
			delete(a, "ids")
		}
		theirs := consoleCallTool(t, stranger, tool, a)
		a["project_id"] = "p_0000000000000000"
		missing := consoleCallTool(t, stranger, tool, a)
		assert.Equal(t, "not_found: project not found", theirs.errText, tool)
		assert.Equal(t, missing.errText, theirs.errText, "%s: as for a project that does not exist", tool)
	}
}

// testIncidentID is an incident id as the data plane makes them (incident.ID).
const testIncidentID = "inc_0123456789abcdef0123456789abcdef_2"

// An incident action changes the project: a member is told it needs the owner or an
// admin and gets no token, as for a replay; the member still reads incidents.
func TestMCPIncidentActionNeedsOwnerOrAdmin(t *testing.T) {
	connect, _ := mcpServer(t)
	args := map[string]any{"project_id": "p_1", "incident_id": testIncidentID, "action": "resolve"}
	member := consoleCallTool(t, connect("u_3"), "console_incident_action", args)
	assert.Equal(t, "forbidden: this needs the project's owner or an admin; you are a member, who may read it but not change it", member.errText)
	assert.Empty(t, member.Headers)

	admin := consoleCallTool(t, connect("u_2"), "console_incident_action", args)
	require.Empty(t, admin.errText)
	assert.Equal(t, "POST", admin.Method)
	assert.Equal(t, testReceiverURL+"/console/v1/projects/p_1/incidents/"+testIncidentID+"/resolve", admin.URL)

	for tool, a := range map[string]map[string]any{"console_incidents": {"project_id": "p_1"}, "console_incident": {"project_id": "p_1", "incident_id": testIncidentID}} {
		read := consoleCallTool(t, connect("u_3"), tool, a)
		assert.Empty(t, read.errText, tool)
		assert.Equal(t, "GET", read.Method, tool)
	}
	stranger := consoleCallTool(t, connect("u_4"), "console_incident_action", args)
	assert.Equal(t, "not_found: project not found", stranger.errText)
}

// FuzzConsoleArgs: whatever an agent sends as a console tool's arguments, either it is
// refused or the request stays the tool's own (one path under the project, a query of
// the tool's parameters, a JSON body for POST).
func FuzzConsoleArgs(f *testing.F) {
	for _, s := range []string{`{"limit": 5, "source_id": "src_1"}`, `{"pipeline": {"trigger": "true"}, "limit": 3}`,
		`{"state": "dead_lettered", "kind": "sink", "since": "2026-01-02T03:04:05Z"}`, `{"ids": ["a", "b"]}`,
		`{"delivery_id": "d_%2e%2e"}`, `{"seq": 7}`, `{"request_id": "r"}`, `{"source_id": "a/../b"}`, `{"pipeline": [1]}`,
		`{"status": "open", "limit": 9}`, `{"incident_id": "inc_0123456789abcdef0123456789abcdef_1", "action": "mute"}`,
		`{"incident_id": "inc_0123456789abcdef0123456789abcdef_1/../../ledger", "action": "resolve"}`} {
		for tool := range uint8(11) {
			f.Add(tool, []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, tool uint8, data []byte) {
		var args consoleArgs
		var err error
		wantPath := map[uint8]string{0: "/events", 1: "/fields", 2: "/pipeline/dry-run", 3: "/deliveries", 4: "", 5: "/ledger", 6: "/trace", 7: "/deliveries/replay",
			8: "/incidents", 9: "", 10: ""}
		switch tool % 11 {
		case 0:
			var in recentEventsIn
			err, args = json.Unmarshal(data, &in), in
		case 1:
			var in fieldsIn
			err, args = json.Unmarshal(data, &in), in
		case 2:
			var in dryRunIn
			err, args = json.Unmarshal(data, &in), in
		case 3:
			var in deliveriesIn
			err, args = json.Unmarshal(data, &in), in
		case 4:
			var in deliveryIn
			err, args = json.Unmarshal(data, &in), in
		case 5:
			var in ledgerIn
			err, args = json.Unmarshal(data, &in), in
		case 6:
			var in traceIn
			err, args = json.Unmarshal(data, &in), in
		case 7:
			var in replayIn
			err, args = json.Unmarshal(data, &in), in
		case 8:
			var in incidentsIn
			err, args = json.Unmarshal(data, &in), in
		case 9:
			var in incidentIn
			err, args = json.Unmarshal(data, &in), in
		default:
			var in incidentActionIn
			err, args = json.Unmarshal(data, &in), in
		}
		if err != nil {
			return
		}
		c, err := args.call()
		if err != nil {
			return
		}
		u, err := url.Parse(testReceiverURL + "/console/v1/projects/p_1" + c.path + "?" + c.query.Encode())
		require.NoError(t, err)
		switch in := args.(type) {
		case deliveryIn:
			assert.Equal(t, "/console/v1/projects/p_1/deliveries/"+in.DeliveryID, u.Path)
			assert.True(t, deliveryIDRE.MatchString(in.DeliveryID))
		case incidentIn:
			assert.Equal(t, "/console/v1/projects/p_1/incidents/"+in.IncidentID, u.Path)
			_, _, ok := incident.ParseID(in.IncidentID)
			assert.True(t, ok)
		case incidentActionIn:
			assert.Equal(t, "/console/v1/projects/p_1/incidents/"+in.IncidentID+"/"+in.Action, u.Path)
			assert.Contains(t, incidentActions, in.Action)
			assert.True(t, c.write, "an action needs the owner or an admin")
		default:
			assert.Equal(t, "/console/v1/projects/p_1"+wantPath[tool%11], u.Path)
		}
		assert.Empty(t, u.Fragment)
		for k := range u.Query() {
			assert.Contains(t, []string{"limit", "source_id", "state", "kind", "since", "seq", "request_id", "status"}, k)
		}
		if c.method == "POST" {
			var body map[string]any
			require.NoError(t, json.Unmarshal(c.body, &body), "%s", c.body)
		} else {
			assert.Equal(t, "GET", c.method)
			assert.Nil(t, c.body)
		}
	})
}
