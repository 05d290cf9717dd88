package api

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/otelcol-svc/otelcol-svc/controlplane/auth"
	"github.com/otelcol-svc/otelcol-svc/controlplane/service"
	"github.com/otelcol-svc/otelcol-svc/controlplane/store"
	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
	"github.com/otelcol-svc/otelcol-svc/internal/apikey"
)

// Single sign-on (service/sso.go): GET /api/v1/auth/sso tells the login page whether to
// offer "Log in with <name>"; GET /api/v1/auth/sso/start sends the browser to the
// provider; GET /api/v1/auth/sso/callback takes it back, starts an ordinary dashboard
// session and lands on the dashboard, or on the login page with ?sso_error=<code>.
//
// The login's state, nonce and PKCE verifier ride in a cookie of their own, HttpOnly,
// SameSite=Lax (the callback is a cross-site top-level navigation from the provider) and
// __Host- over HTTPS, so no sibling host can plant one: the callback is accepted only in
// the browser that started the login, which is what stops a login CSRF.

const (
	ssoCookiePlain  = "svc_sso"
	ssoCookieSecure = "__Host-svc_sso"
	ssoCookieTTL    = 10 * time.Minute
	ssoStateVersion = "v1"
	// ssoRandomLen is the length of each random value in the cookie: 32 bytes in
	// unpadded base64url, the verifier length RFC 7636 recommends.
	ssoRandomLen = 43
	// maxCallbackParam bounds the code and state the callback takes.
	maxCallbackParam = 2048
	ssoCallbackPath  = "/api/v1/auth/sso/callback"
)

// ssoState is what the cookie keeps between the two legs of a login.
type ssoState struct {
	State, Nonce, Verifier string
}

func (st ssoState) encode() string {
	return ssoStateVersion + "." + st.State + "." + st.Nonce + "." + st.Verifier
}

// parseSSOState reads the cookie; false for anything not made by encode.
func parseSSOState(v string) (ssoState, bool) {
	parts := strings.Split(v, ".")
	if len(parts) != 4 || parts[0] != ssoStateVersion {
		return ssoState{}, false
	}
	for _, p := range parts[1:] {
		if !isRandomValue(p) {
			return ssoState{}, false
		}
	}
	return ssoState{State: parts[1], Nonce: parts[2], Verifier: parts[3]}, true
}

func isRandomValue(p string) bool {
	if len(p) != ssoRandomLen {
		return false
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

func randomValue() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// ssoCallback is the provider's answer, read from the callback's query.
type ssoCallback struct {
	Code, State string
	// Error is the provider's error code (the person refused, or the provider did).
	Error string
}

// parseSSOCallback reads the callback's query; an error for a malformed one.
func parseSSOCallback(q url.Values) (ssoCallback, error) {
	cb := ssoCallback{Code: q.Get("code"), State: q.Get("state"), Error: q.Get("error")}
	if len(cb.Code) > maxCallbackParam || len(cb.State) > maxCallbackParam || len(cb.Error) > 64 {
		return ssoCallback{}, errors.New("callback parameter too long")
	}
	if cb.Error == "" && (cb.Code == "" || cb.State == "") {
		return ssoCallback{}, errors.New("callback without code or state")
	}
	return cb, nil
}

func ssoCookie(r *http.Request, value string, maxAge int) *http.Cookie {
	c := &http.Cookie{Name: ssoCookiePlain, Value: value, Path: "/", MaxAge: maxAge, HttpOnly: true,
		SameSite: http.SameSiteLaxMode}
	if auth.IsHTTPS(r) {
		c.Name, c.Secure = ssoCookieSecure, true
	}
	return c
}

// ssoRedirectURL is the callback's address the provider must have registered: under
// SVC_PUBLIC_URL, else the request's own address.
func (s *Server) ssoRedirectURL(r *http.Request) string {
	if s.PublicURL != "" {
		return s.PublicURL + ssoCallbackPath
	}
	scheme := "http"
	if auth.IsHTTPS(r) {
		scheme = "https"
	}
	return scheme + "://" + r.Host + ssoCallbackPath
}

// ssoInfo tells the login page whether to offer single sign-on, and by which name.
func (s *Server) ssoInfo(w http.ResponseWriter, r *http.Request) {
	if s.SSO == nil {
		writeJSON(w, http.StatusOK, map[string]any{"enabled": false})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"enabled": true, "name": s.SSO.Config.Name})
}

// ssoProvider shows a logged-in person the instance's provider (never its secret), for the
// settings page.
func (s *Server) ssoProvider(w http.ResponseWriter, r *http.Request) {
	if s.SSO == nil {
		writeJSON(w, http.StatusOK, map[string]any{"enabled": false, "configured_by": "environment"})
		return
	}
	c := s.SSO.Config
	domains := c.AllowedDomains
	if domains == nil {
		domains = []string{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"enabled": true, "configured_by": "environment", "name": c.Name,
		"issuer": c.Issuer, "client_id": c.ClientID, "client_secret_set": c.ClientSecret != "",
		"allowed_domains": domains, "redirect_uri": s.ssoRedirectURL(r)})
}

func (s *Server) ssoStart(w http.ResponseWriter, r *http.Request) {
	if s.SSO == nil {
		fail(w, apierror.New(http.StatusNotFound, apierror.NotFound, "single sign-on is not set up on this instance"))
		return
	}
	if ok, _ := s.ssoByAddr.Take(s.limitAddr(r), time.Now()); !ok {
		ssoFailed(w, r, "rate")
		return
	}
	st := ssoState{State: randomValue(), Nonce: randomValue(), Verifier: randomValue()}
	to, err := s.SSO.AuthCodeURL(r.Context(), s.ssoRedirectURL(r), st.State, st.Nonce, st.Verifier)
	if err != nil {
		ssoFailed(w, r, "unavailable")
		return
	}
	http.SetCookie(w, ssoCookie(r, st.encode(), int(ssoCookieTTL/time.Second)))
	http.Redirect(w, r, to, http.StatusFound)
}

// ssoFailed lands on the login page with a code the page has a message for (never the
// provider's own text: a link could otherwise put any words on our login page).
func ssoFailed(w http.ResponseWriter, r *http.Request, code string) {
	http.SetCookie(w, ssoCookie(r, "", -1))
	http.Redirect(w, r, "/login?sso_error="+url.QueryEscape(code), http.StatusFound)
}

func (s *Server) ssoCallback(w http.ResponseWriter, r *http.Request) {
	if s.SSO == nil {
		fail(w, apierror.New(http.StatusNotFound, apierror.NotFound, "single sign-on is not set up on this instance"))
		return
	}
	cb, err := parseSSOCallback(r.URL.Query())
	if err != nil {
		ssoFailed(w, r, "failed")
		return
	}
	var st ssoState
	ok := false
	for _, name := range []string{ssoCookieSecure, ssoCookiePlain} {
		if c, err := r.Cookie(name); err == nil && (name == ssoCookieSecure || !auth.IsHTTPS(r)) {
			if st, ok = parseSSOState(c.Value); ok {
				break
			}
		}
	}
	switch {
	case !ok:
		// No login started in this browser, or it took longer than the cookie lives.
		ssoFailed(w, r, "expired")
		return
	case cb.Error != "":
		code := "failed"
		if cb.Error == "access_denied" {
			code = "denied"
		}
		ssoFailed(w, r, code)
		return
	case !equalHashes(cb.State, st.State):
		ssoFailed(w, r, "expired")
		return
	}
	if ok, _ := s.ssoByAddr.Take(s.limitAddr(r), time.Now()); !ok {
		ssoFailed(w, r, "rate")
		return
	}
	id, err := s.SSO.Exchange(r.Context(), s.ssoRedirectURL(r), cb.Code, st.Verifier, st.Nonce)
	var u store.User
	var outcome string
	if err == nil {
		// A new account, or an unverified one claimed, is a change to an account: recorded
		// with the provider as the credential; logging in to a verified one writes nothing.
		actx := service.Audited(r.Context(), service.Actor{CredKind: "sso", Addr: s.clientAddr(r)}, "", "account.sso_create", "")
		u, outcome, err = s.SSO.Account(actx, id)
	}
	var refusal *service.SSORefusal
	switch {
	case errors.As(err, &refusal):
		s.Logger.Info("sso: login refused", "code", refusal.Code, "reason", refusal.Reason)
		ssoFailed(w, r, refusal.Code)
		return
	case errors.Is(err, service.ErrSSOUnavailable):
		ssoFailed(w, r, "unavailable")
		return
	case err != nil:
		// The error names the step, never the client secret (oauth2 does not put it in
		// its errors) nor the code.
		s.Logger.Warn("sso: login failed", "error", err)
		ssoFailed(w, r, "failed")
		return
	}
	if outcome == service.SSOLoggedIn {
		// A login that changed nothing still goes in the account's log: a security team
		// reads there who logged in through the provider, and from where.
		if err := s.Svc.RecordAudit(r.Context(), service.Actor{UserID: u.ID, Email: u.Email, CredKind: "sso", Addr: s.clientAddr(r)}, "", "login.sso", u.ID); err != nil {
			s.Logger.Error("sso: recording the login", "error", err)
			ssoFailed(w, r, "failed")
			return
		}
	}
	s.SSO.JoinProjects(r.Context(), u, s.clientAddr(r))
	secret, err := s.newSession(r, u)
	if err != nil {
		s.Logger.Error("sso: starting the session", "error", err)
		ssoFailed(w, r, "failed")
		return
	}
	http.SetCookie(w, ssoCookie(r, "", -1))
	http.SetCookie(w, auth.SessionCookie(r, secret))
	if outcome == service.SSOClaimed {
		// The account existed before its owner proved the address: the dashboard tells
		// them its password and credentials ended, and to review what it holds.
		http.Redirect(w, r, "/?sso_notice=claimed", http.StatusFound)
		return
	}
	http.Redirect(w, r, "/", http.StatusFound)
}

// equalHashes compares two attacker-chosen strings in constant time.
func equalHashes(a, b string) bool {
	x, y := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
	return x == y
}

// newSession stores a dashboard session for u as startSession does, for a login that
// answers with a redirect instead of JSON. It is an ordinary session: logging out, and
// logging out everywhere, end it.
func (s *Server) newSession(r *http.Request, u store.User) (string, error) {
	secret := apikey.Generate(auth.SessionKind)
	now := time.Now().UTC()
	ses := store.Session{ID: service.NewID(sessionIDPrefix), UserID: u.ID, Hash: apikey.Hash(secret),
		CreatedAt: now, ExpiresAt: now.Add(auth.SessionTTL)}
	var ended []string
	err := s.Svc.Store.InTx(r.Context(), func(tx *store.Tx) error {
		var err error
		if ended, err = tx.PruneSessions(r.Context(), u.ID, now, maxSessions-1); err != nil {
			return err
		}
		if err := service.RecordRevocations(r.Context(), tx, ended...); err != nil {
			return err
		}
		return tx.CreateSession(r.Context(), ses)
	})
	if err != nil {
		return "", err
	}
	s.Svc.RevokeCredentials(r.Context(), ended...)
	return secret, nil
}

// ssoDomainsOff answers the project SSO join domains' calls on an instance without single
// sign-on.
func (s *Server) ssoDomainsOff(w http.ResponseWriter) bool {
	if s.SSO != nil {
		return false
	}
	fail(w, apierror.New(http.StatusConflict, apierror.Conflict, "single sign-on is not set up on this instance (SVC_OIDC_ISSUER)"))
	return true
}

// getSSODomains: GET /api/v1/projects/{id}/sso-domains.
func (s *Server) getSSODomains(w http.ResponseWriter, r *http.Request) {
	if s.ssoDomainsOff(w) {
		return
	}
	domains, err := s.SSO.ProjectSSODomains(r.Context(), currentUser(r).ID, r.PathValue("id"))
	if domains == nil {
		domains = []string{}
	}
	s.respond(w, r, err, http.StatusOK, func() any { return map[string]any{"domains": domains} })
}

// putSSODomains: PUT /api/v1/projects/{id}/sso-domains {"domains": [...]}: people of these
// domains join the project as members when they log in by single sign-on.
func (s *Server) putSSODomains(w http.ResponseWriter, r *http.Request) {
	if s.ssoDomainsOff(w) {
		return
	}
	var b struct {
		Domains []string `json:"domains"`
	}
	if e := decode(r, &b); e != nil {
		fail(w, e)
		return
	}
	domains, err := s.SSO.SetProjectSSODomains(s.audited(r, "project.sso_domains", ""), currentUser(r).ID, r.PathValue("id"), b.Domains)
	s.respond(w, r, err, http.StatusOK, func() any { return map[string]any{"domains": domains} })
}
