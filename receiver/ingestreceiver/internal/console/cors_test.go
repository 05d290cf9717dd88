package console

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// dashboardOrigin is the test APIs' allowed origin.
const dashboardOrigin = "http://dashboard.test:8080"

// Only the dashboard's pages may read the console API from a browser: the answer to any
// other origin carries no Access-Control-Allow-Origin, so its browser hides the answer.
func TestCORSOnlyForTheDashboardsOrigin(t *testing.T) {
	c := startConsole(t)
	c.fill(t, "p1", 1, func(int) string { return `{"a":1}` }, noSource)
	key := "key-p1"
	for _, path := range []string{"events", "fields", "pipeline/dry-run", "nope"} {
		url := c.url + "/console/v1/projects/p1/" + path
		a := do(t, http.MethodOptions, url, map[string]string{"Origin": dashboardOrigin,
			"Access-Control-Request-Method": "GET", "Access-Control-Request-Headers": "authorization"})
		assert.Equal(t, http.StatusNoContent, a.status, path)
		assert.Equal(t, dashboardOrigin, a.header.Get("Access-Control-Allow-Origin"), path)
		assert.Equal(t, "Authorization, X-API-Key, Content-Type, Idempotency-Key", a.header.Get("Access-Control-Allow-Headers"), path)
		assert.Contains(t, a.header.Values("Vary"), "Origin", path)
		want := "GET, OPTIONS"
		if path == "pipeline/dry-run" {
			want = "POST, OPTIONS"
		}
		assert.Equal(t, want, a.header.Get("Access-Control-Allow-Methods"), path)

		for _, other := range []string{"http://evil.example", "http://dashboard.test:8081", "https://dashboard.test:8080", "null"} {
			a = do(t, http.MethodOptions, url, map[string]string{"Origin": other, "Access-Control-Request-Method": "GET"})
			assert.Empty(t, a.header.Get("Access-Control-Allow-Origin"), "%s from %s", path, other)
			assert.Empty(t, a.header.Get("Access-Control-Allow-Methods"), "%s from %s", path, other)
			assert.Contains(t, a.header.Values("Vary"), "Origin", path)
		}
	}
	// The actual read, as a browser sends it.
	a := do(t, http.MethodGet, c.url+"/console/v1/projects/p1/events", map[string]string{"Origin": dashboardOrigin, "X-API-Key": key})
	require.Equal(t, http.StatusOK, a.status, "%s", a.body)
	assert.Equal(t, dashboardOrigin, a.header.Get("Access-Control-Allow-Origin"))
	assert.Equal(t, "Retry-After", a.header.Get("Access-Control-Expose-Headers"))
	a = do(t, http.MethodGet, c.url+"/console/v1/projects/p1/events", map[string]string{"Origin": "http://evil.example", "X-API-Key": key})
	assert.Empty(t, a.header.Get("Access-Control-Allow-Origin"))
	// Without Origin (curl, scripts) nothing changes but the Vary.
	a = do(t, http.MethodGet, c.url+"/console/v1/projects/p1/events", map[string]string{"X-API-Key": key})
	assert.Equal(t, http.StatusOK, a.status)
	assert.Empty(t, a.header.Get("Access-Control-Allow-Origin"))
}

func TestParseOrigins(t *testing.T) {
	got, err := ParseOrigins([]string{"http://localhost:8080", " HTTPS://Dash.Example.com/ , http://127.0.0.1:8080", ""})
	require.NoError(t, err)
	assert.Equal(t, []string{"http://localhost:8080", "https://dash.example.com", "http://127.0.0.1:8080"}, got)
	got, err = ParseOrigins(nil)
	require.NoError(t, err)
	assert.Empty(t, got)
	for _, bad := range []string{"*", "localhost:8080", "ftp://x", "http://", "http://x/app", "http://u:p@x", "http://x?a=1", "http://x#f"} {
		_, err := ParseOrigins([]string{bad})
		assert.Error(t, err, bad)
	}
}
