package api

import (
	"errors"
	"net/http"
	"time"

	"github.com/otelcol-svc/otelcol-svc/controlplane/auth"
	"github.com/otelcol-svc/otelcol-svc/controlplane/service"
	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
)

// takeMailTry counts an unauthenticated request that mails someone against the client's
// address, so no one floods mailboxes from it (uses of links are takeLinkUse's).
func (s *Server) takeMailTry(w http.ResponseWriter, r *http.Request) bool {
	return s.takeFromAddr(w, r, s.emailByAddr)
}

// takeFromAddr takes one from l for the client's address, answering 429 when it is used up.
func (s *Server) takeFromAddr(w http.ResponseWriter, r *http.Request, l *auth.Limiter) bool {
	if ok, wait := l.Take(s.limitAddr(r), time.Now()); !ok {
		fail(w, rateLimited("too many requests from your address", wait))
		return false
	}
	return true
}

// passwordReset is POST /api/v1/auth/password-reset: 202 whether or not the address has
// an account, so it does not tell who has one.
func (s *Server) passwordReset(w http.ResponseWriter, r *http.Request) {
	if !s.Email.Enabled() {
		fail(w, service.ErrEmailOff())
		return
	}
	if !s.takeMailTry(w, r) {
		return
	}
	var b struct {
		Email string `json:"email"`
	}
	if e := decode(r, &b); e != nil {
		fail(w, e)
		return
	}
	// The same address asked again within the hour is not mailed again (the first link
	// still works), whoever asks: a stranger cannot fill someone's mailbox.
	email, ok := service.NormalizeEmail(b.Email)
	if !ok {
		fail(w, badBody("email must be an address like ops@example.com"))
		return
	}
	if ok, _ := s.resetByEmail.Take(email, time.Now()); ok {
		if err := s.Email.RequestPasswordReset(r.Context(), email); err != nil {
			s.answer(w, r, err, "account")
			return
		}
	}
	writeJSON(w, http.StatusAccepted, map[string]any{"message": "if an account has this address, a link to reset its password is on its way"})
}

// passwordResetConfirm sets the password a reset link was mailed for and ends every
// credential of the account.
func (s *Server) passwordResetConfirm(w http.ResponseWriter, r *http.Request) {
	if !s.takeLinkUse(w, r) {
		return
	}
	var b tokenBody
	if e := decode(r, &b); e != nil {
		fail(w, e)
		return
	}
	u, err := s.Email.ConfirmPasswordReset(r.Context(), b.Token, b.Password)
	if err == nil {
		// No actor before the link was used, so no route records it: the account is.
		if err := s.Svc.RecordAudit(r.Context(), service.Actor{UserID: u.ID, Email: u.Email, CredKind: "email_link", Addr: s.clientAddr(r)},
			"", "password.reset", u.ID); err != nil {
			s.Logger.Warn("password reset not recorded in the audit log", "user", u.ID, "error", err)
		}
	}
	s.respond(w, r, err, http.StatusNoContent, nil)
}

// changePassword is PUT /api/v1/me/password: the current password is needed, every
// credential of the account ends, and the one asking gets a new one in the answer (a
// new session cookie, or a new login token).
func (s *Server) changePassword(w http.ResponseWriter, r *http.Request) {
	var b struct {
		Current  string `json:"current_password"`
		Password string `json:"password"`
	}
	if e := decode(r, &b); e != nil {
		fail(w, e)
		return
	}
	u := currentUser(r)
	// Guessing the current password through a stolen session is limited like logins.
	if ok, wait := s.loginByAddrAccount.Allow(s.limitAddr(r)+" "+u.Email, time.Now()); !ok {
		fail(w, rateLimited("too many wrong passwords for this account from your address", wait))
		return
	}
	err := s.Email.ChangePassword(r.Context(), u.ID, b.Current, b.Password)
	if ae := (*apierror.Error)(nil); errors.As(err, &ae) && ae.Code == apierror.InvalidCredentials {
		s.loginByAddrAccount.Fail(s.limitAddr(r)+" "+u.Email, time.Now())
	}
	if err != nil {
		s.answer(w, r, err, "account")
		return
	}
	if viaSession(r) {
		s.startSession(w, r, http.StatusOK, u)
		return
	}
	// An access token ended with the rest; a login token in its place would give a
	// token made for a program the whole account for a day.
	if viaAccessToken(r) {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	s.respondToken(w, r, http.StatusOK, u)
}
