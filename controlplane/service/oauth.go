// The OAuth authorization server for MCP clients: an MCP client given only
// the URL of /mcp registers itself (RFC 7591), sends the user's browser to the
// authorization endpoint (RFC 6749 authorization code with PKCE S256, RFC 8707 resource,
// RFC 9207 iss), the user approves on the dashboard, and the client exchanges the code
// for an access token good at /mcp only and a rotating refresh token (RFC 6749 §6, RFC
// 7009 revocation).
//
// Library decision: the maintained Go authorization-server library, ory/fosite v0.49,
// would add ~38 modules to our single go.mod (ory/x, viper, pop, a deprecated Jaeger
// exporter) and has no RFC 7591 registration. The subset used here (authorization code +
// PKCE + refresh, public clients only) is small and fully specified, so it is written by
// hand, with the wire types of the MCP Go SDK we already depend on (oauthex) where they
// fit, and tested against that SDK's own OAuth client.

package service

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/otelcol-svc/otelcol-svc/controlplane/store"
	"github.com/otelcol-svc/otelcol-svc/internal/apikey"
)

// Lifetimes and bounds of the authorization server.
const (
	OAuthScope = "mcp"
	// OAuthRequestTTL is how long the user has to approve on the consent page.
	OAuthRequestTTL = 10 * time.Minute
	OAuthCodeTTL    = 60 * time.Second
	OAuthAccessTTL  = time.Hour
	OAuthRefreshTTL = 30 * 24 * time.Hour
	// OAuthClientIdle is how long a registered client that holds no grant is kept.
	OAuthClientIdle = 30 * 24 * time.Hour
	// MaxRegistrationBody bounds an RFC 7591 registration request.
	MaxRegistrationBody = 16 << 10
	// MaxTokenBody bounds a token or revocation request.
	MaxTokenBody = 16 << 10

	maxRedirectURIs   = 10
	maxRedirectURILen = 2000
	maxClientName     = 100
	maxState          = 1000
)

// OAuthError is an error in the OAuth shape (RFC 6749 §5.2, RFC 7591 §3.2.2):
// {"error", "error_description"}, with its HTTP status.
type OAuthError struct {
	Status      int    `json:"-"`
	Code        string `json:"error"`
	Description string `json:"error_description,omitempty"`
}

func (e *OAuthError) Error() string { return e.Code + ": " + e.Description }

func oauthErr(status int, code, desc string) *OAuthError {
	return &OAuthError{Status: status, Code: code, Description: desc}
}

func invalidRequest(desc string) *OAuthError {
	return oauthErr(http.StatusBadRequest, "invalid_request", desc)
}

func invalidGrant(desc string) *OAuthError {
	return oauthErr(http.StatusBadRequest, "invalid_grant", desc)
}

// --- registration (RFC 7591) --------------------------------------------------------

// ClientRegistration is what a registration request asks for. Only the fields we act on
// are read: RFC 7591 §2 has the server ignore metadata it does not understand (the SDK's
// oauthex.ClientRegistrationMetadata would refuse a client sending jwks as the object
// the RFC specifies).
type ClientRegistration struct {
	RedirectURIs            []string `json:"redirect_uris"`
	TokenEndpointAuthMethod string   `json:"token_endpoint_auth_method"`
	GrantTypes              []string `json:"grant_types"`
	ResponseTypes           []string `json:"response_types"`
	ClientName              string   `json:"client_name"`
	Scope                   string   `json:"scope"`
}

// ParseClientRegistration reads and checks a registration body: public clients only,
// 1 to 10 redirect URIs, each https or http on a loopback host, without a fragment.
func ParseClientRegistration(body []byte) (ClientRegistration, *OAuthError) {
	var c ClientRegistration
	if len(body) > MaxRegistrationBody {
		return c, oauthErr(http.StatusRequestEntityTooLarge, "invalid_client_metadata", fmt.Sprintf("the body is larger than %d bytes", MaxRegistrationBody))
	}
	if err := json.Unmarshal(body, &c); err != nil {
		return c, oauthErr(http.StatusBadRequest, "invalid_client_metadata", "the body is not a JSON object of client metadata: "+err.Error())
	}
	if m := c.TokenEndpointAuthMethod; m != "" && m != "none" {
		return c, oauthErr(http.StatusBadRequest, "invalid_client_metadata",
			fmt.Sprintf("token_endpoint_auth_method %q is not supported: only public clients (\"none\", with PKCE) are registered", m))
	}
	for _, g := range c.GrantTypes {
		if g != "authorization_code" && g != "refresh_token" {
			return c, oauthErr(http.StatusBadRequest, "invalid_client_metadata", fmt.Sprintf("grant_types: %q is not supported (authorization_code, refresh_token)", g))
		}
	}
	for _, r := range c.ResponseTypes {
		if r != "code" {
			return c, oauthErr(http.StatusBadRequest, "invalid_client_metadata", fmt.Sprintf("response_types: %q is not supported (code)", r))
		}
	}
	if c.Scope != "" && !validScope(c.Scope) {
		return c, oauthErr(http.StatusBadRequest, "invalid_client_metadata", `scope: the only scope is "mcp"`)
	}
	if n := len(c.RedirectURIs); n < 1 || n > maxRedirectURIs {
		return c, oauthErr(http.StatusBadRequest, "invalid_redirect_uri", fmt.Sprintf("redirect_uris must hold 1 to %d URIs", maxRedirectURIs))
	}
	for i, u := range c.RedirectURIs {
		if err := checkRedirectURI(u); err != nil {
			return c, oauthErr(http.StatusBadRequest, "invalid_redirect_uri", fmt.Sprintf("redirect_uris[%d]: %v", i, err))
		}
	}
	c.ClientName = strings.TrimSpace(c.ClientName)
	if c.ClientName == "" {
		c.ClientName = "MCP client"
	}
	if !utf8.ValidString(c.ClientName) || utf8.RuneCountInString(c.ClientName) > maxClientName || strings.ContainsFunc(c.ClientName, isControl) {
		return c, oauthErr(http.StatusBadRequest, "invalid_client_metadata", fmt.Sprintf("client_name must be at most %d printable characters", maxClientName))
	}
	return c, nil
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) }

// checkRedirectURI accepts https URIs and http ones on a loopback host (a native app's
// local listener, RFC 8252 §7.3), without a fragment (RFC 6749 §3.1.2) or user info.
func checkRedirectURI(s string) error {
	if len(s) > maxRedirectURILen {
		return fmt.Errorf("longer than %d characters", maxRedirectURILen)
	}
	u, err := url.Parse(s)
	if err != nil || !u.IsAbs() || u.Host == "" || u.Opaque != "" {
		return fmt.Errorf("%q is not an absolute URL", s)
	}
	if u.Fragment != "" || strings.Contains(s, "#") {
		return fmt.Errorf("%q has a fragment", s)
	}
	if u.User != nil {
		return fmt.Errorf("%q has user info", s)
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if isLoopbackHost(u.Hostname()) {
			return nil
		}
		return fmt.Errorf("%q: http is allowed only on a loopback host (127.0.0.1, [::1], localhost); use https", s)
	}
	return fmt.Errorf("%q: the scheme must be https (or http on a loopback host)", s)
}

func isLoopbackHost(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// RegisterOAuthClient stores a checked registration.
func (s *Service) RegisterOAuthClient(ctx context.Context, reg ClientRegistration) (store.OAuthClient, error) {
	c := store.OAuthClient{ID: NewID("ocl_"), Name: reg.ClientName, RedirectURIs: reg.RedirectURIs, CreatedAt: time.Now().UTC()}
	err := s.Store.InTx(ctx, func(tx *store.Tx) error { return tx.CreateOAuthClient(ctx, c) })
	return c, err
}

// --- authorization request ----------------------------------------------------------

// AuthorizeResult is where the authorization endpoint sends the browser: RequestID, a
// pending request for the consent page, or Redirect, an error answer at the client's
// redirect URI.
type AuthorizeResult struct {
	RequestID string
	Redirect  string
}

// MCPResource is the resource (RFC 8707) tokens are issued for.
func MCPResource(issuer string) string { return issuer + "/mcp" }

func validResource(issuer, r string) bool {
	r = strings.TrimSuffix(r, "/")
	return r == MCPResource(issuer) || r == issuer
}

func validScope(s string) bool {
	for _, f := range strings.Fields(s) {
		if f != OAuthScope {
			return false
		}
	}
	return true
}

// StartAuthorization checks an authorization request (RFC 6749 §4.1.1 with PKCE). An
// unknown client or a redirect URI it did not register is an *OAuthError answered
// where it was asked, never a redirect (the redirect URI is not trusted yet); other
// errors go back to the client's redirect URI.
func (s *Service) StartAuthorization(ctx context.Context, issuer string, q url.Values) (AuthorizeResult, error) {
	for _, k := range []string{"client_id", "redirect_uri"} {
		if len(q[k]) > 1 {
			return AuthorizeResult{}, invalidRequest(k + " is repeated")
		}
	}
	clientID, redirectURI := q.Get("client_id"), q.Get("redirect_uri")
	if clientID == "" {
		return AuthorizeResult{}, invalidRequest("client_id is missing: register the client first (POST /oauth/register)")
	}
	var client store.OAuthClient
	err := s.Store.InTx(ctx, func(tx *store.Tx) error {
		var err error
		client, err = tx.OAuthClientByID(ctx, clientID)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return AuthorizeResult{}, oauthErr(http.StatusBadRequest, "invalid_client", "unknown client_id: register the client first (POST /oauth/register)")
	}
	if err != nil {
		return AuthorizeResult{}, err
	}
	if redirectURI == "" || !slices.Contains(client.RedirectURIs, redirectURI) {
		return AuthorizeResult{}, invalidRequest("redirect_uri must be exactly one of the client's registered redirect URIs")
	}
	state := q.Get("state")
	back := func(code, desc string) (AuthorizeResult, error) {
		return AuthorizeResult{Redirect: withParams(redirectURI, "error", code, "error_description", desc, "state", state, "iss", issuer)}, nil
	}
	for k, v := range q {
		if len(v) > 1 {
			return back("invalid_request", k+" is repeated")
		}
	}
	if rt := q.Get("response_type"); rt != "code" {
		return back("unsupported_response_type", `response_type must be "code"`)
	}
	if len(state) > maxState {
		return back("invalid_request", fmt.Sprintf("state is longer than %d characters", maxState))
	}
	if m := q.Get("code_challenge_method"); m != "S256" {
		return back("invalid_request", `PKCE is required with code_challenge_method "S256" (plain is refused)`)
	}
	challenge := q.Get("code_challenge")
	if len(challenge) != 43 || !pkceChars(challenge) {
		return back("invalid_request", "code_challenge must be the 43-character base64url SHA-256 of the code verifier")
	}
	scope := q.Get("scope")
	if !validScope(scope) {
		return back("invalid_scope", `the only scope is "mcp"`)
	}
	resource := q.Get("resource")
	if resource != "" && !validResource(issuer, resource) {
		return back("invalid_target", "resource must be "+MCPResource(issuer))
	}
	now := time.Now().UTC()
	req := store.OAuthRequest{ID: apikey.Generate("oar_"), ClientID: client.ID, RedirectURI: redirectURI, CodeChallenge: challenge,
		State: state, Scope: OAuthScope, Resource: resource, CreatedAt: now, ExpiresAt: now.Add(OAuthRequestTTL)}
	err = s.Store.InTx(ctx, func(tx *store.Tx) error {
		if err := tx.TouchOAuthClient(ctx, client.ID, now); err != nil {
			return err
		}
		return tx.CreateOAuthRequest(ctx, req)
	})
	return AuthorizeResult{RequestID: req.ID}, err
}

// pkceChars reports whether s is made of RFC 7636's unreserved characters.
func pkceChars(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~') {
			return false
		}
	}
	return true
}

// withParams adds query parameters to a redirect URI, keeping its own (RFC 6749
// §3.1.2); empty values are left out.
func withParams(uri string, kv ...string) string {
	u, err := url.Parse(uri)
	if err != nil {
		return uri
	}
	q := u.Query()
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			q.Set(kv[i], kv[i+1])
		}
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// PendingOAuthRequest is a request waiting for consent with its client; NotFound when it
// is unknown, answered or expired (an expired one is deleted).
func (s *Service) PendingOAuthRequest(ctx context.Context, id string) (store.OAuthRequest, store.OAuthClient, error) {
	var req store.OAuthRequest
	var client store.OAuthClient
	err := s.Store.InTx(ctx, func(tx *store.Tx) error {
		var err error
		var live bool
		if req, live, err = liveRequest(ctx, tx, id); err != nil || !live {
			return err
		}
		client, err = tx.OAuthClientByID(ctx, req.ClientID)
		return err
	})
	if err == nil && client.ID == "" {
		err = store.ErrNotFound
	}
	if errors.Is(err, store.ErrNotFound) {
		return req, client, NotFound("authorization request")
	}
	return req, client, err
}

// liveRequest reads a request; live is false when there is none or it has expired (then
// it is deleted, in the caller's transaction, which must commit).
func liveRequest(ctx context.Context, tx *store.Tx, id string) (req store.OAuthRequest, live bool, err error) {
	req, err = tx.OAuthRequestByID(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return req, false, nil
	}
	if err != nil {
		return req, false, err
	}
	if !time.Now().Before(req.ExpiresAt) {
		return req, false, tx.DeleteOAuthRequest(ctx, id)
	}
	return req, true, nil
}

// AnswerOAuthRequest consumes a pending request with the user's answer and returns where
// the browser goes: the client's redirect URI with a code (bound to the user, client,
// redirect URI, PKCE challenge and resource) or with error=access_denied.
func (s *Service) AnswerOAuthRequest(ctx context.Context, issuer, userID, id string, approve bool) (string, error) {
	var redirect string
	err := s.Store.InTx(ctx, func(tx *store.Tx) error {
		req, live, err := liveRequest(ctx, tx, id)
		if err != nil || !live {
			return err
		}
		// Answered once: a second approve (or a deny after an approve) finds nothing;
		// of two at once, the row's deletion lets one through.
		if err := tx.DeleteOAuthRequest(ctx, id); err != nil {
			return err
		}
		if !approve {
			redirect = withParams(req.RedirectURI, "error", "access_denied", "error_description", "the user denied the request", "state", req.State, "iss", issuer)
			return nil
		}
		if err := credentialHeld(ctx, tx, userID); err != nil {
			return err
		}
		code := apikey.Generate(apikey.KindOAuthCode)
		now := time.Now().UTC()
		err = tx.CreateOAuthCode(ctx, store.OAuthCode{Hash: apikey.Hash(code), UserID: userID, ClientID: req.ClientID, RedirectURI: req.RedirectURI,
			CodeChallenge: req.CodeChallenge, Scope: req.Scope, Resource: req.Resource, CreatedAt: now, ExpiresAt: now.Add(OAuthCodeTTL)})
		redirect = withParams(req.RedirectURI, "code", code, "state", req.State, "iss", issuer)
		return err
	})
	if err == nil && redirect == "" {
		err = store.ErrNotFound
	}
	if errors.Is(err, store.ErrNotFound) {
		return "", NotFound("authorization request")
	}
	return redirect, err
}

// --- token endpoint (RFC 6749 §4.1.3, §6) ---------------------------------------------

// TokenRequest is a parsed token request.
type TokenRequest struct {
	GrantType, Code, RedirectURI, ClientID, CodeVerifier, RefreshToken, Resource, Scope string
}

// TokenResponse is a successful token answer (RFC 6749 §5.1).
type TokenResponse struct {
	AccessToken  string `json:"access_token"`
	TokenType    string `json:"token_type"`
	ExpiresIn    int    `json:"expires_in"`
	RefreshToken string `json:"refresh_token"`
	Scope        string `json:"scope"`
}

// ParseTokenForm reads an application/x-www-form-urlencoded token request body.
// Parameters must not repeat (RFC 6749 §3.2).
func ParseTokenForm(body []byte) (TokenRequest, *OAuthError) {
	var r TokenRequest
	if len(body) > MaxTokenBody {
		return r, invalidRequest(fmt.Sprintf("the body is larger than %d bytes", MaxTokenBody))
	}
	q, err := url.ParseQuery(string(body))
	if err != nil {
		return r, invalidRequest("the body is not a form (application/x-www-form-urlencoded): " + err.Error())
	}
	for k, v := range q {
		if len(v) > 1 {
			return r, invalidRequest(k + " is repeated")
		}
	}
	r = TokenRequest{GrantType: q.Get("grant_type"), Code: q.Get("code"), RedirectURI: q.Get("redirect_uri"), ClientID: q.Get("client_id"),
		CodeVerifier: q.Get("code_verifier"), RefreshToken: q.Get("refresh_token"), Resource: q.Get("resource"), Scope: q.Get("scope")}
	if r.ClientID == "" {
		return r, oauthErr(http.StatusUnauthorized, "invalid_client", "client_id is missing (public clients send it in the form)")
	}
	switch r.GrantType {
	case "authorization_code":
		if r.Code == "" || r.RedirectURI == "" || r.CodeVerifier == "" {
			return r, invalidRequest("code, redirect_uri and code_verifier are required")
		}
		if n := len(r.CodeVerifier); n < 43 || n > 128 || !pkceChars(r.CodeVerifier) {
			return r, invalidRequest("code_verifier must be 43 to 128 unreserved characters (RFC 7636)")
		}
	case "refresh_token":
		if r.RefreshToken == "" {
			return r, invalidRequest("refresh_token is required")
		}
	case "":
		return r, invalidRequest("grant_type is missing")
	default:
		return r, oauthErr(http.StatusBadRequest, "unsupported_grant_type", "grant_type must be authorization_code or refresh_token")
	}
	if !validScope(r.Scope) {
		return r, oauthErr(http.StatusBadRequest, "invalid_scope", `the only scope is "mcp"`)
	}
	return r, nil
}

// Token answers a parsed token request.
func (s *Service) Token(ctx context.Context, issuer string, r TokenRequest) (TokenResponse, error) {
	if r.Resource != "" && !validResource(issuer, r.Resource) {
		return TokenResponse{}, oauthErr(http.StatusBadRequest, "invalid_target", "resource must be "+MCPResource(issuer))
	}
	if r.GrantType == "authorization_code" {
		return s.exchangeCode(ctx, r)
	}
	return s.refresh(ctx, r)
}

// exchangeCode redeems a code once. A second use revokes the grant the first made (RFC
// 6749 §4.1.2): the code leaked, so the tokens issued for it may be in the wrong hands.
func (s *Service) exchangeCode(ctx context.Context, r TokenRequest) (TokenResponse, error) {
	var resp TokenResponse
	var refusal *OAuthError
	var revoked string // a grant revoked because its code or refresh token was replayed
	hash := apikey.Hash(r.Code)
	err := s.Store.InTx(ctx, func(tx *store.Tx) error {
		c, err := tx.OAuthCodeByHash(ctx, hash)
		if errors.Is(err, store.ErrNotFound) {
			refusal = invalidGrant("the code is unknown, used or expired; authorize again")
			return nil
		}
		if err != nil {
			return err
		}
		if c.GrantID != "" {
			refusal = invalidGrant("the code was used already; the tokens issued for it are revoked")
			revoked = c.GrantID
			if err := tx.RevokeOAuthGrant(ctx, c.GrantID); err != nil {
				return err
			}
			return RecordRevocations(ctx, tx, c.GrantID)
		}
		if !time.Now().Before(c.ExpiresAt) {
			refusal = invalidGrant("the code is unknown, used or expired; authorize again")
			return tx.DeleteOAuthCode(ctx, hash)
		}
		switch {
		case c.ClientID != r.ClientID:
			refusal = invalidGrant("the code was issued to another client")
		case c.RedirectURI != r.RedirectURI:
			refusal = invalidGrant("redirect_uri differs from the authorization request's")
		case !pkceMatches(r.CodeVerifier, c.CodeChallenge):
			refusal = invalidGrant("code_verifier does not match the code_challenge")
		case r.Resource != "" && c.Resource != "" && strings.TrimSuffix(r.Resource, "/") != strings.TrimSuffix(c.Resource, "/"):
			refusal = oauthErr(http.StatusBadRequest, "invalid_target", "resource differs from the authorization request's")
		}
		if refusal != nil {
			return nil
		}
		now := time.Now().UTC()
		g := store.OAuthGrant{ID: NewID("ogr_"), UserID: c.UserID, ClientID: c.ClientID, Scope: c.Scope, Resource: c.Resource, CreatedAt: now, LastUsedAt: now}
		if err := tx.CreateOAuthGrant(ctx, g); err != nil {
			return err
		}
		if err := tx.UseOAuthCode(ctx, hash, g.ID); errors.Is(err, store.ErrNotFound) {
			// A concurrent exchange took it first.
			refusal = invalidGrant("the code was used already")
			return errRollback
		} else if err != nil {
			return err
		}
		resp, err = issueTokens(ctx, tx, g.ID, now)
		return err
	})
	if errors.Is(err, errRollback) {
		err = nil
	}
	if err == nil && revoked != "" {
		s.RevokeCredentials(ctx, revoked)
	}
	if refusal != nil {
		return TokenResponse{}, refusal
	}
	return resp, err
}

var errRollback = errors.New("rolled back")

func pkceMatches(verifier, challenge string) bool {
	sum := sha256.Sum256([]byte(verifier))
	want := base64.RawURLEncoding.EncodeToString(sum[:])
	return subtle.ConstantTimeCompare([]byte(want), []byte(challenge)) == 1
}

// refresh rotates a refresh token: the old one stops working, and presenting it again
// revokes the whole grant (someone else holds a copy).
func (s *Service) refresh(ctx context.Context, r TokenRequest) (TokenResponse, error) {
	var resp TokenResponse
	var refusal *OAuthError
	var revoked string // a grant revoked because its code or refresh token was replayed
	hash := apikey.Hash(r.RefreshToken)
	err := s.Store.InTx(ctx, func(tx *store.Tx) error {
		k, err := tx.OAuthTokenByHash(ctx, hash)
		if errors.Is(err, store.ErrNotFound) || (err == nil && k.Kind != store.OAuthRefresh) {
			refusal = invalidGrant("the refresh token is unknown, revoked or expired; authorize again")
			return nil
		}
		if err != nil {
			return err
		}
		g, err := tx.OAuthGrantByID(ctx, k.GrantID)
		if errors.Is(err, store.ErrNotFound) {
			refusal = invalidGrant("the refresh token is unknown, revoked or expired; authorize again")
			return nil
		}
		if err != nil {
			return err
		}
		if g.ClientID != r.ClientID {
			refusal = invalidGrant("the refresh token was issued to another client")
			return nil
		}
		if !k.RotatedAt.IsZero() {
			refusal = invalidGrant("the refresh token was used already; the grant is revoked, authorize again")
			revoked = g.ID
			if err := tx.RevokeOAuthGrant(ctx, g.ID); err != nil {
				return err
			}
			return RecordRevocations(ctx, tx, g.ID)
		}
		now := time.Now().UTC()
		if !now.Before(k.ExpiresAt) {
			refusal = invalidGrant("the refresh token is unknown, revoked or expired; authorize again")
			return tx.DeleteOAuthToken(ctx, hash)
		}
		if err := tx.RotateOAuthToken(ctx, hash, now); errors.Is(err, store.ErrNotFound) {
			refusal = invalidGrant("the refresh token was used already")
			return errRollback
		} else if err != nil {
			return err
		}
		if err := tx.TouchOAuthGrant(ctx, g.ID, now); err != nil {
			return err
		}
		resp, err = issueTokens(ctx, tx, g.ID, now)
		return err
	})
	if errors.Is(err, errRollback) {
		err = nil
	}
	if err == nil && revoked != "" {
		s.RevokeCredentials(ctx, revoked)
	}
	if refusal != nil {
		return TokenResponse{}, refusal
	}
	return resp, err
}

func issueTokens(ctx context.Context, tx *store.Tx, grantID string, now time.Time) (TokenResponse, error) {
	access, refresh := apikey.Generate(apikey.KindOAuthAccess), apikey.Generate(apikey.KindOAuthRefresh)
	if err := tx.CreateOAuthToken(ctx, store.OAuthToken{Hash: apikey.Hash(access), Kind: store.OAuthAccess, GrantID: grantID,
		CreatedAt: now, ExpiresAt: now.Add(OAuthAccessTTL)}); err != nil {
		return TokenResponse{}, err
	}
	if err := tx.CreateOAuthToken(ctx, store.OAuthToken{Hash: apikey.Hash(refresh), Kind: store.OAuthRefresh, GrantID: grantID,
		CreatedAt: now, ExpiresAt: now.Add(OAuthRefreshTTL)}); err != nil {
		return TokenResponse{}, err
	}
	return TokenResponse{AccessToken: access, TokenType: "Bearer", ExpiresIn: int(OAuthAccessTTL / time.Second),
		RefreshToken: refresh, Scope: OAuthScope}, nil
}

// RevokeOAuthToken revokes a token (RFC 7009): a refresh token takes its whole grant
// with it, an access token goes alone. Unknown tokens, and tokens of another client than
// a given client_id, are no error (§2.2: the answer is the same).
func (s *Service) RevokeOAuthToken(ctx context.Context, token, clientID string) error {
	if token == "" {
		return nil
	}
	hash := apikey.Hash(token)
	var revoked string
	err := s.Store.InTx(ctx, func(tx *store.Tx) error {
		k, err := tx.OAuthTokenByHash(ctx, hash)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		g, err := tx.OAuthGrantByID(ctx, k.GrantID)
		if errors.Is(err, store.ErrNotFound) {
			return tx.DeleteOAuthToken(ctx, hash)
		}
		if err != nil {
			return err
		}
		if clientID != "" && clientID != g.ClientID {
			return nil
		}
		if ev := store.AuditOf(ctx); ev != nil {
			ev.CredID = g.ID // the app revoked with the grant's own token
		}
		if k.Kind == store.OAuthRefresh {
			auditAccount(ctx, g.UserID, "oauth_grant.revoke", g.ID, map[string]string{"client": g.ClientName}, nil)
			revoked = g.ID
			if err := tx.RevokeOAuthGrant(ctx, g.ID); err != nil {
				return err
			}
			return RecordRevocations(ctx, tx, g.ID)
		}
		auditAccount(ctx, g.UserID, "oauth_token.revoke", g.ID, map[string]string{"client": g.ClientName}, nil)
		return tx.DeleteOAuthToken(ctx, hash)
	})
	if err == nil && revoked != "" {
		s.RevokeCredentials(ctx, revoked)
	}
	return err
}

// --- grants and access tokens ---------------------------------------------------------

// OAuthGrants lists the user's connected apps.
func (s *Service) OAuthGrants(ctx context.Context, userID string) ([]store.OAuthGrant, error) {
	var out []store.OAuthGrant
	err := s.Store.InTx(ctx, func(tx *store.Tx) error {
		var err error
		out, err = tx.OAuthGrants(ctx, userID)
		return err
	})
	return out, err
}

// RevokeOAuthGrant deletes one of the user's grants with its tokens; another user's
// grant is "not found".
func (s *Service) RevokeOAuthGrant(ctx context.Context, userID, id string) error {
	if LimitsOf(ctx).Limited() {
		return AccountRefusal
	}
	err := s.Store.InTx(ctx, func(tx *store.Tx) error {
		if err := tx.DeleteOAuthGrant(ctx, userID, id); err != nil {
			return err
		}
		return RecordRevocations(ctx, tx, id)
	})
	if errors.Is(err, store.ErrNotFound) {
		return NotFound("grant")
	}
	if err == nil {
		s.RevokeCredentials(ctx, id)
	}
	return err
}

// IsOAuthAccessToken tells an OAuth access token by its kind prefix.
func IsOAuthAccessToken(tok string) bool { return strings.HasPrefix(tok, apikey.KindOAuthAccess) }

// UserByOAuthToken resolves an OAuth access token to its user, or ErrTokenInvalid; it
// is looked up on every request, so a revoked grant stops at once.
func (s *Service) UserByOAuthToken(ctx context.Context, tok string) (store.User, Credential, error) {
	var u store.User
	var cred Credential
	hash := apikey.Hash(tok)
	expired := false
	err := s.Store.InTx(ctx, func(tx *store.Tx) error {
		k, err := tx.OAuthTokenByHash(ctx, hash)
		if errors.Is(err, store.ErrNotFound) || (err == nil && k.Kind != store.OAuthAccess) {
			return ErrTokenInvalid
		}
		if err != nil {
			return err
		}
		now := time.Now()
		if !now.Before(k.ExpiresAt) {
			expired = true
			return tx.DeleteOAuthToken(ctx, hash)
		}
		g, err := tx.OAuthGrantByID(ctx, k.GrantID)
		if errors.Is(err, store.ErrNotFound) {
			return ErrTokenInvalid
		}
		if err != nil {
			return err
		}
		if now.Sub(g.LastUsedAt) >= lastUsedEvery {
			if err := tx.TouchOAuthGrant(ctx, g.ID, now); err != nil {
				return err
			}
		}
		// Revoking the grant (the connected app) ends what this token minted; the token
		// itself expires within the hour.
		cred = Credential{ID: g.ID, ExpiresAt: k.ExpiresAt}
		u, err = tx.UserByID(ctx, g.UserID)
		if errors.Is(err, store.ErrNotFound) {
			return ErrTokenInvalid
		}
		return err
	})
	if expired {
		return u, cred, ErrTokenInvalid
	}
	return u, cred, err
}

// SweepOAuth deletes expired requests, codes and tokens, grants left without tokens, and
// clients idle for OAuthClientIdle without a grant.
func (s *Service) SweepOAuth(ctx context.Context) (int64, error) {
	var n int64
	now := time.Now()
	err := s.Store.InTx(ctx, func(tx *store.Tx) error {
		var err error
		n, err = tx.SweepOAuth(ctx, now, now.Add(-OAuthClientIdle))
		return err
	})
	return n, err
}
