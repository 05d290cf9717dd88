package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An MCP client without a token is told where to learn how to authenticate (the MCP
// authorization specification's resource-server part): the 401's WWW-Authenticate names
// the protected-resource metadata document, and that document answers.
func TestMCPUnauthorizedNamesTheResourceMetadata(t *testing.T) {
	s := startStack(t, map[string]string{"SVC_DATA_DIR": t.TempDir()})
	req, err := http.NewRequest("POST", s.cp.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	metadata := s.cp.URL + "/.well-known/oauth-protected-resource/mcp"
	assert.Equal(t, `Bearer resource_metadata="`+metadata+`"`, resp.Header.Get("WWW-Authenticate"))

	doc := call(t, s.cp.URL, "GET", "/.well-known/oauth-protected-resource/mcp", "", nil)
	require.Equal(t, http.StatusOK, doc.Status, "%s", doc.Raw)
	assert.Equal(t, s.cp.URL+"/mcp", doc.str("resource"))
	assert.Equal(t, []any{"header"}, doc.Body["bearer_methods_supported"])

	// With a token the same endpoint answers as before (no challenge).
	token, _ := s.signup(t, "mcp-auth@example.com")
	req, _ = http.NewRequest("POST", s.cp.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Empty(t, resp.Header.Get("WWW-Authenticate"))
}
