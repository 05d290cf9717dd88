package main

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/consoletoken"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// bearer adds a token to every request, as an agent's MCP client configured with a header.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

func mcpSession(t *testing.T, cpURL, token string) (*mcp.ClientSession, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "1.0.0"}, nil)
	hc := &http.Client{Timeout: 10 * time.Second}
	if token != "" {
		hc.Transport = bearer{token}
	}
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: cpURL + "/mcp", HTTPClient: hc, MaxRetries: -1}, nil)
	if err == nil {
		t.Cleanup(func() { _ = cs.Close() })
	}
	return cs, err
}

// tool calls a tool and returns its structured output (or, for a tool error, its text).
func tool(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (out map[string]any, errText string) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	require.NoError(t, err, name)
	var text strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text.WriteString(tc.Text)
		}
	}
	if res.IsError {
		return nil, text.String()
	}
	b, err := json.Marshal(res.StructuredContent)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &out), "%s: %s", name, b)
	return out, ""
}

func TestMCPTools(t *testing.T) {
	databases(t, func(t *testing.T, db map[string]string) {
		s := startSourceStack(t, db)
		cp := s.cp.URL
		owner, ownerID := s.signup(t, "agent-owner@example.com")
		member, _ := s.signup(t, "agent-member@example.com")
		stranger, _ := s.signup(t, "agent-stranger@example.com")
		pid := call(t, cp, "POST", "/api/v1/projects", owner, map[string]string{"name": "agent"}).str("id")
		require.Equal(t, http.StatusCreated, call(t, cp, "POST", "/api/v1/projects/"+pid+"/members", owner, map[string]string{"email": "agent-member@example.com"}).Status)
		require.Equal(t, http.StatusOK, call(t, cp, "PUT", "/api/v1/projects/"+pid+"/pipeline", owner, map[string]any{"agent_endpoint_url": "https://agent.example.com/hook"}).Status)

		cs, err := mcpSession(t, cp, owner)
		require.NoError(t, err)

		// The tools an agent sees, each described well enough to act on.
		tools, err := cs.ListTools(context.Background(), nil)
		require.NoError(t, err)
		var names []string
		for _, tl := range tools.Tools {
			names = append(names, tl.Name)
			assert.NotEmpty(t, tl.Description, tl.Name)
			raw, _ := json.Marshal(tl.InputSchema)
			// Portable: no type unions such as ["null", "string"], which strict clients
			// (and model APIs that take tool schemas) refuse.
			assert.NotRegexp(t, `"type":\s*\[`, string(raw), "%s's input schema has a type union", tl.Name)
			var schema struct {
				Properties map[string]struct{ Description string }
				Required   []string
			}
			require.NoError(t, json.Unmarshal(raw, &schema))
			for name, p := range schema.Properties {
				assert.NotEmpty(t, p.Description, "%s: %s is described", tl.Name, name)
			}
			if tl.Name != "list_projects" && tl.Name != "get_usage" { // get_usage without a project is the account's
				assert.Contains(t, schema.Required, "project_id", tl.Name)
			}
		}
		sort.Strings(names)
		assert.Equal(t, []string{"audit_list", "console_deliveries", "console_delivery", "console_dry_run", "console_fields", "console_incident", "console_incident_action", "console_incidents", "console_ledger", "console_recent_events", "console_replay", "console_trace",
			"create_source", "delete_source", "get_console_token", "get_pipeline", "get_usage", "invite_member", "list_invitations", "list_projects", "list_sources", "process_backlog", "rotate_source_secret", "set_pipeline", "test_source"}, names)

		projects, _ := tool(t, cs, "list_projects", map[string]any{})
		assert.Equal(t, []any{map[string]any{"id": pid, "name": "agent", "role": "owner"}}, projects["projects"])

		// Try the mapping first, then create the source.
		spec := githubSource("github")
		sample := map[string]any{"action": "opened", "repo": map[string]any{"name": "acme/api"}, "created_at": "2024-05-01T12:00:00Z"}
		tested, errText := tool(t, cs, "test_source", map[string]any{"project_id": pid, "source": spec, "payload": sample})
		require.Empty(t, errText)
		assert.Equal(t, []any{}, tested["warnings"])
		assert.Equal(t, "opened", tested["event_type"])
		env := tested["envelope"].(map[string]any)
		assert.Equal(t, "acme/api: opened", env["text"])
		assert.NotContains(t, env, "payload", "tools never return payloads")

		args := map[string]any{"project_id": pid}
		for k, v := range spec {
			args[k] = v
		}
		created, errText := tool(t, cs, "create_source", args)
		require.Empty(t, errText)
		apiKey, ingestURL, id := created["api_key"].(string), created["ingest_url"].(string), created["id"].(string)
		assert.True(t, strings.HasPrefix(ingestURL, testReceiverURL+"/ingest/in_"), ingestURL)
		assert.Equal(t, ingestURL, testReceiverURL+"/ingest/"+created["ingest_key"].(string))
		assert.Contains(t, created["curl"], ingestURL)
		assert.Contains(t, created["curl"], "Authorization: Bearer "+apiKey)
		_, errText = tool(t, cs, "create_source", args)
		assert.Contains(t, errText, "conflict", "the name is taken")
		_, errText = tool(t, cs, "create_source", map[string]any{"project_id": pid, "name": "bad", "text_template": "{oops"})
		assert.Contains(t, errText, "text_template", "validation names the field")

		// The saved source tests the same; a payload that does not fit gets warnings.
		tested, errText = tool(t, cs, "test_source", map[string]any{"project_id": pid, "source_id": id, "payload": map[string]any{"repo": map[string]any{}}})
		require.Empty(t, errText)
		assert.Len(t, tested["warnings"], 5, "%v", tested["warnings"])

		listed, _ := tool(t, cs, "list_sources", map[string]any{"project_id": pid})
		require.Len(t, listed["sources"], 1)
		raw, _ := json.Marshal(listed)
		assert.NotContains(t, string(raw), apiKey, "the key is shown only when created")
		assert.Equal(t, ingestURL, listed["sources"].([]any)[0].(map[string]any)["ingest_url"])
		// The API sees what the tools did: it is the same store.
		assert.Len(t, call(t, cp, "GET", "/api/v1/projects/"+pid+"/sources", owner, nil).Body["sources"], 1)

		// set_pipeline: refused like PUT /pipeline, with the field and the parser's position.
		_, errText = tool(t, cs, "set_pipeline", map[string]any{"project_id": pid, "trigger": `event["_event_type"] === "opened"`})
		assert.Contains(t, errText, "invalid_pipeline")
		assert.Contains(t, errText, "trigger:")
		assert.Regexp(t, regexp.MustCompile(`\d+:\d+`), errText)
		pl, _ := tool(t, cs, "get_pipeline", map[string]any{"project_id": pid})
		assert.Equal(t, "", pl["trigger"], "nothing changed")
		pl, errText = tool(t, cs, "set_pipeline", map[string]any{"project_id": pid, "trigger": `event["_event_type"] == "opened"`, "group_key": `event["labels"]["repo"]`})
		require.Empty(t, errText)
		assert.Equal(t, `event["_event_type"] == "opened"`, pl["trigger"])
		assert.Equal(t, "https://agent.example.com/hook", pl["agent_endpoint_url"], "fields left out keep their value")
		assert.NotContains(t, pl, "signing_secret")
		api := call(t, cp, "GET", "/api/v1/projects/"+pid+"/pipeline", owner, nil)
		assert.Equal(t, `event["_event_type"] == "opened"`, api.str("trigger"))
		assert.Equal(t, `event["labels"]["repo"]`, api.str("group_key"))

		ct, errText := tool(t, cs, "get_console_token", map[string]any{"project_id": pid})
		require.Empty(t, errText)
		claims, err := consoletoken.Verify(publishedConsoleKeys(t, s.nats.URL()), ct["token"].(string), time.Now())
		require.NoError(t, err)
		assert.Equal(t, ownerID, claims.UserID)
		assert.Equal(t, testReceiverURL+"/console/v1/projects/"+pid+"/events", ct["events_url"])
		assert.Equal(t, testReceiverURL+"/console/v1/projects/"+pid+"/fields", ct["fields_url"])

		// Access rules are the API's: a member reads but cannot change; a stranger does not
		// see the project at all.
		ms, err := mcpSession(t, cp, member)
		require.NoError(t, err)
		_, errText = tool(t, ms, "list_sources", map[string]any{"project_id": pid})
		assert.Empty(t, errText)
		_, errText = tool(t, ms, "delete_source", map[string]any{"project_id": pid, "source_id": id})
		assert.Contains(t, errText, "forbidden")
		ss, err := mcpSession(t, cp, stranger)
		require.NoError(t, err)
		for _, c := range []struct {
			name string
			args map[string]any
		}{
			{"list_sources", map[string]any{"project_id": pid}},
			{"delete_source", map[string]any{"project_id": pid, "source_id": id}},
			{"create_source", map[string]any{"project_id": pid, "name": "x"}},
			{"get_console_token", map[string]any{"project_id": pid}},
			{"get_usage", map[string]any{"project_id": pid}},
			{"set_pipeline", map[string]any{"project_id": pid, "trigger": ""}},
		} {
			_, errText := tool(t, ss, c.name, c.args)
			assert.Equal(t, "not_found: project not found", errText, c.name)
			c.args["project_id"] = "p_0000000000000000"
			_, missing := tool(t, ss, c.name, c.args)
			assert.Equal(t, missing, errText, "%s: exactly what a project that does not exist answers", c.name)
		}

		_, errText = tool(t, cs, "delete_source", map[string]any{"project_id": pid, "source_id": id})
		require.Empty(t, errText)
		listed, _ = tool(t, cs, "list_sources", map[string]any{"project_id": pid})
		assert.Empty(t, listed["sources"])
		_, errText = tool(t, cs, "delete_source", map[string]any{"project_id": pid, "source_id": id})
		assert.Contains(t, errText, "not_found")
	})
}

func TestMCPNeedsAToken(t *testing.T) {
	s := startSourceStack(t, map[string]string{"SVC_DATA_DIR": t.TempDir()})
	_, err := mcpSession(t, s.cp.URL, "")
	assert.Error(t, err, "no token, no session")
	_, err = mcpSession(t, s.cp.URL, "not-a-token")
	assert.Error(t, err, "a bad token, no session")

	r := call(t, s.cp.URL, "POST", "/mcp", "", map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
	assert.Equal(t, http.StatusUnauthorized, r.Status)
	assert.Equal(t, "invalid_token", r.code(), "the contract's error shape: %s", r.Raw)
}

// An agent's whole loop: create a source through MCP, post to
// the URL it returned, see the event through the receiver's console API with the token
// the tools gave, then delete the source and see its URL stop working.
func TestMCPAgentLoop(t *testing.T) {
	n := testenv.StartNATS(t)
	col := testenv.StartCollector(t, testenv.CollectorOptions{Config: "configs/receiver.yaml",
		Env: map[string]string{"NATS_URL": n.URL(), "SVC_STREAM_REPLICAS": "1"}})
	cp := testenv.StartControlPlane(t, map[string]string{"NATS_URL": n.URL(), "SVC_JWT_SECRET": testJWTSecret,
		"SVC_DATA_DIR": t.TempDir(), "SVC_PUBLIC_RECEIVER_URL": col.HTTP})
	s := &stack{nats: n, cp: cp}
	token, _ := s.signup(t, "loop@example.com")
	pid := call(t, cp.URL, "POST", "/api/v1/projects", token, map[string]string{"name": "loop"}).str("id")
	cs, err := mcpSession(t, cp.URL, token)
	require.NoError(t, err)
	tools, err := cs.ListTools(context.Background(), nil)
	require.NoError(t, err)
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	assert.Subset(t, names, []string{"create_source", "test_source"})

	args := map[string]any{"project_id": pid}
	for k, v := range githubSource("github") {
		args[k] = v
	}
	created, errText := tool(t, cs, "create_source", args)
	require.Empty(t, errText)
	ingestURL, apiKey := created["ingest_url"].(string), created["api_key"].(string)
	require.True(t, strings.HasPrefix(ingestURL, col.HTTP+"/ingest/"), ingestURL)
	tested, errText := tool(t, cs, "test_source", map[string]any{"project_id": pid, "source_id": created["id"],
		"payload": map[string]any{"action": "opened", "repo": map[string]any{"name": "acme/api"}, "created_at": "2024-05-01T12:00:00Z"}})
	require.Empty(t, errText)
	assert.Empty(t, tested["warnings"], "the label mapping fits the sample")

	post := func(key string) int {
		req, _ := http.NewRequest("POST", ingestURL, strings.NewReader(`{"action":"opened","repo":{"name":"acme/api"},"created_at":"2024-05-01T12:00:00Z"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	require.Eventually(t, func() bool { return post(apiKey) == http.StatusAccepted }, 2*time.Second, 20*time.Millisecond,
		"the new source's URL takes posts with its key")
	assert.Equal(t, http.StatusUnauthorized, post("osi_not-the-key"), "and only with its key")

	ct, errText := tool(t, cs, "get_console_token", map[string]any{"project_id": pid})
	require.Empty(t, errText)
	var events []map[string]any
	require.Eventually(t, func() bool {
		req, _ := http.NewRequest("GET", ct["events_url"].(string), nil)
		req.Header.Set("Authorization", "Bearer "+ct["token"].(string))
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var body struct{ Events []map[string]any }
		if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&body) != nil {
			return false
		}
		events = body.Events
		return len(events) > 0
	}, 10*time.Second, 100*time.Millisecond, "the event shows in the console's recent events")
	rec := events[0]["record"].(map[string]any)
	assert.Equal(t, "opened", rec["_event_type"])
	assert.Equal(t, "github", rec["_source"])
	assert.Equal(t, "acme/api: opened", rec["text"])
	assert.Equal(t, map[string]any{"repo": "acme/api"}, rec["labels"])

	_, errText = tool(t, cs, "delete_source", map[string]any{"project_id": pid, "source_id": created["id"]})
	require.Empty(t, errText)
	require.Eventually(t, func() bool { return post(apiKey) != http.StatusAccepted }, time.Second, 10*time.Millisecond,
		"a deleted source's URL stops taking posts within a second")
}
