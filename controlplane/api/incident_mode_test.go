package api

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
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

// modeEnv is the API over a real database (SQLite or PostgreSQL) and a real mirror
// (in-process NATS), with the data plane's own pipeline check, for project p_1 of owner
// u_1, admin u_2 and member u_3.
type modeEnv struct {
	base string
	tok  map[string]string // owner, admin, member
	svc  *service.Service
	js   jetstream.JetStream
	mcp  func(who string) *mcp.ClientSession
}

// eachDatabase runs fn with SQLite and with PostgreSQL ("" is SQLite).
func eachDatabase(t *testing.T, fn func(t *testing.T, databaseURL string)) {
	t.Run("sqlite", func(t *testing.T) { fn(t, "") })
	t.Run("postgres", func(t *testing.T) { fn(t, testenv.PostgresURL(t)) })
}

func startModeEnv(t *testing.T, databaseURL string) *modeEnv {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, t.TempDir(), databaseURL)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	now := time.Now()
	users := map[string]string{"owner": "u_1", "admin": "u_2", "member": "u_3"}
	require.NoError(t, st.InTx(ctx, func(tx *store.Tx) error {
		for _, id := range users {
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
	n := testenv.StartNATS(t)
	_, js := testenv.Connect(t, n.URL())
	ms, err := mirror.Open(ctx, js, 1)
	require.NoError(t, err)
	tokens, err := auth.NewTokens([]byte("test-secret-test-secret-test-secret-0123"), time.Hour)
	require.NoError(t, err)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	svc := &service.Service{Store: st, Logger: logger, ReceiverURL: testReceiverURL,
		OutboundAllow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
		Mirror:        func(context.Context) (*mirror.Store, jetstream.JetStream, error) { return ms, js, nil },
		CheckPipeline: func(_ context.Context, p mirror.Pipeline) (validation.Result, error) {
			return validationresponder.Check(p), nil
		}}
	srv := httptest.NewServer((&Server{Tokens: tokens, Logger: logger, Svc: svc}).Handler())
	t.Cleanup(srv.Close)
	e := &modeEnv{base: srv.URL, tok: map[string]string{}, svc: svc, js: js}
	for role, id := range users {
		e.tok[role], err = tokens.Issue(id, id+"@example.com", now)
		require.NoError(t, err)
	}
	e.mcp = func(who string) *mcp.ClientSession {
		client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
		cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp",
			HTTPClient: &http.Client{Transport: bearerTransport{e.tok[who]}, Timeout: 10 * time.Second}, MaxRetries: -1}, nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = cs.Close() })
		return cs
	}
	return e
}

// do makes an API request as who and decodes the answer.
func (e *modeEnv) do(t *testing.T, who, method, path, body string) (int, map[string]any, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = bytes.NewBufferString(body)
	}
	req, err := http.NewRequest(method, e.base+"/api/v1/projects/p_1"+path, rd)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+e.tok[who])
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var out map[string]any
	if len(raw) > 0 {
		require.NoError(t, json.Unmarshal(raw, &out), "%s", raw)
	}
	return resp.StatusCode, out, string(raw)
}

// mirrorEntry is the project's mirror entry as stored, byte for byte.
func (e *modeEnv) mirrorEntry(t *testing.T) []byte {
	t.Helper()
	kv, err := e.js.KeyValue(context.Background(), mirror.BucketProjects)
	require.NoError(t, err)
	entry, err := kv.Get(context.Background(), "p_1")
	require.NoError(t, err)
	return entry.Value()
}

func (e *modeEnv) mirrorPipeline(t *testing.T) (mirror.Pipeline, map[string]json.RawMessage) {
	t.Helper()
	var p struct {
		Pipeline json.RawMessage `json:"pipeline"`
	}
	require.NoError(t, json.Unmarshal(e.mirrorEntry(t), &p))
	var pl mirror.Pipeline
	require.NoError(t, json.Unmarshal(p.Pipeline, &pl))
	var keys map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(p.Pipeline, &keys))
	return pl, keys
}

func errorOf(body map[string]any) (code, message string) {
	e, _ := body["error"].(map[string]any)
	code, _ = e["code"].(string)
	message, _ = e["message"].(string)
	return code, message
}

var incidentKeys = []string{"mode", "fingerprint", "resolve_when", "group_wait", "group_interval", "resolve_after", "reopen_within"}

const (
	fingerprintExpr = `event["labels"]["alertname"]`
	resolveExpr     = `event["status"] == "resolved"`
)

// Incident mode through PUT, PATCH, versions and restore: answers always say the mode
// and carry the incident fields (their defaults in incident mode); the mirror stores
// the mode only for incident mode, so window and legacy entries keep their bytes.
func TestPipelineModeRoundTrip(t *testing.T) {
	eachDatabase(t, func(t *testing.T, databaseURL string) {
		e := startModeEnv(t, databaseURL)

		status, body, raw := e.do(t, "owner", "GET", "/pipeline", "")
		require.Equal(t, http.StatusOK, status, raw)
		assert.Equal(t, "legacy", body["mode"])
		for _, k := range incidentKeys[1:] {
			assert.Equal(t, "", body[k], "%s is in every answer", k)
		}

		// A client that knows no mode: window_enabled decides, the mirror entry has no
		// mode and no incident field.
		status, body, raw = e.do(t, "owner", "PUT", "/pipeline", `{"window_enabled": true, "group_key": "traceId"}`)
		require.Equal(t, http.StatusOK, status, raw)
		assert.Equal(t, "window", body["mode"])
		assert.Equal(t, true, body["window_enabled"])
		_, keys := e.mirrorPipeline(t)
		for _, k := range incidentKeys {
			assert.NotContains(t, keys, k, "a window pipeline's entry is what it was before incident mode")
		}

		status, body, raw = e.do(t, "owner", "PUT", "/pipeline", `{"mode": "incident", "trigger": "severity_number >= 17",
			"fingerprint": "event[\"labels\"][\"alertname\"]", "resolve_when": "event[\"status\"] == \"resolved\"", "group_wait": "10s"}`)
		require.Equal(t, http.StatusOK, status, raw)
		want := map[string]any{"mode": "incident", "window_enabled": false, "fingerprint": fingerprintExpr, "resolve_when": resolveExpr,
			"group_wait": "10s", "group_interval": "5m", "resolve_after": "30m", "reopen_within": "0s"}
		for k, v := range want {
			assert.Equal(t, v, body[k], k)
		}
		pl, _ := e.mirrorPipeline(t)
		assert.Equal(t, mirror.Pipeline{Mode: "incident", Trigger: "severity_number >= 17", Transforms: []string{},
			Fingerprint: fingerprintExpr, ResolveWhen: resolveExpr, GroupWait: "10s", GroupInterval: "5m", ResolveAfter: "30m",
			ReopenWithin: "0s", BatchSize: 10, WindowDurationSeconds: 300}, pl, "published with its defaults")
		incidentVersion := body["pipeline_version"]

		status, got, raw := e.do(t, "member", "GET", "/pipeline", "")
		require.Equal(t, http.StatusOK, status, raw)
		for k, v := range want {
			assert.Equal(t, v, got[k], "a member reads %s", k)
		}

		// PATCH keeps what it does not name, the mode included.
		status, body, raw = e.do(t, "admin", "PATCH", "/pipeline", `{"group_interval": "1m", "reopen_within": "10m"}`)
		require.Equal(t, http.StatusOK, status, raw)
		assert.Equal(t, "incident", body["mode"])
		assert.Equal(t, "1m", body["group_interval"])
		assert.Equal(t, "10m", body["reopen_within"])
		assert.Equal(t, fingerprintExpr, body["fingerprint"])

		// Another mode keeps the incident fields for a way back; the entry says window.
		status, body, raw = e.do(t, "owner", "PATCH", "/pipeline", `{"mode": "window"}`)
		require.Equal(t, http.StatusOK, status, raw)
		assert.Equal(t, "window", body["mode"])
		assert.Equal(t, true, body["window_enabled"])
		pl, keys = e.mirrorPipeline(t)
		assert.NotContains(t, keys, "mode")
		assert.Equal(t, mirror.ModeWindow, pl.EffectiveMode())

		status, body, raw = e.do(t, "owner", "PATCH", "/pipeline", `{"mode": "incident"}`)
		require.Equal(t, http.StatusOK, status, raw)
		assert.Equal(t, "incident", body["mode"])
		assert.Equal(t, false, body["window_enabled"])
		assert.Equal(t, "1m", body["group_interval"], "kept through the switch")

		// An old client's PATCH of window_enabled alone decides the mode, as it always did.
		status, body, raw = e.do(t, "owner", "PATCH", "/pipeline", `{"window_enabled": false}`)
		require.Equal(t, http.StatusOK, status, raw)
		assert.Equal(t, "legacy", body["mode"])
		pl, _ = e.mirrorPipeline(t)
		assert.Equal(t, mirror.ModeLegacy, pl.EffectiveMode())

		// The incident version is kept with its fields, and restoring it restores the mode.
		n := int64(incidentVersion.(float64))
		status, body, raw = e.do(t, "member", "GET", "/pipeline/versions/"+itoa(n), "")
		require.Equal(t, http.StatusOK, status, raw)
		version := body["pipeline"].(map[string]any)
		for k, v := range want {
			assert.Equal(t, v, version[k], "version %d: %s", n, k)
		}
		status, body, raw = e.do(t, "owner", "POST", "/pipeline/versions/"+itoa(n)+"/restore", "")
		require.Equal(t, http.StatusOK, status, raw)
		for k, v := range want {
			assert.Equal(t, v, body[k], "restored: %s", k)
		}
		pl, _ = e.mirrorPipeline(t)
		assert.Equal(t, mirror.ModeIncident, pl.Mode)
		assert.Equal(t, "10s", pl.GroupWait)

		// A PUT without mode (an old client) is read by window_enabled: legacy again.
		status, body, raw = e.do(t, "owner", "PUT", "/pipeline", `{"trigger": "true"}`)
		require.Equal(t, http.StatusOK, status, raw)
		assert.Equal(t, "legacy", body["mode"])
		_, keys = e.mirrorPipeline(t)
		for _, k := range incidentKeys {
			assert.NotContains(t, keys, k)
		}
	})
}

// A mode that contradicts window_enabled, an unknown mode and every bad duration are
// 400 invalid_pipeline naming the field, through PUT, PATCH and the check, and nothing
// changes.
func TestPipelineModeRefusals(t *testing.T) {
	eachDatabase(t, func(t *testing.T, databaseURL string) {
		e := startModeEnv(t, databaseURL)
		status, before, raw := e.do(t, "owner", "PUT", "/pipeline", `{"mode": "incident", "fingerprint": "event[\"service\"]"}`)
		require.Equal(t, http.StatusOK, status, raw)
		entry := e.mirrorEntry(t)

		for _, c := range []struct{ body, field string }{
			{`{"mode": "legacy", "window_enabled": true}`, "mode"},
			{`{"mode": "incident", "window_enabled": true}`, "mode"},
			{`{"mode": "batch"}`, "mode"},
			{`{"mode": "incident", "group_wait": "2h"}`, "group_wait"},
			{`{"mode": "incident", "group_wait": "soon"}`, "group_wait"},
			{`{"mode": "incident", "group_interval": "0s"}`, "group_interval"},
			{`{"mode": "incident", "group_interval": "25h"}`, "group_interval"},
			{`{"mode": "incident", "resolve_after": "169h"}`, "resolve_after"},
			{`{"mode": "incident", "resolve_after": "7d"}`, "resolve_after"},
			{`{"mode": "incident", "reopen_within": "-1s"}`, "reopen_within"},
			{`{"mode": "incident", "fingerprint": "event[\"a\""}`, "fingerprint"},
			{`{"mode": "incident", "resolve_when": "event[\"a\"] =="}`, "resolve_when"},
		} {
			for _, method := range []string{"PUT", "PATCH"} {
				status, body, raw := e.do(t, "owner", method, "/pipeline", c.body)
				require.Equal(t, http.StatusBadRequest, status, "%s %s: %s", method, c.body, raw)
				code, msg := errorOf(body)
				assert.Equal(t, "invalid_pipeline", code, raw)
				assert.True(t, strings.HasPrefix(msg, c.field+": "), "%s %s: %q names %s", method, c.body, msg, c.field)
			}
			status, body, raw := e.do(t, "member", "POST", "/pipeline/validate", c.body)
			require.Equal(t, http.StatusOK, status, raw)
			assert.Equal(t, false, body["valid"], c.body)
			problems, _ := body["errors"].([]any)
			require.Len(t, problems, 1, raw)
			assert.Equal(t, c.field, problems[0].(map[string]any)["field"], c.body)
		}
		status, after, _ := e.do(t, "owner", "GET", "/pipeline", "")
		require.Equal(t, http.StatusOK, status)
		assert.Equal(t, before["pipeline_version"], after["pipeline_version"], "nothing was saved")
		assert.Equal(t, entry, e.mirrorEntry(t), "nothing was published")

		// Off is "" or "0s"; the answer says "0s".
		status, body, raw := e.do(t, "owner", "PATCH", "/pipeline", `{"reopen_within": ""}`)
		require.Equal(t, http.StatusOK, status, raw)
		assert.Equal(t, "0s", body["reopen_within"])

		// mode window with window_enabled false: the mode decides.
		status, body, raw = e.do(t, "owner", "PUT", "/pipeline", `{"mode": "window", "window_enabled": false}`)
		require.Equal(t, http.StatusOK, status, raw)
		assert.Equal(t, "window", body["mode"])
		assert.Equal(t, true, body["window_enabled"])

		status, body, _ = e.do(t, "member", "PATCH", "/pipeline", `{"mode": "incident"}`)
		assert.Equal(t, http.StatusForbidden, status)
		code, _ := errorOf(body)
		assert.Equal(t, "forbidden", code)
	})
}

// set_pipeline and get_pipeline carry the mode and the incident fields, described.
func TestMCPPipelineIncidentMode(t *testing.T) {
	e := startModeEnv(t, "")
	cs := e.mcp("owner")
	call := func(name, args string) (map[string]any, string) {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: json.RawMessage(args)})
		require.NoError(t, err)
		if res.IsError {
			return nil, res.Content[0].(*mcp.TextContent).Text
		}
		b, _ := json.Marshal(res.StructuredContent)
		var out map[string]any
		require.NoError(t, json.Unmarshal(b, &out))
		return out, ""
	}
	out, errText := call("set_pipeline", `{"project_id": "p_1", "mode": "incident", "fingerprint": "event[\"service\"]", "resolve_after": "1h"}`)
	require.Empty(t, errText)
	assert.Equal(t, "incident", out["mode"])
	assert.Equal(t, "1h", out["resolve_after"])
	assert.Equal(t, "30s", out["group_wait"])

	out, errText = call("get_pipeline", `{"project_id": "p_1"}`)
	require.Empty(t, errText)
	assert.Equal(t, "incident", out["mode"])
	assert.Equal(t, `event["service"]`, out["fingerprint"])
	assert.NotContains(t, out, "signing_secret")

	_, errText = call("set_pipeline", `{"project_id": "p_1", "group_interval": "forever"}`)
	assert.Contains(t, errText, "invalid_pipeline: group_interval: ")
	_, errText = call("set_pipeline", `{"project_id": "p_1", "mode": "legacy", "window_enabled": true}`)
	assert.Contains(t, errText, "invalid_pipeline: mode: ")

	tools, err := cs.ListTools(context.Background(), nil)
	require.NoError(t, err)
	for _, tl := range tools.Tools {
		if tl.Name != "set_pipeline" {
			continue
		}
		raw, _ := json.Marshal(tl.InputSchema)
		var schema struct {
			Properties map[string]struct{ Description string }
		}
		require.NoError(t, json.Unmarshal(raw, &schema))
		for _, k := range incidentKeys {
			assert.NotEmpty(t, schema.Properties[k].Description, "set_pipeline describes %s", k)
		}
	}
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }
