package auth

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func testTokens(t *testing.T) *Tokens {
	tk, err := NewTokens([]byte(strings.Repeat("k", 32)), time.Hour)
	require.NoError(t, err)
	return tk
}

func write(headers map[string]string) *http.Request {
	r := httptest.NewRequest("POST", "http://cp.example:8080/api/v1/projects", nil)
	for k, v := range headers {
		r.Header.Set(k, v)
	}
	return r
}

func TestCheckCSRF(t *testing.T) {
	tk := testTokens(t)
	secret := SessionKind + "abc"
	good := tk.CSRFToken(secret)
	assert.NotEqual(t, good, tk.CSRFToken(SessionKind+"abd"), "each session has its own token")

	for name, c := range map[string]struct {
		headers map[string]string
		ok      bool
	}{
		"token, same origin":                {map[string]string{CSRFHeader: good, "Origin": "http://cp.example:8080", "Sec-Fetch-Site": "same-origin"}, true},
		"token, no browser headers":         {map[string]string{CSRFHeader: good}, true},
		"no token":                          {map[string]string{"Origin": "http://cp.example:8080"}, false},
		"another session's token":           {map[string]string{CSRFHeader: tk.CSRFToken(SessionKind + "other")}, false},
		"same site, other port (receiver)":  {map[string]string{CSRFHeader: good, "Origin": "http://cp.example:4318"}, false},
		"sec-fetch-site same-site":          {map[string]string{CSRFHeader: good, "Sec-Fetch-Site": "same-site"}, false},
		"sec-fetch-site cross-site":         {map[string]string{CSRFHeader: good, "Sec-Fetch-Site": "cross-site"}, false},
		"https origin for an http request":  {map[string]string{CSRFHeader: good, "Origin": "https://cp.example:8080"}, false},
		"opaque origin (sandboxed iframe)":  {map[string]string{CSRFHeader: good, "Origin": "null"}, false},
		"https through a proxy, https page": {map[string]string{CSRFHeader: good, "Origin": "https://cp.example:8080", "X-Forwarded-Proto": "https"}, true},
	} {
		err := tk.CheckCSRF(write(c.headers), secret)
		assert.Equal(t, c.ok, err == nil, "%s: %v", name, err)
	}
}

func TestSessionCookie(t *testing.T) {
	plain := httptest.NewRequest("POST", "http://cp.example/api/v1/auth/session", nil)
	c := SessionCookie(plain, SessionKind+"x")
	assert.Equal(t, "svc_session", c.Name)
	assert.True(t, c.HttpOnly)
	assert.False(t, c.Secure)
	assert.Equal(t, http.SameSiteStrictMode, c.SameSite)

	tls := httptest.NewRequest("POST", "https://cp.example/api/v1/auth/session", nil)
	c = SessionCookie(tls, SessionKind+"x")
	assert.Equal(t, "__Host-svc_session", c.Name)
	assert.True(t, c.Secure)
	assert.Equal(t, "/", c.Path)
	assert.Empty(t, c.Domain)

	// A value that is not a session secret is no session.
	plain.AddCookie(&http.Cookie{Name: "svc_session", Value: "osp_not-a-session"})
	assert.Empty(t, SessionFromCookie(plain))
}

// FuzzCheckSameOrigin: whatever Origin and Sec-Fetch-Site a client sends, the check does
// not panic, and what it accepts names this origin (or is a client that names none).
func FuzzCheckSameOrigin(f *testing.F) {
	for _, s := range []string{"http://cp.example:8080", "https://cp.example:8080", "null", "", "http://CP.example:8080", "http://cp.example:8080/path", "http://user@cp.example:8080", "http://cp.example:8080.evil"} {
		f.Add(s, "same-origin")
		f.Add(s, "")
	}
	f.Fuzz(func(t *testing.T, origin, site string) {
		r := httptest.NewRequest("POST", "http://cp.example:8080/api/v1/auth/session", nil)
		r.Header.Set("Origin", origin)
		r.Header.Set("Sec-Fetch-Site", site)
		if CheckSameOrigin(r) != nil {
			return
		}
		if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
			t.Fatalf("accepted Sec-Fetch-Site %q", site)
		}
		if o := r.Header.Get("Origin"); o != "" {
			u, err := url.Parse(o)
			if err != nil || u.Scheme != "http" || !strings.EqualFold(u.Host, "cp.example:8080") {
				t.Fatalf("accepted Origin %q", o)
			}
		}
	})
}
