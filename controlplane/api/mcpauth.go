package api

import (
	"net/http"
	"strings"

	"github.com/otelcol-svc/otelcol-svc/controlplane/service"
)

// MCP clients find out how to authenticate from a 401 (the MCP authorization
// specification, RFC 9728): WWW-Authenticate names the protected-resource metadata
// document, which names this control plane as the resource's authorization server
// (oauth.go), so a client given only the URL of /mcp signs its user in through the
// browser. Clients configured with a header send a personal access token instead.

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
		challenge := `Bearer resource_metadata="` + s.issuer(r) + mcpMetadataPath + `/mcp"`
		if hdr := r.Header.Get("Authorization"); len(hdr) > 7 && service.IsOAuthAccessToken(strings.TrimSpace(hdr[7:])) {
			// RFC 6750 §3.1: the OAuth token sent was refused (expired or revoked), so
			// the client's OAuth handler signs in again rather than retrying it.
			challenge += `, error="invalid_token"`
		}
		h(&challengeWriter{ResponseWriter: w, challenge: challenge}, r)
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
	iss := s.issuer(r)
	writeJSON(w, http.StatusOK, map[string]any{
		"resource":                 service.MCPResource(iss),
		"resource_name":            "otelcol-svc control plane (MCP)",
		"authorization_servers":    []string{iss},
		"scopes_supported":         []string{service.OAuthScope},
		"bearer_methods_supported": []string{"header"},
		"resource_documentation": "sign in through the authorization server above (OAuth, from the MCP client), or send Authorization: Bearer <a personal access token (osp_..., POST " +
			iss + "/api/v1/tokens) or a login token (POST " + iss + "/api/v1/auth/login)>",
	})
}
