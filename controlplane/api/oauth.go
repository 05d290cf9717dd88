package api

import (
	"errors"
	"html"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/otelcol-svc/otelcol-svc/controlplane/service"
	"github.com/otelcol-svc/otelcol-svc/controlplane/store"
	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
)

// The OAuth authorization server's endpoints (the rules are in service/oauth.go): RFC
// 8414 metadata, RFC 7591 registration, the authorization endpoint (which hands the
// browser to the dashboard's consent page, /authorize?request=...), the token and
// revocation endpoints, and the JSON API behind the consent page and the list of
// connected apps. The /oauth/ endpoints answer in OAuth's error shape
// ({"error", "error_description"}); /api/v1/oauth/ in the contract's.

// registerPerHour bounds client registrations per address: each is a row, and the
// endpoint needs no sign-in.
const registerPerHour = 30

// issuer is the authorization server's identifier and the base of its endpoints: the
// public URL when set (behind a proxy, what clients must see), else where the client
// reached us.
func (s *Server) issuer(r *http.Request) string {
	if s.PublicURL != "" {
		return s.PublicURL
	}
	return baseURL(r)
}

// cors lets browser-based MCP clients (the Inspector UI, served from its own origin)
// read the metadata and call registration, token and revocation. Nothing there uses
// cookies, so any origin may call and no credentials are allowed.
func cors(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Access-Control-Allow-Origin", "*")
		h(w, r)
	}
}

// preflight answers a CORS preflight.
func preflight(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", "*")
	h.Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
	h.Set("Access-Control-Allow-Headers", "Content-Type, Authorization, MCP-Protocol-Version")
	h.Set("Access-Control-Max-Age", "600")
	w.WriteHeader(http.StatusNoContent)
}

// corsMethods adds CORS and the preflight to a route's methods.
func corsMethods(m methods) methods {
	out := methods{"OPTIONS": preflight}
	for k, h := range m {
		out[k] = cors(h)
	}
	return out
}

func writeOAuthError(w http.ResponseWriter, e *service.OAuthError) {
	if e.Status == http.StatusUnauthorized {
		// RFC 6749 §5.2: a 401 names the authentication scheme the client should use.
		w.Header().Set("WWW-Authenticate", `Bearer error="`+e.Code+`"`)
	}
	writeJSON(w, e.Status, e)
}

// oauthFail answers err in OAuth's shape: an *OAuthError as it is, anything else a
// logged server_error.
func (s *Server) oauthFail(w http.ResponseWriter, r *http.Request, err error) {
	var oe *service.OAuthError
	if errors.As(err, &oe) {
		writeOAuthError(w, oe)
		return
	}
	s.Logger.Error("request failed", "method", r.Method, "path", r.URL.Path, "error", err)
	writeOAuthError(w, &service.OAuthError{Status: http.StatusInternalServerError, Code: "server_error", Description: "something went wrong on our side; try again"})
}

// authServerMetadata is the RFC 8414 document. oauthex.AuthServerMeta is the SDK's wire
// type of it; jwks_uri (which it always writes) is left empty: no tokens are signed.
func (s *Server) authServerMetadata(w http.ResponseWriter, r *http.Request) {
	iss := s.issuer(r)
	writeJSON(w, http.StatusOK, &oauthex.AuthServerMeta{
		Issuer:                                     iss,
		AuthorizationEndpoint:                      iss + "/oauth/authorize",
		TokenEndpoint:                              iss + "/oauth/token",
		RegistrationEndpoint:                       iss + "/oauth/register",
		RevocationEndpoint:                         iss + "/oauth/revoke",
		ResponseTypesSupported:                     []string{"code"},
		GrantTypesSupported:                        []string{"authorization_code", "refresh_token"},
		CodeChallengeMethodsSupported:              []string{"S256"},
		TokenEndpointAuthMethodsSupported:          []string{"none"},
		RevocationEndpointAuthMethodsSupported:     []string{"none"},
		ScopesSupported:                            []string{service.OAuthScope},
		AuthorizationResponseIssParameterSupported: true,
		ServiceDocumentation:                       iss + "/",
	})
}

// readBody reads an OAuth request's body: of content type ct, at most limit bytes; a
// wrong type or more is an OAuth error with code.
func readBody(r *http.Request, ct string, limit int64, code string) ([]byte, *service.OAuthError) {
	if !hasContentType(r, ct) {
		return nil, &service.OAuthError{Status: http.StatusBadRequest, Code: code, Description: "send Content-Type: " + ct}
	}
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, limit))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, &service.OAuthError{Status: http.StatusRequestEntityTooLarge, Code: code, Description: "the body is too large"}
		}
		return nil, &service.OAuthError{Status: http.StatusBadRequest, Code: code, Description: "the body could not be read"}
	}
	return body, nil
}

func hasContentType(r *http.Request, want string) bool {
	ct, _, _ := strings.Cut(r.Header.Get("Content-Type"), ";")
	return strings.EqualFold(strings.TrimSpace(ct), want)
}

const formType = "application/x-www-form-urlencoded"

// registerClient is RFC 7591 registration of a public client.
func (s *Server) registerClient(w http.ResponseWriter, r *http.Request) {
	if ok, wait := s.registerByAddr.Take(s.limitAddr(r), time.Now()); !ok {
		e := rateLimited("too many client registrations from your address", wait)
		w.Header().Set("Retry-After", apierror.RetryAfterSeconds(e.RetryAfter))
		writeJSON(w, http.StatusTooManyRequests, &service.OAuthError{Code: "rate_limited", Description: e.Message})
		return
	}
	body, e := readBody(r, "application/json", service.MaxRegistrationBody, "invalid_client_metadata")
	if e != nil {
		writeOAuthError(w, e)
		return
	}
	reg, e := service.ParseClientRegistration(body)
	if e != nil {
		writeOAuthError(w, e)
		return
	}
	c, err := s.Svc.RegisterOAuthClient(r.Context(), reg)
	if err != nil {
		s.oauthFail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, &oauthex.ClientRegistrationResponse{
		ClientRegistrationMetadata: oauthex.ClientRegistrationMetadata{
			RedirectURIs: c.RedirectURIs, ClientName: c.Name, TokenEndpointAuthMethod: "none",
			GrantTypes: []string{"authorization_code", "refresh_token"}, ResponseTypes: []string{"code"}, Scope: service.OAuthScope,
		},
		ClientID: c.ID, ClientIDIssuedAt: c.CreatedAt,
	})
}

// authorize is the authorization endpoint: a valid request waits for the user on the
// dashboard's consent page; an error goes back to the client, unless the client or its
// redirect URI cannot be trusted, which is answered here.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request) {
	res, err := s.Svc.StartAuthorization(r.Context(), s.issuer(r), r.URL.Query())
	var oe *service.OAuthError
	switch {
	case errors.As(err, &oe):
		if strings.Contains(r.Header.Get("Accept"), "text/html") {
			// A person's browser: a page they can read (nothing from the request is
			// echoed but the escaped description).
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.Header().Set("Content-Security-Policy", "default-src 'none'")
			w.WriteHeader(oe.Status)
			_, _ = io.WriteString(w, "<!doctype html><title>Authorization refused</title><h1>This sign-in request cannot be used</h1><p>"+
				html.EscapeString(oe.Code+": "+oe.Description)+"</p><p>Start again from your MCP client.</p>")
			return
		}
		writeOAuthError(w, oe)
	case err != nil:
		s.oauthFail(w, r, err)
	case res.Redirect != "":
		http.Redirect(w, r, res.Redirect, http.StatusFound)
	default:
		http.Redirect(w, r, "/authorize?request="+url.QueryEscape(res.RequestID), http.StatusFound)
	}
}

// token is the token endpoint.
func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(strings.ToLower(r.Header.Get("Authorization")), "basic ") {
		writeOAuthError(w, &service.OAuthError{Status: http.StatusUnauthorized, Code: "invalid_client",
			Description: "clients here are public (token_endpoint_auth_method none): send client_id in the form, no secret"})
		return
	}
	body, e := readBody(r, formType, service.MaxTokenBody, "invalid_request")
	if e != nil {
		writeOAuthError(w, e)
		return
	}
	req, e := service.ParseTokenForm(body)
	if e != nil {
		writeOAuthError(w, e)
		return
	}
	resp, err := s.Svc.Token(r.Context(), s.issuer(r), req)
	if err != nil {
		s.oauthFail(w, r, err)
		return
	}
	w.Header().Set("Pragma", "no-cache")
	writeJSON(w, http.StatusOK, resp)
}

// revoke is RFC 7009 revocation: 200 whatever the token was.
func (s *Server) revoke(w http.ResponseWriter, r *http.Request) {
	body, e := readBody(r, formType, service.MaxTokenBody, "invalid_request")
	if e != nil {
		writeOAuthError(w, e)
		return
	}
	q, err := url.ParseQuery(string(body))
	if err != nil {
		writeOAuthError(w, &service.OAuthError{Status: http.StatusBadRequest, Code: "invalid_request", Description: "the body is not a form"})
		return
	}
	actx := service.Audited(r.Context(), service.Actor{CredKind: store.CredOAuth, Addr: s.clientAddr(r)}, "", "", "")
	if err := s.Svc.RevokeOAuthToken(actx, q.Get("token"), q.Get("client_id")); err != nil {
		s.oauthFail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// noTokenConsent refuses consent with a personal access token or an OAuth token: a
// leaked token must not mint grants that outlive its revocation.
func noTokenConsent(w http.ResponseWriter, r *http.Request) bool {
	if viaAccessToken(r) {
		fail(w, apierror.New(http.StatusForbidden, apierror.Forbidden,
			"access tokens cannot approve sign-ins: sign in on the dashboard (or POST /api/v1/auth/login) and use that"))
		return false
	}
	return true
}

func (s *Server) oauthRequest(w http.ResponseWriter, r *http.Request) {
	if !noTokenConsent(w, r) {
		return
	}
	req, client, err := s.Svc.PendingOAuthRequest(r.Context(), r.PathValue("id"))
	s.respond(w, r, err, http.StatusOK, func() any {
		host := req.RedirectURI
		if u, err := url.Parse(req.RedirectURI); err == nil {
			host = u.Host
		}
		return map[string]any{"id": req.ID, "client_id": client.ID, "client_name": client.Name, "redirect_uri": req.RedirectURI,
			"redirect_host": host, "scope": req.Scope, "expires_at": ts(req.ExpiresAt)}
	})
}

func (s *Server) approveOAuthRequest(w http.ResponseWriter, r *http.Request) {
	s.answerOAuth(w, r, true)
}
func (s *Server) denyOAuthRequest(w http.ResponseWriter, r *http.Request) { s.answerOAuth(w, r, false) }

func (s *Server) answerOAuth(w http.ResponseWriter, r *http.Request, approve bool) {
	if !noTokenConsent(w, r) {
		return
	}
	to, err := s.Svc.AnswerOAuthRequest(r.Context(), s.issuer(r), currentUser(r).ID, r.PathValue("id"), approve)
	s.respond(w, r, err, http.StatusOK, func() any { return map[string]string{"redirect_to": to} })
}

func grantJSON(g store.OAuthGrant) map[string]any {
	return map[string]any{"id": g.ID, "client_id": g.ClientID, "client_name": g.ClientName,
		"created_at": ts(g.CreatedAt), "last_used_at": ts(g.LastUsedAt)}
}

func (s *Server) listOAuthGrants(w http.ResponseWriter, r *http.Request) {
	gs, err := s.Svc.OAuthGrants(r.Context(), currentUser(r).ID)
	s.respond(w, r, err, http.StatusOK, func() any {
		out := make([]map[string]any, 0, len(gs))
		for _, g := range gs {
			out = append(out, grantJSON(g))
		}
		return map[string]any{"grants": out}
	})
}

func (s *Server) revokeOAuthGrant(w http.ResponseWriter, r *http.Request) {
	err := s.Svc.RevokeOAuthGrant(r.Context(), currentUser(r).ID, r.PathValue("id"))
	s.respond(w, r, err, http.StatusNoContent, nil)
}

// oauthNotFound keeps unknown paths under /oauth/ JSON, not the dashboard's page.
func oauthNotFound(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusNotFound, map[string]string{"error": "not_found", "error_description": "no endpoint " + r.URL.Path})
}
