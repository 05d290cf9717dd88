package api

import (
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestIsAPIPath(t *testing.T) {
	for p, want := range map[string]bool{
		"/api": true, "/api/": true, "/api/v1/x": true, "/mcp": true, "/mcp/x": true, "/healthz": true,
		"/readyz": true, "/.well-known/x": true, "/.well-known": true,
		"/": false, "/projects/p_1/keys": false, "/apis": false, "/mcpx": false, "/healthzz": false, "/assets/app.js": false,
	} {
		assert.Equal(t, want, isAPIPath(p), p)
	}
}

func TestContentSecurityPolicy(t *testing.T) {
	csp := contentSecurityPolicy("https://ingest.example.com:8443/base")
	assert.Contains(t, csp, "connect-src 'self' https://ingest.example.com:8443;")
	assert.Contains(t, csp, "script-src 'self';")
	assert.Contains(t, csp, "frame-ancestors 'none'")
	assert.Contains(t, contentSecurityPolicy("not a url"), "connect-src 'self';", "no receiver origin: only this one")
}

func TestAcceptsGzip(t *testing.T) {
	for ae, want := range map[string]bool{"gzip": true, "br, gzip;q=0.8": true, "gzip;q=0": false, "gzip; q=0": false, "br": false, "": false} {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("Accept-Encoding", ae)
		assert.Equal(t, want, acceptsGzip(r), ae)
	}
}
