package testenv

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// OIDCProvider is a real OpenID Connect provider: the example server of
// github.com/zitadel/oidc/v3 (`make oidc-provider` builds the pinned version into
// bin/zitadel-oidc-example), on a free loopback port. It knows the confidential client
// "web" with the secret "secret", whose redirect URIs are those it was started with, and
// the users given; its login page is a username and password form.
type OIDCProvider struct {
	// Issuer is http://localhost:PORT/ (the example server names itself so).
	Issuer       string
	ClientID     string
	ClientSecret string
	p            process
}

// OIDCUser is a person the provider can log in.
type OIDCUser struct {
	ID, Username, Password, Email string
	EmailVerified                 bool
}

// OIDCProviderBinary is bin/zitadel-oidc-example. Without it the test is skipped, except
// under CI=true, where `make test` has built it.
func OIDCProviderBinary(t T) string {
	t.Helper()
	if p := filepath.Join(RepoRoot(), "bin", "zitadel-oidc-example"); fileExecutable(p) {
		return p
	}
	msg := "the OpenID provider is not in bin/; `make oidc-provider` builds it"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg + " (CI=true: not skipped)")
	}
	if s, ok := t.(interface{ Skip(...any) }); ok {
		s.Skip(msg)
	}
	t.Fatal(msg)
	return ""
}

// StartOIDCProvider starts the provider with users, accepting logins that return to one
// of redirectURIs; it stops with the test.
func StartOIDCProvider(t T, redirectURIs []string, users []OIDCUser) *OIDCProvider {
	t.Helper()
	bin := OIDCProviderBinary(t)
	type user struct {
		ID, Username, Password, FirstName, LastName, Email string
		EmailVerified                                      bool
		PreferredLanguage                                  string
	}
	file := map[string]user{}
	for _, u := range users {
		file[u.ID] = user{ID: u.ID, Username: u.Username, Password: u.Password, FirstName: "Test", LastName: u.ID,
			Email: u.Email, EmailVerified: u.EmailVerified, PreferredLanguage: "en"}
	}
	b, err := json.Marshal(file)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "users.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	o := &OIDCProvider{ClientID: "web", ClientSecret: "secret"}
	retryPorts(t, func() error {
		o.p.resetLog()
		port := strconv.Itoa(FreePort(t))
		o.Issuer = "http://localhost:" + port + "/"
		if err := o.p.start(bin, nil, map[string]string{"PORT": port, "USERS_FILE": path,
			"REDIRECT_URI": strings.Join(redirectURIs, ",")}); err != nil {
			return err
		}
		return o.p.waitReady("oidc provider", 30*time.Second, 50*time.Millisecond, func() bool {
			return answers200("http://127.0.0.1:" + port + "/.well-known/openid-configuration")
		})
	})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		o.p.stop(ctx)
		if t.Failed() {
			t.Logf("oidc provider log:\n%s", tail(o.p.Log(), 8<<10))
		}
	})
	return o
}
