package service

import (
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
)

// Registration bodies come from anyone (the endpoint needs no sign-in): whatever is
// accepted is a public client with 1 to 10 redirect URIs a browser may be sent to.
func FuzzParseClientRegistration(f *testing.F) {
	for _, s := range []string{
		`{"redirect_uris":["http://127.0.0.1:33418/callback"],"client_name":"VS Code","grant_types":["authorization_code","refresh_token"],"application_type":"native"}`,
		`{"redirect_uris":["https://claude.ai/api/mcp/auth_callback"],"token_endpoint_auth_method":"none","jwks":{"keys":[]}}`,
		`{"redirect_uris":["http://evil.example.com/cb"]}`, `{"redirect_uris":["https://x.example.com/#frag"]}`,
		`{"redirect_uris":["https://x.example.com/"],"token_endpoint_auth_method":"client_secret_basic"}`,
		`{"redirect_uris":[]}`, `[]`, `{"redirect_uris":["javascript:alert(1)"]}`, `{"redirect_uris":["http://[::1]:8080/cb"],"client_name":"\u0007"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		c, e := ParseClientRegistration(body)
		if e != nil {
			if e.Code != "invalid_client_metadata" && e.Code != "invalid_redirect_uri" || e.Status != 400 && e.Status != 413 {
				t.Fatalf("an error outside RFC 7591's: %+v", e)
			}
			return
		}
		if n := len(c.RedirectURIs); n < 1 || n > maxRedirectURIs {
			t.Fatalf("accepted %d redirect URIs", n)
		}
		for _, s := range c.RedirectURIs {
			u, err := url.Parse(s)
			if err != nil || u.Fragment != "" || strings.Contains(s, "#") || u.User != nil {
				t.Fatalf("accepted redirect URI %q", s)
			}
			if u.Scheme != "https" && !(u.Scheme == "http" && isLoopbackHost(u.Hostname())) {
				t.Fatalf("accepted redirect URI %q", s)
			}
		}
		if m := c.TokenEndpointAuthMethod; m != "" && m != "none" {
			t.Fatalf("accepted auth method %q", m)
		}
		if c.ClientName == "" || !utf8.ValidString(c.ClientName) || utf8.RuneCountInString(c.ClientName) > maxClientName || strings.ContainsFunc(c.ClientName, isControl) {
			t.Fatalf("accepted client name %q", c.ClientName)
		}
	})
}

// Token requests come from anyone: whatever is accepted names a grant type we serve with
// the parameters it needs, a PKCE-shaped verifier, and no repeated parameter.
func FuzzParseTokenForm(f *testing.F) {
	for _, s := range []string{
		"grant_type=authorization_code&code=oac_x&redirect_uri=http%3A%2F%2F127.0.0.1%3A1%2Fcb&client_id=ocl_1&code_verifier=" + strings.Repeat("a", 43),
		"grant_type=refresh_token&refresh_token=ort_x&client_id=ocl_1&scope=mcp",
		"grant_type=password&username=a&password=b&client_id=c", "grant_type=refresh_token&refresh_token=a&refresh_token=b&client_id=c",
		"grant_type=authorization_code&code=x&client_id=c&redirect_uri=r&code_verifier=short", "%zz", "",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, e := ParseTokenForm(body)
		if e != nil {
			if e.Status != 400 && e.Status != 401 {
				t.Fatalf("status %d", e.Status)
			}
			return
		}
		q, err := url.ParseQuery(string(body))
		if err != nil {
			t.Fatalf("accepted a body that is not a form: %q", body)
		}
		for k, v := range q {
			if len(v) > 1 {
				t.Fatalf("accepted repeated %q", k)
			}
		}
		if r.ClientID == "" {
			t.Fatal("accepted no client_id")
		}
		switch r.GrantType {
		case "authorization_code":
			if r.Code == "" || r.RedirectURI == "" || len(r.CodeVerifier) < 43 || len(r.CodeVerifier) > 128 || !pkceChars(r.CodeVerifier) {
				t.Fatalf("accepted %+v", r)
			}
		case "refresh_token":
			if r.RefreshToken == "" {
				t.Fatalf("accepted %+v", r)
			}
		default:
			t.Fatalf("accepted grant type %q", r.GrantType)
		}
		if !validScope(r.Scope) {
			t.Fatalf("accepted scope %q", r.Scope)
		}
	})
}

// The redirect URIs a client may register, as a user's MCP client would name them.
func TestRedirectURIRules(t *testing.T) {
	for uri, ok := range map[string]bool{
		"https://claude.ai/api/mcp/auth_callback": true,
		"http://127.0.0.1:33418/":                 true,
		"http://[::1]:6274/oauth/callback":        true,
		"http://localhost:6274/oauth/callback":    true,
		"http://127.0.0.1/cb?x=1":                 true,
		"http://example.com/cb":                   false,
		"http://127.0.0.1.example.com/cb":         false,
		"https://example.com/cb#x":                false,
		"https://user:pw@example.com/cb":          false,
		"javascript:alert(1)":                     false,
		"/relative":                               false,
		"myapp://callback":                        false,
	} {
		assert.Equal(t, ok, checkRedirectURI(uri) == nil, uri)
	}
}

func TestPKCE(t *testing.T) {
	// RFC 7636 appendix B.
	assert.True(t, pkceMatches("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk", "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"))
	assert.False(t, pkceMatches("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXj", "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"))
}
