package api

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A pipeline of more statements, or longer expressions, than the limits is
// refused at save with 400 invalid_pipeline naming the field, and nothing is saved.
func mustJSON(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

func TestPipelineStatementAndLengthLimitsAtSave(t *testing.T) {
	base, tok, _ := guardrailServer(t)
	stmts := make([]string, 101)
	for i := range stmts {
		stmts[i] = `set(event["b"], Concat([event["b"], event["b"]], ""))`
	}
	many, _ := json.Marshal(map[string]any{"agent_endpoint_url": "https://agent.example.com/hook", "transforms": stmts})
	long, _ := json.Marshal(map[string]any{"trigger": `body == "` + strings.Repeat("x", 5000) + `"`})
	for field, req := range map[string]string{"transforms": string(many), "trigger": string(long)} {
		status, body := putPipelineJSON(t, base, tok, req)
		require.Equal(t, http.StatusBadRequest, status, "%s: %v", field, body)
		e, _ := body["error"].(map[string]any)
		require.NotNil(t, e, "%v", body)
		assert.Equal(t, "invalid_pipeline", e["code"])
		assert.True(t, strings.HasPrefix(e["message"].(string), field+": "), "%v", e["message"])
	}
	// At the limit it is saved.
	status, body := putPipelineJSON(t, base, tok, `{"transforms": `+mustJSON(t, stmts[:100])+`}`)
	require.Equal(t, http.StatusOK, status, "%v", body)
	assert.Len(t, body["transforms"], 100)
}
