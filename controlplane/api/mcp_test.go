package api

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/controlplane/auth"
	"github.com/otelcol-svc/otelcol-svc/controlplane/service"
	"github.com/otelcol-svc/otelcol-svc/controlplane/store"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
)

type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

const testReceiverURL = "https://ingest.example.com"

// mcpServer serves the API over SQLite (no NATS: the tools used here only read, or
// only issue console tokens) with project p_1 of owner u_1, admin u_2 and member u_3,
// and u_4 in no project. It returns a connector of MCP clients as those users.
func mcpServer(t *testing.T) (connect func(userID string) *mcp.ClientSession, consoleKey ed25519.PublicKey) {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, t.TempDir(), "")
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	now := time.Now()
	require.NoError(t, st.InTx(ctx, func(tx *store.Tx) error {
		for _, id := range []string{"u_1", "u_2", "u_3", "u_4"} {
			if err := tx.CreateUser(ctx, store.User{ID: id, Email: id + "@example.com", PasswordHash: "x", CreatedAt: now}); err != nil {
				return err
			}
		}
		if err := tx.CreateProject(ctx, store.Project{ID: "p_1", Name: "one", OwnerID: "u_1", Version: 1, CreatedAt: now, UpdatedAt: now}); err != nil {
			return err
		}
		if err := tx.PutMember(ctx, "p_1", "u_2", store.RoleAdmin); err != nil {
			return err
		}
		return tx.PutMember(ctx, "p_1", "u_3", store.RoleMember)
	}))
	tokens, err := auth.NewTokens([]byte("test-secret-test-secret-test-secret-0123"), time.Hour)
	require.NoError(t, err)
	pub, priv, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	s := &Server{Tokens: tokens, Logger: logger, Svc: &service.Service{Store: st, Logger: logger,
		ConsoleKey: priv, ReceiverURL: testReceiverURL,
		Mirror: func(context.Context) (*mirror.Store, jetstream.JetStream, error) {
			return nil, nil, errors.New("no NATS in this test")
		}}}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return func(userID string) *mcp.ClientSession {
		tok, err := tokens.Issue(userID, userID+"@example.com", now)
		require.NoError(t, err)
		client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
		cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp",
			HTTPClient: &http.Client{Transport: bearerTransport{tok}, Timeout: 10 * time.Second}, MaxRetries: -1}, nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = cs.Close() })
		return cs
	}, pub
}

// mcpClient is an MCP client as the owner of project p_1.
func mcpClient(t *testing.T) *mcp.ClientSession {
	connect, _ := mcpServer(t)
	return connect("u_1")
}

// An agent's sample payload holds ids as big as a snowflake id: the preview must show
// what ingest would store, digit for digit, not the nearest float64.
func TestMCPTestSourceKeepsBigNumbers(t *testing.T) {
	cs := mcpClient(t)
	const id = "1234567890123456789" // not representable as a float64
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "test_source", Arguments: json.RawMessage(
		`{"project_id": "p_1", "source": {"name": "orders", "labels": {"order": "order.id"}, "text_template": "order {order.id}"},
		  "payload": {"order": {"id": ` + id + `}}}`)})
	require.NoError(t, err)
	require.False(t, res.IsError, "%+v", res.Content)
	var out struct {
		Envelope struct {
			Labels map[string]string `json:"labels"`
			Text   string            `json:"text"`
		} `json:"envelope"`
		Warnings []string `json:"warnings"`
	}
	b, err := json.Marshal(res.StructuredContent)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &out), "%s", b)
	assert.Empty(t, out.Warnings)
	assert.Equal(t, id, out.Envelope.Labels["order"])
	assert.Equal(t, "order "+id, out.Envelope.Text)

	// Agents still see payload as an object in the tool's input schema.
	tools, err := cs.ListTools(context.Background(), nil)
	require.NoError(t, err)
	for _, tl := range tools.Tools {
		if tl.Name != "test_source" {
			continue
		}
		raw, _ := json.Marshal(tl.InputSchema)
		var schema struct {
			Properties map[string]struct {
				Type        any    `json:"type"`
				Description string `json:"description"`
			} `json:"properties"`
		}
		require.NoError(t, json.Unmarshal(raw, &schema))
		assert.Equal(t, "object", schema.Properties["payload"].Type, "%s", raw)
		assert.NotEmpty(t, schema.Properties["payload"].Description)
	}

	// Not an object: refused, naming the field.
	res, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "test_source",
		Arguments: json.RawMessage(`{"project_id": "p_1", "source": {"name": "x"}, "payload": [1]}`)})
	require.NoError(t, err)
	assert.True(t, res.IsError)
}

// Every tool's schemas, input and output, are portable: no "type" array anywhere (a
// nullable union such as ["null", "string"]), which function-calling dialects that take
// one type refuse. Walked as JSON, so nested properties, items and $defs count too.
func TestMCPSchemasHaveNoTypeUnions(t *testing.T) {
	cs := mcpClient(t)
	tools, err := cs.ListTools(context.Background(), nil)
	require.NoError(t, err)
	require.NotEmpty(t, tools.Tools)
	for _, tl := range tools.Tools {
		for what, sc := range map[string]any{"input": tl.InputSchema, "output": tl.OutputSchema} {
			raw, err := json.Marshal(sc)
			require.NoError(t, err)
			var doc any
			require.NoError(t, json.Unmarshal(raw, &doc))
			for _, path := range typeArrays(doc, "") {
				t.Errorf("%s's %s schema has a type union at %s: %s", tl.Name, what, path, raw)
			}
		}
		assert.NotNil(t, tl.OutputSchema, "%s answers structured content with a schema", tl.Name)
	}
}

// typeArrays lists the JSON paths under doc where "type" is an array.
func typeArrays(doc any, path string) []string {
	var out []string
	switch v := doc.(type) {
	case map[string]any:
		for k, sub := range v {
			if _, isArray := sub.([]any); k == "type" && isArray {
				out = append(out, path+"/type")
			}
			out = append(out, typeArrays(sub, path+"/"+k)...)
		}
	case []any:
		for i, sub := range v {
			out = append(out, typeArrays(sub, fmt.Sprintf("%s/%d", path, i))...)
		}
	}
	return out
}

// An empty list is answered as [] (what the output schema says), not null: the SDK
// checks every answer against the schema, so a null would fail the call itself.
func TestMCPEmptyListsAreEmptyArrays(t *testing.T) {
	cs := mcpClient(t)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "list_sources", Arguments: map[string]any{"project_id": "p_1"}})
	require.NoError(t, err)
	require.False(t, res.IsError, "%+v", res.Content)
	b, err := json.Marshal(res.StructuredContent)
	require.NoError(t, err)
	assert.JSONEq(t, `{"sources": []}`, string(b))
}
