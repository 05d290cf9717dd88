package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/webhooksig"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// The pipeline check the dashboard calls as the user types: PUT's checks, the problem's
// field, statement and position, and nothing saved; a stranger learns nothing.
func TestPipelineValidateEndpoint(t *testing.T) {
	s := startStack(t, map[string]string{"SVC_DATA_DIR": t.TempDir()})
	cp := s.cp.URL
	owner, _ := s.signup(t, "owner@example.com")
	stranger, _ := s.signup(t, "stranger@example.com")
	pid := call(t, cp, "POST", "/api/v1/projects", owner, map[string]string{"name": "checks"}).str("id")
	p := "/api/v1/projects/" + pid + "/pipeline"

	r := call(t, cp, "POST", p+"/validate", owner, map[string]any{"trigger": "severity_number >= = 17"})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Raw)
	assert.Equal(t, false, r.Body["valid"])
	errs := r.Body["errors"].([]any)
	require.Len(t, errs, 1)
	e := errs[0].(map[string]any)
	assert.Equal(t, "trigger", e["field"])
	assert.Equal(t, map[string]any{"line": 1.0, "column": 20.0}, e["position"])
	assert.Contains(t, e["message"], "invalid syntax")

	r = call(t, cp, "POST", p+"/validate", owner, map[string]any{"transforms": []string{`set(event["a"], 1)`, `set(event["b"], 2`}})
	e = r.Body["errors"].([]any)[0].(map[string]any)
	assert.Equal(t, "transforms", e["field"])
	assert.Equal(t, 1.0, e["index"], "the second statement")
	assert.Equal(t, map[string]any{"line": 1.0, "column": 18.0}, e["position"])

	r = call(t, cp, "POST", p+"/validate", owner, map[string]any{"batch_size": 5000})
	e = r.Body["errors"].([]any)[0].(map[string]any)
	assert.Equal(t, "batch_size", e["field"])
	assert.NotContains(t, e, "position")

	r = call(t, cp, "POST", p+"/validate", owner, map[string]any{"trigger": "severity_number >= 17", "group_key": "traceId"})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Raw)
	assert.Equal(t, map[string]any{"valid": true, "errors": []any{}, "warnings": []any{}}, r.Body)
	assert.Equal(t, "", call(t, cp, "GET", p, owner, nil).str("trigger"), "validating saves nothing")

	r = call(t, cp, "POST", p+"/validate", owner, map[string]any{"trigger": "x", "nope": 1})
	assert.Equal(t, http.StatusBadRequest, r.Status, "the same strict body as PUT")
	r = call(t, cp, "POST", p+"/validate", stranger, map[string]any{"trigger": "x"})
	assert.Equal(t, http.StatusNotFound, r.Status, "%s", r.Raw)
}

// A test message reaches the one destination now, signed with the project's secret the
// receiver can verify; only owners and admins may send it; the deployment's allow list
// is what lets the control plane reach a private address.
func TestSinkTestMessage(t *testing.T) {
	got := make(chan *http.Request, 4)
	bodies := make(chan []byte, 4)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- r
		bodies <- b
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	t.Cleanup(hook.Close)

	n := testenv.StartNATS(t)
	startValidator(t, n.URL())
	cpp := testenv.StartControlPlane(t, map[string]string{"NATS_URL": n.URL(), "SVC_JWT_SECRET": testJWTSecret,
		"SVC_DATA_DIR": t.TempDir(), "SVC_OUTBOUND_ALLOW": "127.0.0.1/32"})
	cp := cpp.URL
	s := &stack{nats: n, cp: cpp}
	owner, _ := s.signup(t, "owner@example.com")
	member, _ := s.signup(t, "member@example.com")
	stranger, _ := s.signup(t, "stranger@example.com")
	pid := call(t, cp, "POST", "/api/v1/projects", owner, map[string]string{"name": "sinks"}).str("id")
	p := "/api/v1/projects/" + pid
	require.Equal(t, http.StatusCreated, call(t, cp, "POST", p+"/members", owner, map[string]string{"email": "member@example.com", "role": "member"}).Status)
	secret := call(t, cp, "GET", p+"/pipeline", owner, nil).str("signing_secret")
	r := call(t, cp, "POST", p+"/sinks", owner, map[string]any{"kind": "webhook", "url": hook.URL + "/in", "headers": map[string]string{"X-Team": "ops"}})
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Raw)
	sink := p + "/sinks/" + r.str("id")

	r = call(t, cp, "POST", sink+"/test", owner, nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Raw)
	assert.Equal(t, true, r.Body["delivered"], "%s", r.Raw)
	assert.Equal(t, 200.0, r.Body["status_code"])
	assert.Equal(t, `{"ok":true}`, r.Body["response_excerpt"])
	assert.Equal(t, "", r.Body["error"])
	assert.Contains(t, r.Body, "latency_ms")
	req, body := <-got, <-bodies
	assert.Equal(t, "ops", req.Header.Get("X-Team"))
	require.NoError(t, webhooksig.Verify(secret, req.Header, body, time.Now(), webhooksig.DefaultTolerance))
	assert.JSONEq(t, `{"test": true, "text": "Test message from otelcol-svc", "project_id": "`+pid+`"}`, string(body))

	assert.Equal(t, http.StatusForbidden, call(t, cp, "POST", sink+"/test", member, nil).Status)
	assert.Equal(t, http.StatusNotFound, call(t, cp, "POST", sink+"/test", stranger, nil).Status)
	assert.Equal(t, http.StatusNotFound, call(t, cp, "POST", p+"/sinks/s_0000000000000000/test", owner, nil).Status)
	assert.Empty(t, got, "only the owner's test was sent")

	// The same deployment without the allow list: the saved destination is refused at
	// call time, in words that name the setting, and nothing reaches it.
	cpp.Kill()
	delete(cpp.Env, "SVC_OUTBOUND_ALLOW")
	cpp.Start()
	r = call(t, cp, "POST", sink+"/test", owner, nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Raw)
	assert.Equal(t, false, r.Body["delivered"])
	assert.Contains(t, r.Body["error"], "127.0.0.1 is a loopback address")
	assert.Contains(t, r.Body["error"], "SVC_OUTBOUND_ALLOW")
	assert.Empty(t, got)

	// Tests are a call the service makes on request: a project gets 20 a minute.
	for i := 1; i < 20; i++ {
		require.Equal(t, http.StatusOK, call(t, cp, "POST", sink+"/test", owner, nil).Status, "test %d", i+1)
	}
	r = call(t, cp, "POST", sink+"/test", owner, nil)
	assert.Equal(t, http.StatusTooManyRequests, r.Status, "%s", r.Raw)
	assert.Equal(t, "rate_limited", r.code())
	assert.NotEmpty(t, r.Header.Get("Retry-After"))
}
