package main

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// Pipelines are checked by a running collector. Without one, saving a pipeline is an
// honest "retry later" (503 with Retry-After, nothing changed), and it succeeds once a
// collector answers; the REST API and the MCP tool say the same.
func TestPipelineNeedsTheDataPlaneToValidate(t *testing.T) {
	n := testenv.StartNATS(t)
	cp := testenv.StartControlPlane(t, map[string]string{"NATS_URL": n.URL(), "SVC_JWT_SECRET": testJWTSecret, "SVC_DATA_DIR": t.TempDir()})
	s := &stack{nats: n, cp: cp}
	token, _ := s.signup(t, "checks@example.com")
	pid := call(t, cp.URL, "POST", "/api/v1/projects", token, map[string]string{"name": "checks"}).str("id")
	require.NotEmpty(t, pid)
	path := "/api/v1/projects/" + pid + "/pipeline"

	r := call(t, cp.URL, "PUT", path, token, map[string]any{"trigger": `severity_number >= 17`})
	require.Equal(t, http.StatusServiceUnavailable, r.Status, "%s", r.Raw)
	assert.Equal(t, "unavailable", r.code())
	assert.Contains(t, r.message(), "needs the data plane")
	assert.NotEmpty(t, r.Header.Get("Retry-After"))
	cs, err := mcpSession(t, cp.URL, token)
	require.NoError(t, err)
	_, errText := tool(t, cs, "set_pipeline", map[string]any{"project_id": pid, "trigger": `severity_number >= 17`})
	assert.Contains(t, errText, "unavailable: checking the pipeline's OTTL expressions needs the data plane")
	assert.Equal(t, "", call(t, cp.URL, "GET", path, token, nil).str("trigger"), "nothing was changed")

	startValidator(t, n.URL())
	r = call(t, cp.URL, "PUT", path, token, map[string]any{"trigger": `severity_number >= 17`})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Raw)
	assert.Equal(t, `severity_number >= 17`, r.str("trigger"))
	r = call(t, cp.URL, "PUT", path, token, map[string]any{"trigger": `severity_number >=`})
	require.Equal(t, http.StatusBadRequest, r.Status, "%s", r.Raw)
	assert.Equal(t, "invalid_pipeline", r.code())
	assert.Contains(t, r.message(), "trigger: ")
}
