package api

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/controlplane/auth"
	"github.com/otelcol-svc/otelcol-svc/controlplane/service"
	"github.com/otelcol-svc/otelcol-svc/controlplane/store"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/validationresponder"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/validation"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// guardrailServer serves the API with a real mirror (in-process NATS) and the data
// plane's own pipeline check, for the owner of p_1; it returns the API's URL, a token and
// an MCP session.
func guardrailServer(t *testing.T) (string, string, *mcp.ClientSession) {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, t.TempDir(), "")
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	now := time.Now()
	require.NoError(t, st.InTx(ctx, func(tx *store.Tx) error {
		if err := tx.CreateUser(ctx, store.User{ID: "u_1", Email: "owner@example.com", PasswordHash: "x", CreatedAt: now}); err != nil {
			return err
		}
		return tx.CreateProject(ctx, store.Project{ID: "p_1", Name: "one", OwnerID: "u_1", Version: 1, CreatedAt: now, UpdatedAt: now})
	}))
	n := testenv.StartNATS(t)
	_, js := testenv.Connect(t, n.URL())
	ms, err := mirror.Open(ctx, js, 1)
	require.NoError(t, err)
	tokens, err := auth.NewTokens([]byte("test-secret-test-secret-test-secret-0123"), time.Hour)
	require.NoError(t, err)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	s := &Server{Tokens: tokens, Logger: logger, Svc: &service.Service{Store: st, Logger: logger,
		Mirror: func(context.Context) (*mirror.Store, jetstream.JetStream, error) { return ms, js, nil },
		CheckPipeline: func(_ context.Context, p mirror.Pipeline) (validation.Result, error) {
			return validationresponder.Check(p), nil
		}}}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	tok, err := tokens.Issue("u_1", "owner@example.com", now)
	require.NoError(t, err)
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp",
		HTTPClient: &http.Client{Transport: bearerTransport{tok}, Timeout: 10 * time.Second}, MaxRetries: -1}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	return srv.URL, tok, cs
}

func putPipelineJSON(t *testing.T, base, tok, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPut, base+"/api/v1/projects/p_1/pipeline", bytes.NewBufferString(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	return resp.StatusCode, out
}

func TestPipelineGuardrailsThroughAPIAndMCP(t *testing.T) {
	base, tok, cs := guardrailServer(t)

	status, body := putPipelineJSON(t, base, tok, `{"trigger":"severity_number >= 17"}`)
	require.Equal(t, http.StatusOK, status, "%v", body)
	for _, f := range []string{"cooldown_seconds", "max_calls_per_minute", "max_calls_per_day", "window_max_bytes", "window_max_events"} {
		assert.EqualValues(t, 0, body[f], "%s: off (or the default budget) unless set", f)
	}
	assert.Equal(t, "", body["dedup_key"])

	for field, req := range map[string]string{
		"cooldown_seconds":     `{"cooldown_seconds": 86401}`,
		"dedup_key":            `{"cooldown_seconds": 60, "dedup_key": "resource_attributes[\"k8s.pod.name\""}`,
		"max_calls_per_minute": `{"max_calls_per_minute": -1}`,
		"window_max_bytes":     `{"window_enabled": true, "window_max_bytes": 10}`,
		"window_max_events":    `{"window_enabled": true, "window_max_events": 1000000}`,
	} {
		status, body := putPipelineJSON(t, base, tok, req)
		require.Equal(t, http.StatusBadRequest, status, "%s: %v", field, body)
		e, _ := body["error"].(map[string]any)
		require.NotNil(t, e, "the contract's error shape: %v", body)
		assert.Equal(t, "invalid_pipeline", e["code"])
		assert.True(t, strings.HasPrefix(e["message"].(string), field+": "), "%s: %v", field, e["message"])
	}

	status, body = putPipelineJSON(t, base, tok, `{"window_enabled": true, "group_key": "traceId", "cooldown_seconds": 60,
		"dedup_key": "resource_attributes[\"k8s.pod.name\"]", "max_calls_per_minute": 5, "max_calls_per_day": 200,
		"window_max_bytes": 100000, "window_max_events": 300}`)
	require.Equal(t, http.StatusOK, status, "%v", body)
	assert.EqualValues(t, 60, body["cooldown_seconds"])
	assert.Equal(t, `resource_attributes["k8s.pod.name"]`, body["dedup_key"])
	assert.EqualValues(t, 5, body["max_calls_per_minute"])
	assert.EqualValues(t, 200, body["max_calls_per_day"])
	assert.EqualValues(t, 100000, body["window_max_bytes"])
	assert.EqualValues(t, 300, body["window_max_events"])

	// The MCP tool changes one guardrail and keeps the others; a bad one changes nothing.
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "set_pipeline",
		Arguments: json.RawMessage(`{"project_id": "p_1", "cooldown_seconds": 30}`)})
	require.NoError(t, err)
	require.False(t, res.IsError, "%+v", res.Content)
	out, _ := json.Marshal(res.StructuredContent)
	var got map[string]any
	require.NoError(t, json.Unmarshal(out, &got))
	assert.EqualValues(t, 30, got["cooldown_seconds"])
	assert.EqualValues(t, 5, got["max_calls_per_minute"], "left out: kept")

	res, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "set_pipeline",
		Arguments: json.RawMessage(`{"project_id": "p_1", "dedup_key": "nope("}`)})
	require.NoError(t, err)
	require.True(t, res.IsError)
	text := res.Content[0].(*mcp.TextContent).Text
	assert.Contains(t, text, "invalid_pipeline: dedup_key: ")
}
