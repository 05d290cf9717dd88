package service

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
)

func TestSSOConfigFromEnv(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	c, err := SSOConfigFromEnv(env(nil))
	if err != nil || c.Issuer != "" {
		t.Fatalf("no issuer: %+v, %v; want SSO off", c, err)
	}
	c, err = SSOConfigFromEnv(env(map[string]string{EnvOIDCIssuer: "https://id.example.com/", EnvOIDCClientID: "cp",
		EnvOIDCClientSecret: "s3cret-value", EnvOIDCAllowedDomains: " Example.com, @corp.example.org ,"}))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(c.AllowedDomains, " ") != "example.com corp.example.org" || c.Name != "id.example.com" {
		t.Fatalf("got %+v", c)
	}
	for _, bad := range []map[string]string{
		{EnvOIDCIssuer: "ftp://id.example.com", EnvOIDCClientID: "cp", EnvOIDCClientSecret: "s3cret-value"},
		{EnvOIDCIssuer: "https://id.example.com", EnvOIDCClientSecret: "s3cret-value"},
		{EnvOIDCIssuer: "https://id.example.com", EnvOIDCClientID: "cp", EnvOIDCClientSecret: "s3cret-value", EnvOIDCAllowedDomains: "a@b.com"},
		// Keys and tokens over plain HTTP could be swapped on the path.
		{EnvOIDCIssuer: "http://id.example.com", EnvOIDCClientID: "cp", EnvOIDCClientSecret: "s3cret-value"},
		{EnvOIDCIssuer: "http://10.0.0.5:8080", EnvOIDCClientID: "cp", EnvOIDCClientSecret: "s3cret-value"},
	} {
		_, err := SSOConfigFromEnv(env(bad))
		if err == nil {
			t.Errorf("accepted %v", bad)
		} else if strings.Contains(err.Error(), "s3cret-value") {
			t.Errorf("the error shows the client secret: %v", err)
		}
	}
}

// A provider on this host (development) may be reached over plain HTTP.
func TestSSOConfigLoopbackIssuerOverHTTP(t *testing.T) {
	for _, iss := range []string{"http://127.0.0.1:9998", "http://localhost:9998/realms/x", "http://[::1]:9998"} {
		m := map[string]string{EnvOIDCIssuer: iss, EnvOIDCClientID: "cp", EnvOIDCClientSecret: "s"}
		if _, err := SSOConfigFromEnv(func(k string) string { return m[k] }); err != nil {
			t.Errorf("%s: %v", iss, err)
		}
	}
}

// With any domain allowed to log in (a public provider), no project may name join domains:
// gmail.com would be anyone's to name.
func TestSSOJoinDomainsNeedAllowedDomains(t *testing.T) {
	s := &SSO{}
	_, err := s.SetProjectSSODomains(t.Context(), "u_1", "p_1", []string{"gmail.com"})
	var e *apierror.Error
	if !errors.As(err, &e) || e.Status != http.StatusConflict {
		t.Fatalf("got %v, want 409", err)
	}
}

func TestSSODomainAllowed(t *testing.T) {
	s := &SSO{Config: SSOConfig{AllowedDomains: []string{"example.com"}}}
	for email, want := range map[string]bool{"a@example.com": true, "a@EXAMPLE.com": true, "a@sub.example.com": false,
		"a@example.com.evil.org": false, "a@other.org": false, "example.com": false} {
		if got := s.DomainAllowed(email); got != want {
			t.Errorf("DomainAllowed(%q) = %v, want %v", email, got, want)
		}
	}
	if !(&SSO{}).DomainAllowed("a@any.org") {
		t.Error("no allowed domains: any domain may log in")
	}
}

// FuzzJoinDomains feeds a project's SSO join domains as a request names them: an accepted
// list is sorted, duplicate-free, at most maxJoinDomains, each domain-shaped and allowed;
// a refusal is a 400 with a bounded message.
func FuzzJoinDomains(f *testing.F) {
	f.Add("example.com\n@Example.COM\n")
	f.Add("a..b\nx.y")
	f.Add("other.org")
	f.Add(strings.Repeat("a.b\n", 30))
	s := &SSO{Config: SSOConfig{AllowedDomains: []string{"example.com", "a.b", "x.y"}}}
	f.Fuzz(func(t *testing.T, raw string) {
		got, err := normalizeJoinDomains(strings.Split(raw, "\n"), s.DomainAllowed)
		if err != nil {
			if len(err.Error()) > 200 {
				t.Fatalf("unbounded message: %d bytes", len(err.Error()))
			}
			return
		}
		if len(got) > maxJoinDomains {
			t.Fatalf("%d domains", len(got))
		}
		for i, d := range got {
			if !domainShaped(d) || !s.DomainAllowed("x@"+d) || (i > 0 && got[i-1] >= d) {
				t.Fatalf("accepted %q", got)
			}
		}
	})
}
