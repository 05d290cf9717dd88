package api

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/otelcol-svc/otelcol-svc/controlplane/auth"
	"github.com/otelcol-svc/otelcol-svc/controlplane/service"
	"github.com/otelcol-svc/otelcol-svc/controlplane/store"
	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
	"github.com/otelcol-svc/otelcol-svc/internal/apikey"
)

// Browser sessions (the dashboard's login): POST /api/v1/auth/session logs in and
// POST /api/v1/auth/session/signup creates an account, both answering with the user and a
// CSRF token and setting the session cookie instead of returning a token; GET tells the
// page who is signed in; DELETE logs out.
//
// A session is a row of its own table (store.Session: the secret stored as a hash),
// checked against the database on every request, so logging out ends it at once. It is
// not a personal access token: the token API never sees it.

const (
	sessionIDPrefix = "ses_"
	// maxSessions bounds the rows one account's logins can leave: the oldest go first.
	maxSessions = 20
	// sessionTouchEvery bounds the writes a busy session causes.
	sessionTouchEvery = time.Minute
)

type sessionKey struct{}

// viaSession reports whether a request was authenticated by the session cookie.
func viaSession(r *http.Request) bool {
	v, _ := r.Context().Value(sessionKey{}).(bool)
	return v
}

func (s *Server) sessionLogin(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(w, r) {
		return
	}
	if u, ok := s.verifyLogin(w, r); ok {
		s.startSession(w, r, http.StatusOK, u)
	}
}

func (s *Server) sessionSignup(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(w, r) {
		return
	}
	if u, ok := s.createAccount(w, r); ok {
		s.startSession(w, r, http.StatusCreated, u)
	}
}

func sameOrigin(w http.ResponseWriter, r *http.Request) bool {
	if err := auth.CheckSameOrigin(r); err != nil {
		fail(w, apierror.New(http.StatusForbidden, apierror.Forbidden, "refused: "+err.Error()+"; log in from the dashboard's own page"))
		return false
	}
	return true
}

// startSession stores a new session for u, sets its cookie, and answers the user and the
// session's CSRF token (never the session secret: the page script has no use for it).
func (s *Server) startSession(w http.ResponseWriter, r *http.Request, status int, u store.User) {
	secret := apikey.Generate(auth.SessionKind)
	now := time.Now().UTC()
	ses := store.Session{ID: service.NewID(sessionIDPrefix), UserID: u.ID, Hash: apikey.Hash(secret),
		CreatedAt: now, ExpiresAt: now.Add(auth.SessionTTL)}
	var ended []string
	err := s.Svc.Store.InTx(r.Context(), func(tx *store.Tx) error {
		// Room for this one: the oldest go, so repeated logins cannot grow the table.
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
		s.internal(w, r, err)
		return
	}
	s.Svc.RevokeCredentials(r.Context(), ended...)
	http.SetCookie(w, auth.SessionCookie(r, secret))
	writeJSON(w, status, s.sessionJSON(u, secret))
}

// sessionJSON is what the page learns of its session: who, the CSRF token for its
// writes, and where the receiver is (for the curl lines it shows).
func (s *Server) sessionJSON(u store.User, secret string) map[string]any {
	return map[string]any{"user": userJSON{ID: u.ID, Email: u.Email}, "csrf_token": s.Tokens.CSRFToken(secret),
		"receiver_url": s.Svc.ReceiverURL}
}

// sessionUser resolves a session secret to its session and user; store.ErrNotFound when
// it is unknown, logged out or expired.
func (s *Server) sessionUser(ctx context.Context, secret string) (store.Session, store.User, error) {
	var ses store.Session
	var u store.User
	err := s.Svc.Store.InTx(ctx, func(tx *store.Tx) error {
		var err error
		ses, err = tx.SessionByHash(ctx, apikey.Hash(secret))
		if err != nil {
			return err
		}
		now := time.Now()
		if !now.Before(ses.ExpiresAt) {
			return store.ErrNotFound
		}
		if now.Sub(ses.LastSeenAt) >= sessionTouchEvery {
			if err := tx.TouchSession(ctx, ses.ID, now); err != nil {
				return err
			}
		}
		u, err = tx.UserByID(ctx, ses.UserID)
		return err
	})
	return ses, u, err
}

// sessionAuthed serves h for the session's user; writes must pass the CSRF check.
func (s *Server) sessionAuthed(w http.ResponseWriter, r *http.Request, secret string, h http.HandlerFunc) {
	ses, u, err := s.sessionUser(r.Context(), secret)
	if errors.Is(err, store.ErrNotFound) {
		http.SetCookie(w, auth.ClearSessionCookie(r))
		fail(w, apierror.New(http.StatusUnauthorized, apierror.InvalidToken, "your session has ended; log in again"))
		return
	}
	if err != nil {
		s.internal(w, r, err)
		return
	}
	if !safeMethod(r.Method) {
		if err := s.Tokens.CheckCSRF(r, secret); err != nil {
			fail(w, apierror.New(http.StatusForbidden, apierror.Forbidden, "refused a cookie-authenticated change: "+err.Error()+"; reload the dashboard and try again"))
			return
		}
	}
	ctx := context.WithValue(r.Context(), userKey{}, u)
	ctx = service.WithCredential(ctx, service.Credential{ID: ses.ID, ExpiresAt: ses.ExpiresAt})
	h(w, r.WithContext(context.WithValue(ctx, sessionKey{}, true)))
}

func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// sessionInfo tells the page who is signed in, with the CSRF token for its writes.
func (s *Server) sessionInfo(w http.ResponseWriter, r *http.Request) {
	secret := auth.SessionFromCookie(r)
	if secret == "" {
		fail(w, apierror.New(http.StatusUnauthorized, apierror.InvalidToken, "not logged in"))
		return
	}
	s.sessionAuthed(w, r, secret, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, s.sessionJSON(currentUser(r), secret))
	})
}

// sessionLogout ends the session: its row goes, so the cookie stops working at once even
// if a copy of it survives in the browser, and the console tokens it minted stop at the
// receivers within a second.
func (s *Server) sessionLogout(w http.ResponseWriter, r *http.Request) {
	secret := auth.SessionFromCookie(r)
	if secret == "" {
		http.SetCookie(w, auth.ClearSessionCookie(r))
		w.WriteHeader(http.StatusNoContent)
		return
	}
	s.sessionAuthed(w, r, secret, func(w http.ResponseWriter, r *http.Request) {
		err := s.Svc.Store.InTx(r.Context(), func(tx *store.Tx) error {
			ses, err := tx.SessionByHash(r.Context(), apikey.Hash(secret))
			if err != nil {
				return err
			}
			if err := tx.DeleteSession(r.Context(), ses.ID); err != nil {
				return err
			}
			return service.RecordRevocations(r.Context(), tx, ses.ID)
		})
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			s.internal(w, r, err)
			return
		}
		s.Svc.RevokeCredentials(r.Context(), currentCredential(r.Context()).ID)
		http.SetCookie(w, auth.ClearSessionCookie(r))
		w.WriteHeader(http.StatusNoContent)
	})
}

// logoutAll ends every credential of the caller (POST /api/v1/auth/logout-all): their
// dashboard sessions, login tokens, personal access tokens and OAuth grants at once, and
// the console tokens those minted at the receivers within a second. A token limited to
// some projects or to reading may not: the account is outside its limits.
func (s *Server) logoutAll(w http.ResponseWriter, r *http.Request) {
	if credentialLimits(r).Limited() {
		fail(w, service.AccountRefusal)
		return
	}
	if err := s.Svc.RevokeAllForUser(r.Context(), currentUser(r).ID); err != nil {
		s.internal(w, r, err)
		return
	}
	if viaSession(r) {
		http.SetCookie(w, auth.ClearSessionCookie(r))
	}
	w.WriteHeader(http.StatusNoContent)
}
