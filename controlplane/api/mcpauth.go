package api

import (
	"net/http"
	"strings"
)

// MCP clients find out how to authenticate from a 401 (the MCP authorization
// specification's resource-server part, RFC 9728): WWW-Authenticate names the protected-
// resource metadata document, which says what the resource is and that a Bearer token in
// the Authorization header is what it takes. There is no OAuth authorization server
// (yet), so the document lists none and clients are configured with a token header; a
// client that followed the 401 into a guessed OAuth flow could never finish it.

const mcpMetadataPath = "/.well-known/oauth-protected-resource"

// baseURL is where the client reached this control plane: its own view of the address
// (behind a TLS-terminating proxy, X-Forwarded-Proto tells the scheme).
func baseURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https") {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// mcpChallenge adds the WWW-Authenticate challenge to every 401 of the MCP endpoint.
func (s *Server) mcpChallenge(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		h(&challengeWriter{ResponseWriter: w, challenge: `Bearer resource_metadata="` + baseURL(r) + mcpMetadataPath + `/mcp"`}, r)
	}
}

type challengeWriter struct {
	http.ResponseWriter
	challenge string
}

func (c *challengeWriter) WriteHeader(status int) {
	if status == http.StatusUnauthorized {
		c.Header().Set("WWW-Authenticate", c.challenge)
	}
	c.ResponseWriter.WriteHeader(status)
}

// Flush keeps streamable HTTP responses streaming through the wrapper.
func (c *challengeWriter) Flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// protectedResource is the RFC 9728 metadata of the MCP endpoint.
func (s *Server) protectedResource(w http.ResponseWriter, r *http.Request) {
	base := baseURL(r)
	writeJSON(w, http.StatusOK, map[string]any{
		"resource":                 base + "/mcp",
		"resource_name":            "otelcol-svc control plane (MCP)",
		"bearer_methods_supported": []string{"header"},
		"resource_documentation":   "send Authorization: Bearer <a personal access token (osp_..., POST " + base + "/api/v1/tokens) or a login token (POST " + base + "/api/v1/auth/login)>",
	})
}
