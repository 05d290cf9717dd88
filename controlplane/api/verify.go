package api

import (
	"context"
	"net/http"
	"time"

	"github.com/otelcol-svc/otelcol-svc/controlplane/service"
	"github.com/otelcol-svc/otelcol-svc/controlplane/store"
)

// linkUsesPerHour bounds the uses of mailed links (verify, invitation, reset confirm)
// from one client address. The secrets are 256 bits, so this is no guard against
// guessing but against load; it is generous because an office behind one address
// onboards many people at once, and opening an invitation costs two.
const linkUsesPerHour = 200

// takeLinkUse counts an unauthenticated use of a mailed link's secret against the
// client's address.
func (s *Server) takeLinkUse(w http.ResponseWriter, r *http.Request) bool {
	return s.takeFromAddr(w, r, s.linkByAddr)
}

// verifyEmail uses a verification link (POST /api/v1/auth/verify-email {"token"}).
func (s *Server) verifyEmail(w http.ResponseWriter, r *http.Request) {
	if !s.takeLinkUse(w, r) {
		return
	}
	var b tokenBody
	if e := decode(r, &b); e != nil {
		fail(w, e)
		return
	}
	u, err := s.Email.VerifyEmail(service.Audited(r.Context(), service.Actor{Addr: s.clientAddr(r)}, "", "", ""), b.Token)
	s.respond(w, r, err, http.StatusOK, func() any {
		return map[string]any{"email": u.Email, "verified": !u.EmailVerifiedAt.IsZero()}
	})
}

// emailStatus is GET /api/v1/me/email: whether the address is verified and whether this
// deployment sends mail at all (the dashboard says which features need it).
func (s *Server) emailStatus(w http.ResponseWriter, r *http.Request) {
	var verified bool
	u, err := s.currentUserFresh(r)
	if err == nil {
		verified = !u.EmailVerifiedAt.IsZero()
	}
	s.respond(w, r, err, http.StatusOK, func() any {
		return map[string]any{"email": u.Email, "verified": verified, "email_enabled": s.Email.Enabled()}
	})
}

// resendVerification mails the caller a new verification link (POST /api/v1/me/email/verify).
func (s *Server) resendVerification(w http.ResponseWriter, r *http.Request) {
	u, err := s.currentUserFresh(r)
	if err != nil {
		s.internal(w, r, err)
		return
	}
	if !u.EmailVerifiedAt.IsZero() {
		writeJSON(w, http.StatusOK, map[string]any{"email": u.Email, "verified": true})
		return
	}
	if ok, wait := s.verifyByUser.Take(u.ID, time.Now()); !ok {
		fail(w, rateLimited("a verification email was sent a moment ago", wait))
		return
	}
	if err := s.Email.SendVerification(r.Context(), u); err != nil {
		s.answer(w, r, err, "account")
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]any{"email": u.Email, "verified": false})
}

// sendVerificationAfterSignup mails a new account its verification link, in the
// background: a slow mail server must not hold the signup, and a failure is logged (the
// user can ask again from the dashboard).
func (s *Server) sendVerificationAfterSignup(r *http.Request, u store.User) {
	if !s.Email.Enabled() {
		return
	}
	ctx := context.WithoutCancel(r.Context())
	go func() {
		if err := s.Email.SendVerification(ctx, u); err != nil {
			s.Logger.Warn("verification email not sent", "user", u.ID, "error", err)
		}
	}()
}

// currentUserFresh re-reads the caller's account: the one the request was authenticated
// with may predate a verification.
func (s *Server) currentUserFresh(r *http.Request) (u store.User, err error) {
	err = s.Svc.Store.InTx(r.Context(), func(tx *store.Tx) error {
		u, err = tx.UserByID(r.Context(), currentUser(r).ID)
		return err
	})
	return u, err
}
