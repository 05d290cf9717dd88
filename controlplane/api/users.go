package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/otelcol-svc/otelcol-svc/controlplane/auth"
	"github.com/otelcol-svc/otelcol-svc/controlplane/service"
	"github.com/otelcol-svc/otelcol-svc/controlplane/store"
	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
)

type credentials struct {
	Email    string `json:"email"`
	Password string `json:"password"`
}

type userJSON struct {
	ID    string `json:"id"`
	Email string `json:"email"`
}

// rateLimited is the contract's 429 with Retry-After, the wait rounded up to a second.
func rateLimited(what string, wait time.Duration) *apierror.Error {
	secs := int((wait + time.Second - 1) / time.Second)
	e := apierror.New(http.StatusTooManyRequests, apierror.RateLimited, fmt.Sprintf("%s; try again in %d s", what, secs))
	e.RetryAfter = time.Duration(secs) * time.Second
	return e
}

// limitAddr is the client address rate limits count by: an IPv6 client by its /64, the
// block one host or customer line usually gets, or it could take a fresh address for
// every try.
func (s *Server) limitAddr(r *http.Request) string {
	client := s.clientAddr(r)
	a, err := netip.ParseAddr(client)
	if err != nil {
		return client
	}
	if a = a.Unmap(); a.Is6() {
		return netip.PrefixFrom(a.WithZone(""), 64).Masked().String()
	}
	return a.String()
}

func (s *Server) signup(w http.ResponseWriter, r *http.Request) {
	if u, ok := s.createAccount(w, r); ok {
		s.respondToken(w, r, http.StatusCreated, u)
	}
}

// createAccount creates the account the request asks for, or answers why not.
func (s *Server) createAccount(w http.ResponseWriter, r *http.Request) (store.User, bool) {
	// Every attempt counts, refused ones too: a 409 tells whether an email has an account.
	if ok, wait := s.signupByAddr.Take(s.limitAddr(r), time.Now()); !ok {
		fail(w, rateLimited("too many signups from your address", wait))
		return store.User{}, false
	}
	var c credentials
	if e := decode(r, &c); e != nil {
		fail(w, e)
		return store.User{}, false
	}
	email, ok := service.NormalizeEmail(c.Email)
	if !ok {
		fail(w, badBody("email must be an address like ops@example.com"))
		return store.User{}, false
	}
	if err := service.CheckNewPassword(c.Password); err != nil {
		s.answer(w, r, err, "account")
		return store.User{}, false
	}
	hash, err := auth.HashPassword(c.Password)
	if err != nil {
		s.internal(w, r, err)
		return store.User{}, false
	}
	u := store.User{ID: service.NewID("u_"), Email: email, PasswordHash: hash, CreatedAt: time.Now().UTC()}
	actx := service.AccountCreated(r.Context(), s.clientAddr(r), u)
	err = s.Svc.Store.InTx(actx, func(tx *store.Tx) error { return tx.CreateUser(actx, u) })
	if errors.Is(err, store.ErrConflict) {
		fail(w, apierror.New(http.StatusConflict, apierror.Conflict, "an account with this email exists; log in instead"))
		return store.User{}, false
	}
	if err != nil {
		s.internal(w, r, err)
		return store.User{}, false
	}
	s.sendVerificationAfterSignup(r, u)
	return u, true
}

func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	if u, ok := s.verifyLogin(w, r); ok {
		s.respondToken(w, r, http.StatusOK, u)
	}
}

// verifyLogin checks the request's email and password, rate limited, or answers why not.
func (s *Server) verifyLogin(w http.ResponseWriter, r *http.Request) (store.User, bool) {
	var c credentials
	if e := decode(r, &c); e != nil {
		fail(w, e)
		return store.User{}, false
	}
	email, _ := service.NormalizeEmail(c.Email)
	now := time.Now()
	// Failures are limited per address and account, and per address, never per account
	// alone: whoever guesses slows down themselves, not the account's owner. A browser
	// that logged in to this account before (its device cookie, auth.Device) is limited
	// on its own instead, so not even failures from the owner's own address (a shared
	// NAT, or a proxy missing from SVC_TRUSTED_PROXIES) stop the owner there.
	addr := s.limitAddr(r)
	pair := addr + " " + email
	device, known := s.Tokens.Device(r, email, now)
	if known {
		if ok, wait := s.loginByDevice.Allow(device, now); !ok {
			fail(w, rateLimited("too many failed logins for this account from this browser", wait))
			return store.User{}, false
		}
	} else {
		if ok, wait := s.loginByAddrAccount.Allow(pair, now); !ok {
			fail(w, rateLimited("too many failed logins for this account from your address", wait))
			return store.User{}, false
		}
		if ok, wait := s.loginByAddr.Allow(addr, now); !ok {
			fail(w, rateLimited("too many failed logins from your address", wait))
			return store.User{}, false
		}
	}
	var u store.User
	err := s.Svc.Store.InTx(r.Context(), func(tx *store.Tx) error {
		var err error
		u, err = tx.UserByEmail(r.Context(), email)
		return err
	})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		s.internal(w, r, err)
		return store.User{}, false
	}
	if errors.Is(err, store.ErrNotFound) {
		auth.BurnTime(c.Password)
	} else {
		err = auth.CheckPassword(c.Password, u.PasswordHash)
	}
	if err != nil {
		if known {
			s.loginByDevice.Fail(device, now)
		} else {
			s.loginByAddrAccount.Fail(pair, now)
			s.loginByAddr.Fail(addr, now)
		}
		fail(w, apierror.New(http.StatusUnauthorized, apierror.InvalidCredentials, "wrong email or password"))
		return store.User{}, false
	}
	if known {
		s.loginByDevice.Reset(device)
	}
	s.loginByAddrAccount.Reset(pair)
	http.SetCookie(w, s.Tokens.DeviceCookie(r, email, now))
	return u, true
}

func (s *Server) respondToken(w http.ResponseWriter, r *http.Request, status int, u store.User) {
	gen, err := s.Svc.LoginGeneration(r.Context(), u.ID)
	if err != nil {
		s.internal(w, r, err)
		return
	}
	tok, err := s.Tokens.IssueGeneration(u.ID, u.Email, gen, time.Now())
	if err != nil {
		s.internal(w, r, err)
		return
	}
	writeJSON(w, status, map[string]any{"token": tok, "user": userJSON{ID: u.ID, Email: u.Email}})
}

type userKey struct{}

// authed requires a valid login token of an existing user.
func (s *Server) authed(h http.HandlerFunc) http.HandlerFunc {
	h = s.withAudit(h)
	return func(w http.ResponseWriter, r *http.Request) {
		const p = "bearer "
		hdr := r.Header.Get("Authorization")
		// The dashboard's session cookie counts for the JSON API only (not /mcp); a
		// Bearer token, when sent, is what counts.
		if hdr == "" && strings.HasPrefix(r.URL.Path, "/api/v1/") {
			if secret := auth.SessionFromCookie(r); secret != "" {
				s.sessionAuthed(w, r, secret, h)
				return
			}
		}
		if len(hdr) <= len(p) || !strings.EqualFold(hdr[:len(p)], p) {
			fail(w, apierror.New(http.StatusUnauthorized, apierror.InvalidToken, "sign in: send Authorization: Bearer <token from /api/v1/auth/login>"))
			return
		}
		tok := strings.TrimSpace(hdr[len(p):])
		if service.IsOAuthAccessToken(tok) {
			s.oauthAuthed(w, r, tok, h)
			return
		}
		if service.IsAccessToken(tok) {
			s.accessTokenAuthed(w, r, h, tok, s.Svc.UserByAccessToken,
				"the access token is unknown, revoked or expired; create a new one (POST /api/v1/tokens)")
			return
		}
		claims, err := s.Tokens.Parse(tok)
		if err != nil {
			fail(w, apierror.New(http.StatusUnauthorized, apierror.InvalidToken, "the token is invalid or expired; log in again"))
			return
		}
		var u store.User
		var gen int64
		err = s.Svc.Store.InTx(r.Context(), func(tx *store.Tx) error {
			var err error
			if u, err = tx.UserByID(r.Context(), claims.Subject); err != nil {
				return err
			}
			gen, err = tx.LoginGeneration(r.Context(), u.ID)
			return err
		})
		if errors.Is(err, store.ErrNotFound) {
			fail(w, apierror.New(http.StatusUnauthorized, apierror.InvalidToken, "the account of this token no longer exists"))
			return
		}
		if err != nil {
			s.internal(w, r, err)
			return
		}
		if claims.Generation != gen {
			fail(w, apierror.New(http.StatusUnauthorized, apierror.InvalidToken, "this token was ended by logging out everywhere or a password change; log in again"))
			return
		}
		// A login token is revoked with its whole generation: what it mints names that.
		cred := service.Credential{ID: service.LoginCredentialID(u.ID, gen)}
		if claims.ExpiresAt != nil {
			cred.ExpiresAt = claims.ExpiresAt.Time
		}
		ctx := context.WithValue(r.Context(), userKey{}, u)
		h(w, r.WithContext(service.WithCredential(ctx, cred)))
	}
}

func currentUser(r *http.Request) store.User { return r.Context().Value(userKey{}).(store.User) }

// currentCredential is the credential a request was authenticated with: console tokens
// it mints name it, and end when it is revoked.
func currentCredential(ctx context.Context) service.Credential {
	return service.CredentialOf(ctx)
}

// oauthAuthed serves h at /mcp for the user of an OAuth access token, which acts as
// their personal access token would. The token was issued for the MCP resource (RFC
// 8707), so the JSON API refuses it.
func (s *Server) oauthAuthed(w http.ResponseWriter, r *http.Request, tok string, h http.HandlerFunc) {
	if r.URL.Path != "/mcp" {
		fail(w, apierror.New(http.StatusUnauthorized, apierror.InvalidToken, "OAuth access tokens are for /mcp; use a personal access token for the API"))
		return
	}
	s.accessTokenAuthed(w, r, h, tok, s.Svc.UserByOAuthToken,
		"the OAuth access token is unknown, revoked or expired; sign in again from the MCP client")
}

// accessTokenAuthed serves h for the user a personal or OAuth access token resolved to,
// marked as acting through a token; an invalid token is refused with the message given.
func (s *Server) accessTokenAuthed(w http.ResponseWriter, r *http.Request, h http.HandlerFunc, tok string,
	resolve func(context.Context, string) (store.User, service.Credential, error), invalid string) {
	u, cred, err := resolve(r.Context(), tok)
	if errors.Is(err, service.ErrTokenInvalid) {
		fail(w, apierror.New(http.StatusUnauthorized, apierror.InvalidToken, invalid))
		return
	}
	if err != nil {
		s.internal(w, r, err)
		return
	}
	// A read-only token changes nothing through the API. The POSTs that only read (a
	// console token, checks and tests, a backlog's preview) pass, as their MCP tools do,
	// and the service checks their level; at /mcp every call is a POST: the service
	// refuses the tools that change something (Limits).
	if cred.Limits.ReadOnly && !safeMethod(r.Method) && r.URL.Path != "/mcp" && !readingPOSTs[r.Pattern] {
		fail(w, readOnlyRefusal)
		return
	}
	ctx := context.WithValue(r.Context(), userKey{}, u)
	ctx = service.WithCredential(ctx, cred)
	ctx = service.WithLimits(ctx, cred.Limits)
	h(w, r.WithContext(context.WithValue(ctx, accessTokenKey{}, true)))
}

// readingPOSTs are the routes whose POST reads (the service checks them at Read, or
// refuses what is a change, as StartBacklog does a read-only token's backlog run).
var readingPOSTs = map[string]bool{
	"/api/v1/projects/{id}/console-token":        true,
	"/api/v1/projects/{id}/pipeline/validate":    true,
	"/api/v1/projects/{id}/sources/test":         true,
	"/api/v1/projects/{id}/sinks/{sink_id}/test": true,
	"/api/v1/projects/{id}/pipeline/backlog":     true,
}

// readOnlyRefusal answers a change asked for with a read-only personal access token.
var readOnlyRefusal = service.ReadOnlyRefusal

// credentialLimits are the limits of the credential a request came with.
func credentialLimits(r *http.Request) service.Limits { return service.LimitsOf(r.Context()) }

// accessTokenKey marks a request authenticated by a personal access token or an OAuth
// access token.
type accessTokenKey struct{}

func viaAccessToken(r *http.Request) bool {
	v, _ := r.Context().Value(accessTokenKey{}).(bool)
	return v
}

func (s *Server) me(w http.ResponseWriter, r *http.Request) {
	u := currentUser(r)
	writeJSON(w, http.StatusOK, userJSON{ID: u.ID, Email: u.Email})
}
