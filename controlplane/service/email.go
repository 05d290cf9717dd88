package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/otelcol-svc/otelcol-svc/controlplane/auth"
	"github.com/otelcol-svc/otelcol-svc/controlplane/store"
	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
	"github.com/otelcol-svc/otelcol-svc/internal/apikey"
	"github.com/otelcol-svc/otelcol-svc/internal/mailer"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
)

// How long each mailed link works.
const (
	VerifyTTL     = 48 * time.Hour
	ResetTTL      = 30 * time.Minute
	InvitationTTL = 7 * 24 * time.Hour
)

// Kinds of the mailed secrets (the part before the random bits tells them apart when
// someone pastes one in the wrong place).
const (
	verifyKind = "osv_"
	resetKind  = "osr_"
	inviteKind = "osn_"
)

// Email holds the rules that send mail: address verification, invitations, password
// reset and change. Mailer nil is a deployment without SVC_SMTP_URL: invitations and
// resets are refused saying so, signups are not verified, and members are added by
// account as before.
type Email struct {
	Svc    *Service
	Mailer *mailer.Mailer
	// PublicURL is SVC_PUBLIC_URL, the base of every mailed link. Links are never built
	// from a request's Host: a reset asked for with a forged Host would mail the
	// victim a link to the asker's site.
	PublicURL string
	Logger    *slog.Logger

	limitsOnce sync.Once
	// invites bounds the invitations one project mails, invitesByUser those one account
	// mails over all its projects, invitesAll the instance's: invitations carry words the
	// inviter chose (the project's name) from the operator's domain, so no one account
	// (nor many made for it) may send them to any number of addresses.
	invites, invitesByUser, invitesAll *auth.Limiter
	// sending bounds the mails being sent after their request answered.
	sending chan struct{}
}

// How many invitations may be mailed an hour by one project, one account and the
// instance (each process: replicas multiply it).
const (
	InvitesPerHour          = 50
	InvitesPerHourByAccount = 20
	InvitesPerHourInstance  = 1000
)

// maxLaterSends bounds the mails sent in the background at once; more are dropped and
// logged (the user can ask again) rather than holding goroutines without bound.
const maxLaterSends = 32

func (e *Email) initLimits() {
	e.limitsOnce.Do(func() {
		e.invites = auth.NewLimiter(InvitesPerHour, time.Hour)
		e.invitesByUser = auth.NewLimiter(InvitesPerHourByAccount, time.Hour)
		e.invitesAll = auth.NewLimiter(InvitesPerHourInstance, time.Hour)
		e.sending = make(chan struct{}, maxLaterSends)
	})
}

// takeInvite counts one invitation against each limit, the first refusal answering.
func (e *Email) takeInvite(projectID, userID string, now time.Time) error {
	e.initLimits()
	for _, l := range []struct {
		lim  *auth.Limiter
		key  string
		what string
		n    int
	}{
		{e.invites, projectID, "this project sent %d invitations", InvitesPerHour},
		{e.invitesByUser, userID, "you sent %d invitations", InvitesPerHourByAccount},
		{e.invitesAll, "", "this instance sent %d invitations", InvitesPerHourInstance},
	} {
		if ok, wait := l.lim.Take(l.key, now); !ok {
			secs := int((wait + time.Second - 1) / time.Second)
			ae := apierror.New(http.StatusTooManyRequests, apierror.RateLimited,
				fmt.Sprintf(l.what+" in the last hour; try again in %d s", l.n, secs))
			ae.RetryAfter = time.Duration(secs) * time.Second
			return ae
		}
	}
	return nil
}

// later runs job after the request has answered, with a context the request's end does
// not cancel: neither a slow mail server nor whether there was anything to send shows
// in the answer or its timing, and a client cannot hold handlers open by asking.
func (e *Email) later(ctx context.Context, what string, job func(ctx context.Context) error) {
	e.initLimits()
	ctx = context.WithoutCancel(ctx)
	select {
	case e.sending <- struct{}{}:
	default:
		e.Logger.Warn("email not sent: too many being sent", "what", what)
		return
	}
	go func() {
		defer func() { <-e.sending }()
		if err := job(ctx); err != nil {
			e.Logger.Warn("email not sent", "what", what, "error", err)
		}
	}()
}

// CheckNewPassword is the rule every new password follows.
func CheckNewPassword(p string) error {
	if n := len(p); n < auth.MinPasswordLen || n > auth.MaxPasswordLen {
		return BadBody(fmt.Sprintf("password must be %d to %d characters", auth.MinPasswordLen, auth.MaxPasswordLen))
	}
	return nil
}

// checkRole is a role an owner or admin may give: member (the default) or admin.
func checkRole(role string) (string, error) {
	switch role {
	case "":
		return store.RoleMember, nil
	case store.RoleAdmin, store.RoleMember:
		return role, nil
	}
	return "", BadBody(`role must be "admin" or "member"`)
}

// Enabled reports whether mail can be sent.
func (e *Email) Enabled() bool { return e != nil && e.Mailer != nil && e.PublicURL != "" }

// ErrEmailOff is the answer of the features that need mail on a deployment without it.
func ErrEmailOff() *apierror.Error {
	return apierror.New(http.StatusNotImplemented, "email_not_configured",
		"email is not configured on this deployment (the operator sets SVC_SMTP_URL, SVC_SMTP_FROM and SVC_PUBLIC_URL)")
}

func (e *Email) link(page, token string) string {
	return e.PublicURL + "/" + page + "?token=" + url.QueryEscape(token)
}

func (e *Email) send(ctx context.Context, m mailer.Message, err error) error {
	if err != nil {
		return err
	}
	if err := e.Mailer.Send(ctx, m); err != nil {
		// The address is the user's; the link (a secret) is never logged.
		e.Logger.Warn("email not sent", "subject", m.Subject, "error", err)
		return apierror.New(http.StatusBadGateway, "email_failed", "the email could not be sent; try again later")
	}
	return nil
}

// --- verification ---------------------------------------------------------------------

// SendVerification mails the account a link that verifies its address; nothing when
// email is off or the address is verified.
func (e *Email) SendVerification(ctx context.Context, u store.User) error {
	if !e.Enabled() {
		return ErrEmailOff()
	}
	if !u.EmailVerifiedAt.IsZero() {
		return nil
	}
	secret := apikey.Generate(verifyKind)
	now := time.Now().UTC()
	err := e.Svc.Store.InTx(ctx, func(tx *store.Tx) error {
		if err := tx.SweepEmail(ctx, now); err != nil {
			return err
		}
		return tx.CreateEmailToken(ctx, store.EmailToken{Hash: apikey.Hash(secret), Kind: store.EmailVerify, UserID: u.ID,
			Email: u.Email, CreatedAt: now, ExpiresAt: now.Add(VerifyTTL)})
	})
	if err != nil {
		return err
	}
	m, err := mailer.Verification(u.Email, e.PublicURL, e.link("verify-email", secret), VerifyTTL)
	return e.send(ctx, m, err)
}

func invalidLink(what string) *apierror.Error {
	next := "ask for a new one"
	if what == "invitation" {
		next = "ask whoever invited you to invite you again"
	}
	return apierror.New(http.StatusBadRequest, "invalid_token", "this "+what+" link is unknown, used, revoked or expired; "+next)
}

// VerifyEmail uses a verification link.
func (e *Email) VerifyEmail(ctx context.Context, token string) (u store.User, err error) {
	err = e.Svc.Store.InTx(ctx, func(tx *store.Tx) error {
		t, err := tx.TakeEmailToken(ctx, store.EmailVerify, apikey.Hash(token), time.Now())
		if errors.Is(err, store.ErrNotFound) {
			return invalidLink("verification")
		}
		if err != nil {
			return err
		}
		// An address changed since the mail was sent is not the one verified.
		if err := tx.VerifyEmail(ctx, t.UserID, t.Email, time.Now()); err == nil {
			auditAccount(ctx, t.UserID, "email.verify", t.UserID, nil, map[string]string{"email_verified": t.Email})
		} else if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		u, err = tx.UserByID(ctx, t.UserID)
		return err
	})
	return u, err
}

// --- invitations ----------------------------------------------------------------------

// Invite is POST .../members with email on: an address with a verified account, or of
// someone already in the project, becomes a member or gets the role (as AddMember); any
// other gets an invitation by email, so an account that never proved its address cannot
// collect memberships meant for whoever owns it. Exactly one of member and inv is set.
func (e *Email) Invite(ctx context.Context, userID, projectID, email, role string) (member *store.User, inv *store.Invitation, err error) {
	addr, ok := NormalizeEmail(email)
	if !ok {
		return nil, nil, BadBody("email must be an address like ops@example.com")
	}
	if role, err = checkRole(role); err != nil {
		return nil, nil, err
	}
	// Invitations need no mirror, so they run at Read level below: the credential's own
	// limits (a read-only or project-limited token) are checked here as for a change.
	if err := LimitsOf(ctx).allow(projectID, Write); err != nil {
		return nil, nil, err
	}
	var direct bool
	if err := e.Svc.Store.InTx(ctx, func(tx *store.Tx) error {
		u, err := tx.UserByEmail(ctx, addr)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if !u.EmailVerifiedAt.IsZero() {
			direct = true
			return nil
		}
		// Someone already in the project (every account from before email was turned
		// on is unverified) gets the role asked for: an invitation would leave the old
		// one, and a demotion would silently do nothing. The owner gets AddMember's 409.
		p, err := tx.InvitedProject(ctx, projectID)
		if errors.Is(err, store.ErrNotFound) {
			return nil // InProject below answers as to anyone
		} else if err != nil {
			return err
		}
		if p.OwnerID == u.ID {
			direct = true
			return nil
		}
		if _, _, err := tx.ProjectForUser(ctx, projectID, u.ID); err == nil {
			direct = true
		} else if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		return nil
	}); err != nil {
		return nil, nil, err
	}
	if direct {
		u, _, err := e.Svc.AddMember(ctx, userID, projectID, addr, role)
		if err != nil {
			return nil, nil, err
		}
		return &u, nil, nil
	}
	if !e.Enabled() {
		return nil, nil, ErrEmailOff()
	}
	secret := apikey.Generate(inviteKind)
	now := time.Now().UTC()
	i := store.Invitation{ID: NewID("inv_"), Email: addr, Role: role, Hash: apikey.Hash(secret), InvitedBy: userID,
		CreatedAt: now, ExpiresAt: now.Add(InvitationTTL)}
	var project, inviter string
	var previous *store.Invitation
	// The record is written once the mail went (below), not with the invitation: one
	// whose mail failed is deleted and was never sent.
	quiet := store.WithAudit(ctx, nil)
	err = e.Svc.InProject(quiet, userID, projectID, Read, func(ctx context.Context, tx *store.Tx, p store.Project, r string, _ *mirror.Store) error {
		if r == store.RoleMember {
			return apierror.New(http.StatusForbidden, apierror.Forbidden, "only the project's owner and admins can invite")
		}
		by, err := tx.UserByID(ctx, userID)
		if err != nil {
			return err
		}
		// The mail says "<inviter> invited you to <project>", both chosen by the inviter,
		// from the operator's domain: only someone who proved an address sends it.
		if by.EmailVerifiedAt.IsZero() {
			return apierror.New(http.StatusForbidden, apierror.Forbidden,
				"confirm your own email address before inviting: open the link mailed to "+by.Email+" (the dashboard sends a new one)")
		}
		i.ProjectID, project, inviter = p.ID, p.Name, by.Email
		if err := e.takeInvite(p.ID, userID, now); err != nil {
			return err
		}
		// Expired links and invitations go here rather than on a timer of their own.
		if err := tx.SweepEmail(ctx, now); err != nil {
			return err
		}
		pending, err := tx.Invitations(ctx, p.ID, now)
		if err != nil {
			return err
		}
		for _, was := range pending {
			if was.Email == addr {
				previous = &was
			}
		}
		return tx.PutInvitation(ctx, i)
	})
	if err != nil {
		return nil, nil, err
	}
	m, err := mailer.Invitation(addr, e.PublicURL, e.link("invitation", secret), project, role, inviter, InvitationTTL)
	if err := e.send(ctx, m, err); err != nil {
		// An invitation whose mail did not go cannot be accepted; it is not left pending,
		// and the one it replaced (whose mail did go) is pending again. Done even when
		// the client has gone.
		bg := context.WithoutCancel(quiet)
		if cerr := e.Svc.Store.InTx(bg, func(tx *store.Tx) error {
			if previous != nil {
				return tx.PutInvitation(bg, *previous)
			}
			return tx.DeleteInvitation(bg, i.ProjectID, i.ID)
		}); cerr != nil {
			e.Logger.Warn("invitation whose mail failed not removed", "invitation", i.ID, "error", cerr)
		}
		return nil, nil, err
	}
	if ev := store.AuditOf(ctx); ev != nil {
		rec := *ev
		rec.Action, rec.ProjectID, rec.Target = "invitation.create", i.ProjectID, i.ID
		rec.Change(nil, map[string]string{"email": i.Email, "role": i.Role})
		bg := context.WithoutCancel(quiet)
		if err := e.Svc.Store.InTx(bg, func(tx *store.Tx) error { return tx.AddAudit(bg, rec) }); err != nil {
			e.Logger.Warn("invitation sent but not recorded in the audit log", "invitation", i.ID, "error", err)
		}
	}
	return nil, &i, nil
}

// Invitations lists a project's pending invitations (owners and admins).
func (e *Email) Invitations(ctx context.Context, userID, projectID string) (out []store.Invitation, err error) {
	err = e.Svc.InProject(ctx, userID, projectID, Read, func(ctx context.Context, tx *store.Tx, p store.Project, r string, _ *mirror.Store) error {
		if r == store.RoleMember {
			return apierror.New(http.StatusForbidden, apierror.Forbidden, "only the project's owner and admins can see invitations")
		}
		if out, err = tx.Invitations(ctx, p.ID, time.Now()); err != nil {
			return err
		}
		// A few per project: one read each is cheaper than a query of its own.
		emails := map[string]string{}
		for k, i := range out {
			if _, ok := emails[i.InvitedBy]; !ok {
				if u, err := tx.UserByID(ctx, i.InvitedBy); err == nil {
					emails[i.InvitedBy] = u.Email
				} else {
					emails[i.InvitedBy] = ""
				}
			}
			out[k].InvitedByEmail = emails[i.InvitedBy]
		}
		return nil
	})
	return out, err
}

// RevokeInvitation deletes a pending invitation; its link stops working at once.
func (e *Email) RevokeInvitation(ctx context.Context, userID, projectID, id string) error {
	if err := LimitsOf(ctx).allow(projectID, Write); err != nil {
		return err
	}
	return e.Svc.InProject(ctx, userID, projectID, Read, func(ctx context.Context, tx *store.Tx, p store.Project, r string, _ *mirror.Store) error {
		if r == store.RoleMember {
			return apierror.New(http.StatusForbidden, apierror.Forbidden, "only the project's owner and admins can revoke invitations")
		}
		if err := tx.DeleteInvitation(ctx, p.ID, id); errors.Is(err, store.ErrNotFound) {
			return NotFound("invitation")
		} else if err != nil {
			return err
		}
		return nil
	})
}

// InvitationInfo is what the invitation page shows before it is accepted.
type InvitationInfo struct {
	Email, Project, ProjectID, Role string
	// InvitedBy is the inviter's address ("" when their account is gone).
	InvitedBy  string
	HasAccount bool
	ExpiresAt  time.Time
}

// Invitation describes the invitation of a link.
func (e *Email) Invitation(ctx context.Context, token string) (info InvitationInfo, err error) {
	err = e.Svc.Store.InTx(ctx, func(tx *store.Tx) error {
		i, err := tx.InvitationByHash(ctx, apikey.Hash(token), time.Now())
		if errors.Is(err, store.ErrNotFound) {
			return invalidLink("invitation")
		}
		if err != nil {
			return err
		}
		p, err := tx.InvitedProject(ctx, i.ProjectID)
		if err != nil {
			return err
		}
		var by string
		if u, err := tx.UserByID(ctx, i.InvitedBy); err == nil {
			by = u.Email
		}
		_, err = tx.UserByEmail(ctx, i.Email)
		info = InvitationInfo{Email: i.Email, Project: p.Name, ProjectID: p.ID, Role: i.Role, InvitedBy: by,
			HasAccount: err == nil, ExpiresAt: i.ExpiresAt}
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		return err
	})
	return info, err
}

// AcceptInvitation uses an invitation link: the invited address signs up with password
// (or, when it has an account, logs in with it), is verified (the link reached it), and
// joins the project with the invitation's role, never lowering a role it has. The link
// works once, and only while whoever sent it may still invite. An account with the
// address that never proved it (anyone can sign up with any address) is claimed: the
// link proves the address, so password becomes its password and its credentials end.
func (e *Email) AcceptInvitation(ctx context.Context, token, password string) (u store.User, inv store.Invitation, err error) {
	ms, err := e.Svc.mirrorForChange(ctx)
	if err != nil {
		return u, inv, err
	}
	var hash string
	newHash := func() error {
		if err := CheckNewPassword(password); err != nil {
			return err
		}
		if hash != "" {
			return nil
		}
		var herr error
		hash, herr = auth.HashPassword(password)
		return herr
	}
	var ended []string
	err = e.Svc.Store.InTx(ctx, func(tx *store.Tx) error {
		ended = nil
		now := time.Now().UTC()
		i, err := tx.InvitationByHash(ctx, apikey.Hash(token), now)
		if errors.Is(err, store.ErrNotFound) {
			return invalidLink("invitation")
		}
		if err != nil {
			return err
		}
		p, err := tx.InvitedProject(ctx, i.ProjectID)
		if err != nil {
			return err
		}
		if p.OwnerID != i.InvitedBy {
			if _, r, err := tx.ProjectForUser(ctx, p.ID, i.InvitedBy); errors.Is(err, store.ErrNotFound) || err == nil && r == store.RoleMember {
				return apierror.New(http.StatusBadRequest, "invalid_token",
					"whoever sent this invitation can no longer invite to the project; ask its owner or an admin to invite you again")
			} else if err != nil {
				return err
			}
		}
		u, err = tx.UserByEmail(ctx, i.Email)
		switch {
		case errors.Is(err, store.ErrNotFound):
			if err := newHash(); err != nil {
				return err
			}
			u = store.User{ID: NewID("u_"), Email: i.Email, PasswordHash: hash, CreatedAt: now}
			if err := tx.CreateUser(ctx, u); err != nil {
				return err
			}
		case err != nil:
			return err
		case auth.CheckPassword(password, u.PasswordHash) == nil:
		case u.EmailVerifiedAt.IsZero():
			if err := newHash(); err != nil {
				return err
			}
			if err := tx.SetPassword(ctx, u.ID, hash); err != nil {
				return err
			}
			if ended, err = revokeAllTx(ctx, tx, u.ID); err != nil {
				return err
			}
		default:
			return apierror.New(http.StatusUnauthorized, apierror.InvalidCredentials,
				"an account with this email exists: enter its password to accept, or reset your password (Forgot your password? on the login page) and open this link again")
		}
		if u.EmailVerifiedAt.IsZero() {
			if err := tx.VerifyEmail(ctx, u.ID, u.Email, now); err != nil {
				return err
			}
			u.EmailVerifiedAt = now
		}
		if err := tx.TakeInvitation(ctx, i.ID); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return invalidLink("invitation")
			}
			return err
		}
		inv = i
		if u.ID == p.OwnerID {
			return nil
		}
		if _, r, err := tx.ProjectForUser(ctx, p.ID, u.ID); err == nil && r == store.RoleAdmin {
			return nil // an old "member" invitation does not demote
		} else if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if err := tx.PutMember(ctx, p.ID, u.ID, i.Role); err != nil {
			return err
		}
		return saveProject(ctx, tx, ms, &p)
	})
	if err != nil {
		return u, inv, err
	}
	e.Svc.RevokeCredentials(ctx, ended...)
	return u, inv, nil
}

// --- passwords ------------------------------------------------------------------------

// RequestPasswordReset mails a reset link to the account of email, if there is one. The
// lookup and the mail happen after the caller has answered, which it does the same
// whether there is an account or not (and whether the mail went): neither the answer nor
// its timing tells who has an account.
func (e *Email) RequestPasswordReset(ctx context.Context, email string) error {
	if !e.Enabled() {
		return ErrEmailOff()
	}
	addr, ok := NormalizeEmail(email)
	if !ok {
		return BadBody("email must be an address like ops@example.com")
	}
	e.later(ctx, "password reset", func(ctx context.Context) error {
		secret := apikey.Generate(resetKind)
		now := time.Now().UTC()
		var found bool
		err := e.Svc.Store.InTx(ctx, func(tx *store.Tx) error {
			u, err := tx.UserByEmail(ctx, addr)
			if errors.Is(err, store.ErrNotFound) {
				return nil
			}
			if err != nil {
				return err
			}
			found = true
			return tx.CreateEmailToken(ctx, store.EmailToken{Hash: apikey.Hash(secret), Kind: store.EmailPasswordReset, UserID: u.ID,
				Email: u.Email, CreatedAt: now, ExpiresAt: now.Add(ResetTTL)})
		})
		if err != nil || !found {
			return err
		}
		m, err := mailer.PasswordReset(addr, e.PublicURL, e.link("reset-password", secret), ResetTTL)
		if err != nil {
			return err
		}
		return e.Mailer.Send(ctx, m)
	})
	return nil
}

// ConfirmPasswordReset uses a reset link: the password becomes password and every
// credential of the account ends.
func (e *Email) ConfirmPasswordReset(ctx context.Context, token, password string) (store.User, error) {
	if err := CheckNewPassword(password); err != nil {
		return store.User{}, err
	}
	hash, err := auth.HashPassword(password)
	if err != nil {
		return store.User{}, err
	}
	var u store.User
	var ended []string
	err = e.Svc.Store.InTx(ctx, func(tx *store.Tx) error {
		t, err := tx.TakeEmailToken(ctx, store.EmailPasswordReset, apikey.Hash(token), time.Now())
		if errors.Is(err, store.ErrNotFound) {
			return invalidLink("password reset")
		}
		if err != nil {
			return err
		}
		if u, err = tx.UserByID(ctx, t.UserID); err != nil {
			return err
		}
		if err := tx.SetPassword(ctx, u.ID, hash); err != nil {
			return err
		}
		// The mail reached the address, so it is verified too.
		if u.EmailVerifiedAt.IsZero() && u.Email == t.Email {
			if err := tx.VerifyEmail(ctx, u.ID, u.Email, time.Now()); err != nil {
				return err
			}
		}
		// Whoever reset the password may be someone other than who held the sessions.
		ended, err = revokeAllTx(ctx, tx, u.ID)
		return err
	})
	if err != nil {
		return u, err
	}
	e.Svc.RevokeCredentials(ctx, ended...)
	return u, nil
}

// ChangePassword sets a new password for a logged-in user who knows the current one,
// and ends every credential they hold; the caller gives the one asking a new one.
func (e *Email) ChangePassword(ctx context.Context, userID, current, password string) error {
	if LimitsOf(ctx).Limited() {
		return AccountRefusal
	}
	if err := CheckNewPassword(password); err != nil {
		return err
	}
	hash, err := auth.HashPassword(password)
	if err != nil {
		return err
	}
	var u store.User
	var ended []string
	err = e.Svc.Store.InTx(ctx, func(tx *store.Tx) error {
		if u, err = tx.UserByID(ctx, userID); err != nil {
			return err
		}
		if auth.CheckPassword(current, u.PasswordHash) != nil {
			return apierror.New(http.StatusForbidden, apierror.InvalidCredentials, "the current password is wrong")
		}
		if err := tx.SetPassword(ctx, u.ID, hash); err != nil {
			return err
		}
		if err := tx.DeleteEmailTokens(ctx, u.ID, store.EmailPasswordReset); err != nil {
			return err
		}
		ended, err = revokeAllTx(ctx, tx, u.ID)
		return err
	})
	if err != nil {
		return err
	}
	e.Svc.RevokeCredentials(ctx, ended...)
	if e.Enabled() && !u.EmailVerifiedAt.IsZero() {
		// After the answer: a slow mail server must not hold the one asking, whose new
		// session comes with it (every other credential just ended).
		e.later(ctx, "password changed", func(ctx context.Context) error {
			m, err := mailer.PasswordChanged(u.Email, e.PublicURL)
			if err != nil {
				return err
			}
			return e.Mailer.Send(ctx, m)
		})
	}
	return nil
}
