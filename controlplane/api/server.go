// Package api is the control plane's JSON API (docs/contract.md#section-9) and its MCP tools.
// Both call controlplane/service, where the rules live: every change is applied in a
// database transaction, written to the configuration mirror, and committed only when the
// mirror took it, so "200" means the data plane sees the change.
package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"reflect"
	"strings"
	"sync/atomic"
	"time"

	"github.com/otelcol-svc/otelcol-svc/controlplane/auth"
	"github.com/otelcol-svc/otelcol-svc/controlplane/service"
	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
)

// maxBody bounds every request body of the API.
const maxBody = 1 << 20

// Server serves the API. The business rules are Svc's; the handlers here and the MCP
// tools decode their input, call Svc, and show its result.
type Server struct {
	Svc    *service.Service
	Tokens *auth.Tokens
	Logger *slog.Logger
	// MirrorSynced reports whether the configuration mirror has been published since
	// start; /readyz is 503 until it has.
	MirrorSynced func() bool
	// PublicURL is SVC_PUBLIC_URL: the address clients reach the control plane at
	// (no trailing slash), the OAuth issuer; empty means the request's own address.
	PublicURL string
	// TrustedProxies are SVC_TRUSTED_PROXIES: peers whose X-Forwarded-For names the
	// client (auth.ClientAddr). Empty: every client is its peer address.
	TrustedProxies []netip.Prefix

	// Email sends verification, invitation and password mail; its Mailer is nil without
	// SVC_SMTP_URL (those features then say so).
	Email *service.Email
	// SSO is the instance's OpenID Connect provider (SVC_OIDC_*); nil: none.
	SSO *service.SSO

	loginByAddrAccount *auth.Limiter
	loginByDevice      *auth.Limiter
	warnedForwarded    atomic.Bool
	loginByAddr        *auth.Limiter
	signupByAddr       *auth.Limiter
	registerByAddr     *auth.Limiter
	emailByAddr        *auth.Limiter
	linkByAddr         *auth.Limiter
	resetByEmail       *auth.Limiter
	verifyByUser       *auth.Limiter
	ssoByAddr          *auth.Limiter
}

// Handler returns the HTTP handler of the API.
func (s *Server) Handler() http.Handler {
	s.loginByAddrAccount = auth.NewLimiter(10, 15*time.Minute)
	s.loginByAddr = auth.NewLimiter(50, 15*time.Minute)
	s.loginByDevice = auth.NewLimiter(10, 15*time.Minute)
	s.signupByAddr = auth.NewLimiter(10, time.Hour)
	s.registerByAddr = auth.NewLimiter(registerPerHour, time.Hour)
	s.emailByAddr = auth.NewLimiter(20, time.Hour)
	s.linkByAddr = auth.NewLimiter(linkUsesPerHour, time.Hour)
	s.resetByEmail = auth.NewLimiter(3, time.Hour)
	s.verifyByUser = auth.NewLimiter(5, time.Hour)
	s.ssoByAddr = auth.NewLimiter(60, 15*time.Minute)
	if s.Email == nil {
		s.Email = &service.Email{Svc: s.Svc, Logger: s.Logger}
	}
	mux := http.NewServeMux()
	route(mux, "/healthz", methods{"GET": s.healthz})
	route(mux, "/readyz", methods{"GET": s.readyz})
	route(mux, "/api/v1/auth/signup", methods{"POST": s.signup})
	route(mux, "/api/v1/auth/login", methods{"POST": s.login})
	route(mux, "/api/v1/auth/session", methods{"GET": s.sessionInfo, "POST": s.sessionLogin, "DELETE": s.sessionLogout})
	route(mux, "/api/v1/auth/session/signup", methods{"POST": s.sessionSignup})
	route(mux, "/api/v1/auth/logout-all", methods{"POST": s.authed(s.logoutAll)})
	route(mux, "/api/v1/auth/verify-email", methods{"POST": s.verifyEmail})
	route(mux, "/api/v1/auth/password-reset", methods{"POST": s.passwordReset})
	route(mux, "/api/v1/auth/password-reset/confirm", methods{"POST": s.passwordResetConfirm})
	route(mux, "/api/v1/auth/invitation", methods{"POST": s.invitationInfo})
	route(mux, "/api/v1/auth/invitation/accept", methods{"POST": s.acceptInvitation})
	route(mux, "/api/v1/auth/session/invitation/accept", methods{"POST": s.acceptInvitationSession})
	route(mux, "/api/v1/auth/sso", methods{"GET": s.ssoInfo})
	route(mux, "/api/v1/auth/sso/start", methods{"GET": s.ssoStart})
	route(mux, ssoCallbackPath, methods{"GET": s.ssoCallback})
	route(mux, "/api/v1/sso", methods{"GET": s.authed(s.ssoProvider)})
	route(mux, "/api/v1/me", methods{"GET": s.authed(s.me)})
	route(mux, "/api/v1/me/password", methods{"PUT": s.authed(s.changePassword)})
	route(mux, "/api/v1/me/email", methods{"GET": s.authed(s.emailStatus)})
	route(mux, "/api/v1/me/email/verify", methods{"POST": s.authed(s.resendVerification)})
	route(mux, "/api/v1/tokens", methods{"GET": s.authed(s.listAccessTokens), "POST": s.authed(s.createAccessToken)})
	route(mux, "/api/v1/tokens/{token_id}", methods{"DELETE": s.authed(s.revokeAccessToken)})
	route(mux, "/api/v1/projects", methods{"GET": s.authed(s.listProjects), "POST": s.authed(s.createProject)})
	route(mux, "/api/v1/projects/{id}", methods{"GET": s.authed(s.getProject), "PATCH": s.authed(s.patchProject), "DELETE": s.authed(s.deleteProject)})
	route(mux, "/api/v1/projects/{id}/keys", methods{"GET": s.authed(s.listKeys), "POST": s.authed(s.createKey)})
	route(mux, "/api/v1/projects/{id}/keys/{key_id}", methods{"PATCH": s.authed(s.patchKey), "DELETE": s.authed(s.deleteKey)})
	route(mux, "/api/v1/projects/{id}/members", methods{"GET": s.authed(s.listMembers), "POST": s.authed(s.addMemberOrInvite)})
	route(mux, "/api/v1/projects/{id}/invitations", methods{"GET": s.authed(s.listInvitations)})
	route(mux, "/api/v1/projects/{id}/invitations/{invitation_id}", methods{"DELETE": s.authed(s.deleteInvitation)})
	route(mux, "/api/v1/projects/{id}/members/{user_id}", methods{"DELETE": s.authed(s.deleteMember)})
	route(mux, "/api/v1/projects/{id}/pipeline", methods{"GET": s.authed(s.getPipeline), "PUT": s.authed(s.putPipeline), "PATCH": s.authed(s.patchPipeline)})
	route(mux, "/api/v1/projects/{id}/pipeline/validate", methods{"POST": s.authed(s.checkPipeline)})
	route(mux, "/api/v1/projects/{id}/pipeline/rotate-secret", methods{"POST": s.authed(s.rotateSecret)})
	route(mux, "/api/v1/projects/{id}/pipeline/versions", methods{"GET": s.authed(s.listPipelineVersions)})
	route(mux, "/api/v1/projects/{id}/pipeline/versions/{n}", methods{"GET": s.authed(s.getPipelineVersion)})
	route(mux, "/api/v1/projects/{id}/pipeline/versions/{n}/restore", methods{"POST": s.authed(s.restorePipelineVersion)})
	route(mux, "/api/v1/projects/{id}/pipeline/backlog", methods{"GET": s.authed(s.getBacklog), "POST": s.authed(s.postBacklog)})
	route(mux, "/api/v1/projects/{id}/sinks", methods{"GET": s.authed(s.listSinks), "POST": s.authed(s.createSink)})
	route(mux, "/api/v1/projects/{id}/sinks/{sink_id}", methods{"GET": s.authed(s.getSink), "PATCH": s.authed(s.patchSink), "DELETE": s.authed(s.deleteSink)})
	route(mux, "/api/v1/projects/{id}/sinks/{sink_id}/test", methods{"POST": s.authed(s.testSink)})
	route(mux, "/api/v1/projects/{id}/sources", methods{"GET": s.authed(s.listSources), "POST": s.authed(s.createSource)})
	route(mux, "/api/v1/projects/{id}/sources/test", methods{"POST": s.authed(s.testSource)})
	route(mux, "/api/v1/projects/{id}/sources/{source_id}", methods{"GET": s.authed(s.getSource), "DELETE": s.authed(s.deleteSource)})
	route(mux, "/api/v1/projects/{id}/sources/{source_id}/rotate-secret", methods{"POST": s.authed(s.rotateSourceSecret)})
	route(mux, "/api/v1/projects/{id}/sso-domains", methods{"GET": s.authed(s.getSSODomains), "PUT": s.authed(s.putSSODomains)})
	route(mux, "/api/v1/projects/{id}/usage", methods{"GET": s.authed(s.projectUsage)})
	route(mux, "/api/v1/usage", methods{"GET": s.authed(s.accountUsage)})
	route(mux, "/api/v1/projects/{id}/console-token", methods{"POST": s.authed(s.consoleToken)})
	route(mux, "/api/v1/projects/{id}/audit", methods{"GET": s.authed(s.projectAudit)})
	route(mux, "/api/v1/audit", methods{"GET": s.authed(s.accountAudit)})
	mux.Handle("/mcp", s.mcpChallenge(s.authed(s.mcpHandler().ServeHTTP)))
	route(mux, mcpMetadataPath, corsMethods(methods{"GET": s.protectedResource}))
	route(mux, mcpMetadataPath+"/mcp", corsMethods(methods{"GET": s.protectedResource}))
	route(mux, "/.well-known/oauth-authorization-server", corsMethods(methods{"GET": s.authServerMetadata}))
	route(mux, "/oauth/register", corsMethods(methods{"POST": s.registerClient}))
	route(mux, "/oauth/authorize", methods{"GET": s.authorize})
	route(mux, "/oauth/token", corsMethods(methods{"POST": s.token}))
	route(mux, "/oauth/revoke", corsMethods(methods{"POST": s.revoke}))
	mux.HandleFunc("/oauth/", oauthNotFound)
	route(mux, "/api/v1/oauth/requests/{id}", methods{"GET": s.authed(s.oauthRequest)})
	route(mux, "/api/v1/oauth/requests/{id}/approve", methods{"POST": s.authed(s.approveOAuthRequest)})
	route(mux, "/api/v1/oauth/requests/{id}/deny", methods{"POST": s.authed(s.denyOAuthRequest)})
	route(mux, "/api/v1/oauth/grants", methods{"GET": s.authed(s.listOAuthGrants)})
	route(mux, "/api/v1/oauth/grants/{id}", methods{"DELETE": s.authed(s.revokeOAuthGrant)})
	mux.HandleFunc("/", s.dashboard())
	return securityHeaders(mux)
}

type methods map[string]http.HandlerFunc

// route dispatches by method and answers others with the contract's 405 shape.
func route(mux *http.ServeMux, pattern string, m methods) {
	allow := make([]string, 0, len(m))
	for k := range m {
		allow = append(allow, k)
	}
	mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		if h, ok := m[r.Method]; ok {
			h(w, r)
			return
		}
		w.Header().Set("Allow", strings.Join(allow, ", "))
		apierror.Write(w, apierror.New(http.StatusMethodNotAllowed, apierror.MethodNotAllowed, r.Method+" is not allowed here"))
	})
}

func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := s.Svc.Store.Ping(ctx); err != nil {
		fail(w, unavailable("the database is unreachable"))
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok", "database": s.Svc.Store.Kind()})
}

// readyz answers 200 only when the control plane can do its work: the database answers,
// NATS is connected and the configuration mirror has been published (so the data plane
// knows every key and project). Otherwise 503 naming what is not ready. /healthz stays
// the liveness check (the process serves and its database answers).
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	checks := map[string]string{"database": "ok", "nats": "ok", "mirror": "ok"}
	var notReady []string
	if err := s.Svc.Store.Ping(ctx); err != nil {
		checks["database"], notReady = "unreachable", append(notReady, "the database is unreachable")
	}
	if _, _, err := s.Svc.Mirror(ctx); err != nil {
		checks["nats"], notReady = "unreachable", append(notReady, "NATS is unreachable")
	}
	if s.MirrorSynced != nil && !s.MirrorSynced() {
		checks["mirror"], notReady = "not yet published", append(notReady, "the configuration mirror is not published yet")
	}
	if len(notReady) > 0 {
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "not ready", "checks": checks,
			"error": map[string]string{"code": apierror.Unavailable, "message": strings.Join(notReady, "; ")}})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ready", "checks": checks})
}

// --- helpers -------------------------------------------------------------------------

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

func fail(w http.ResponseWriter, e *apierror.Error) { apierror.Write(w, e) }

func badBody(msg string) *apierror.Error { return service.BadBody(msg) }

func notFound(what string) *apierror.Error { return service.NotFound(what) }

func unavailable(msg string) *apierror.Error { return service.Unavailable(msg) }

// decode reads a JSON body strictly: bounded, one object, no unknown fields (a typo in a
// field name is an error, not a silent default).
func decode(r *http.Request, v any) *apierror.Error {
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(strings.ToLower(ct), "application/json") {
		return apierror.New(http.StatusUnsupportedMediaType, apierror.UnsupportedMediaType, "send Content-Type: application/json")
	}
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, maxBody))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return apierror.New(http.StatusRequestEntityTooLarge, apierror.PayloadTooLarge, fmt.Sprintf("the body is larger than %d bytes", maxBody))
		}
		return badBody("the body could not be read")
	}
	return decodeBytes(body, v)
}

func decodeBytes(body []byte, v any) *apierror.Error {
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var syn *json.SyntaxError
		var typ *json.UnmarshalTypeError
		switch {
		case errors.As(err, &syn), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
			return apierror.New(http.StatusBadRequest, apierror.InvalidJSON, "the body is not valid JSON: "+err.Error())
		case errors.As(err, &typ):
			if typ.Field == "" {
				return badBody(fmt.Sprintf("the body must be %s, not %s", jsonWords(typ.Type), jsonValueWords(typ.Value)))
			}
			return badBody(fmt.Sprintf("field %q must be %s, not %s", typ.Field, jsonWords(typ.Type), jsonValueWords(typ.Value)))
		default:
			return badBody(strings.TrimPrefix(err.Error(), "json: "))
		}
	}
	if dec.More() {
		return apierror.New(http.StatusBadRequest, apierror.InvalidJSON, "the body holds more than one JSON value")
	}
	return nil
}

// jsonWords says in JSON's words what a Go type decodes from: the client wrote JSON and
// must not be told about mirror.Pipeline or map[string]string.
func jsonWords(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return "a JSON object"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return "another kind of value"
}

// jsonValueWords names the JSON value encoding/json found: its kind, or for a number
// that does not fit ("number 1.5") the number itself.
func jsonValueWords(v string) string {
	kind, literal, _ := strings.Cut(v, " ")
	switch kind {
	case "number":
		if literal != "" && len(literal) <= 32 {
			return literal
		}
		return "a number"
	case "array", "object":
		return "an " + kind
	case "bool":
		return "true or false"
	case "":
		return "something else"
	}
	return "a " + kind
}

// internal logs an unexpected error and answers 500 without details.
func (s *Server) internal(w http.ResponseWriter, r *http.Request, err error) {
	s.Logger.Error("request failed", "method", r.Method, "path", r.URL.Path, "error", err)
	fail(w, apierror.New(http.StatusInternalServerError, apierror.Internal, "something went wrong on our side; try again"))
}

// clientAddr is the request's client address, through trusted proxies.
func (s *Server) clientAddr(r *http.Request) string {
	if peer, yes := auth.ForwardedByUntrusted(r, s.TrustedProxies); yes && !s.warnedForwarded.Swap(true) {
		s.Logger.Warn("requests carry X-Forwarded-For from a peer not in SVC_TRUSTED_PROXIES: the header is ignored, and if that peer is your reverse proxy every client behind it is counted as its address for login and signup limits; list it in SVC_TRUSTED_PROXIES",
			"peer", peer)
	}
	return auth.ClientAddr(r, s.TrustedProxies)
}

func ts(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC().Format(time.RFC3339)
}
