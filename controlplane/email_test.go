package main

import (
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// mailStack is a control plane that sends its mail to a real SMTP server (mailpit).
type mailStack struct {
	*stack
	mail *testenv.Mailpit
}

func startMailStack(t *testing.T, db map[string]string) *mailStack {
	t.Helper()
	mp := testenv.StartMailpit(t, testenv.MailpitOptions{})
	listen := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	env := map[string]string{"SVC_SMTP_URL": mp.SMTPURL(), "SVC_SMTP_FROM": "otelcol-svc <noreply@example.com>",
		"SVC_CONTROLPLANE_LISTEN": listen, "SVC_PUBLIC_URL": "http://" + listen}
	for k, v := range db {
		env[k] = v
	}
	return &mailStack{stack: startStack(t, env), mail: mp}
}

var linkToken = regexp.MustCompile(`\?token=([A-Za-z0-9_%-]+)`)

// mailedToken waits for the n-th message to the address about subject and returns the
// secret of the link in it, checking the link is on the instance's public URL.
func (s *mailStack) mailedToken(t *testing.T, to, subject, page string, n int) string {
	t.Helper()
	m := s.mail.WaitFor(t, to, subject, n)
	assert.Contains(t, m.Text, s.cp.URL+"/"+page+"?token=", "plain text carries the public URL's link")
	assert.Contains(t, m.HTML, `href="`+s.cp.URL+"/"+page+"?token=", "HTML too")
	match := linkToken.FindStringSubmatch(m.Text)
	require.NotNil(t, match, "no link in %q", m.Text)
	return match[1]
}

// Signup mails a verification link that verifies the address once. An account that has
// not verified its address is not found by an invitation: adding it sends an
// invitation instead, as to an address without an account; accepting one makes a
// member with the role given, once; owners and admins see and revoke pending ones.
func TestEmailVerificationAndInvitations(t *testing.T) {
	databases(t, func(t *testing.T, db map[string]string) {
		s := startMailStack(t, db)
		cp := s.cp.URL
		owner, _ := s.signup(t, "owner@example.com")
		pid := call(t, cp, "POST", "/api/v1/projects", owner, map[string]string{"name": "prod <eu>"}).str("id")
		require.NotEmpty(t, pid)

		// Verification.
		tok := s.mailedToken(t, "owner@example.com", "Confirm your email address", "verify-email", 1)
		r := call(t, cp, "GET", "/api/v1/me/email", owner, nil)
		assert.Equal(t, false, r.Body["verified"])
		assert.Equal(t, true, r.Body["email_enabled"])
		r = call(t, cp, "POST", "/api/v1/auth/verify-email", "", map[string]string{"token": tok})
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Raw)
		assert.Equal(t, true, r.Body["verified"])
		assert.Equal(t, true, call(t, cp, "GET", "/api/v1/me/email", owner, nil).Body["verified"])
		r = call(t, cp, "POST", "/api/v1/auth/verify-email", "", map[string]string{"token": tok})
		assert.Equal(t, http.StatusBadRequest, r.Status, "a link works once")
		assert.Equal(t, "invalid_token", r.code())

		// An account that never verified its address (anyone could have signed up with
		// it) gets no membership by being named: the mailbox gets an invitation.
		unverified, _ := s.signup(t, "bea@example.com")
		r = call(t, cp, "POST", "/api/v1/projects/"+pid+"/members", owner, map[string]string{"email": "bea@example.com", "role": "admin"})
		require.Equal(t, http.StatusAccepted, r.Status, "%s", r.Raw)
		inv := r.Body["invitation"].(map[string]any)
		assert.Equal(t, "bea@example.com", inv["email"])
		assert.Equal(t, "admin", inv["role"])
		assert.Equal(t, http.StatusNotFound, call(t, cp, "GET", "/api/v1/projects/"+pid, unverified, nil).Status, "not a member yet")
		beaTok := s.mailedToken(t, "bea@example.com", "invited you to prod <eu>", "invitation", 1)
		m := s.mail.WaitFor(t, "bea@example.com", "invited you to", 1)
		assert.Contains(t, m.HTML, "prod &lt;eu&gt;", "the project's name is escaped in HTML")
		assert.Contains(t, m.Text, "owner@example.com invited you")

		// The link, not the account, proves the address; with the account's password it
		// logs in (another one claims it: email_rules_test.go).
		r = call(t, cp, "POST", "/api/v1/auth/invitation", "", map[string]string{"token": beaTok})
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Raw)
		assert.Equal(t, "prod <eu>", r.Body["project"])
		assert.Equal(t, true, r.Body["has_account"])
		r = call(t, cp, "POST", "/api/v1/auth/invitation/accept", "", map[string]string{"token": beaTok, "password": "correct horse battery"})
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Raw)
		bea := r.str("token")
		p := call(t, cp, "GET", "/api/v1/projects/"+pid, bea, nil)
		require.Equal(t, http.StatusOK, p.Status, "%s", p.Raw)
		assert.Equal(t, "admin", p.Body["role"])
		assert.Equal(t, true, call(t, cp, "GET", "/api/v1/me/email", bea, nil).Body["verified"], "the link reached the address")

		// An address without an account signs up through the link.
		r = call(t, cp, "POST", "/api/v1/projects/"+pid+"/members", bea, map[string]string{"email": "Cal@Example.com"})
		require.Equal(t, http.StatusAccepted, r.Status, "an admin invites: %s", r.Raw)
		list := call(t, cp, "GET", "/api/v1/projects/"+pid+"/invitations", owner, nil)
		require.Equal(t, http.StatusOK, list.Status, "%s", list.Raw)
		pending := list.Body["invitations"].([]any)
		require.Len(t, pending, 1)
		assert.Equal(t, "cal@example.com", pending[0].(map[string]any)["email"])
		calTok := s.mailedToken(t, "cal@example.com", "invited you to", "invitation", 1)
		r = call(t, cp, "POST", "/api/v1/auth/invitation/accept", "", map[string]string{"token": calTok, "password": "short"})
		assert.Equal(t, http.StatusBadRequest, r.Status)
		r = call(t, cp, "POST", "/api/v1/auth/invitation/accept", "", map[string]string{"token": calTok, "password": "cal's long password"})
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Raw)
		cal := r.str("token")
		p = call(t, cp, "GET", "/api/v1/projects/"+pid, cal, nil)
		require.Equal(t, http.StatusOK, p.Status)
		assert.Equal(t, "member", p.Body["role"])
		r = call(t, cp, "POST", "/api/v1/auth/invitation/accept", "", map[string]string{"token": calTok, "password": "cal's long password"})
		assert.Equal(t, http.StatusBadRequest, r.Status, "single use")
		assert.Len(t, call(t, cp, "GET", "/api/v1/projects/"+pid+"/invitations", owner, nil).Body["invitations"], 0, "accepted: no longer pending")
		assert.Equal(t, http.StatusForbidden, call(t, cp, "GET", "/api/v1/projects/"+pid+"/invitations", cal, nil).Status, "a member does not see invitations")
		assert.Equal(t, http.StatusForbidden, call(t, cp, "POST", "/api/v1/projects/"+pid+"/members", cal, map[string]string{"email": "x@example.com"}).Status)

		// A read-only personal access token invites, revokes and changes nothing.
		readOnly := call(t, cp, "POST", "/api/v1/tokens", owner, map[string]any{"name": "ro", "read_only": true}).str("token")
		r = call(t, cp, "POST", "/api/v1/projects/"+pid+"/members", readOnly, map[string]string{"email": "ro@example.com"})
		assert.Equal(t, http.StatusForbidden, r.Status, "%s", r.Raw)
		assert.Equal(t, "insufficient_scope", r.code())
		assert.Equal(t, http.StatusOK, call(t, cp, "GET", "/api/v1/projects/"+pid+"/invitations", readOnly, nil).Status, "it reads")

		// A verified account is added at once, as before.
		r = call(t, cp, "POST", "/api/v1/projects/"+pid+"/members", owner, map[string]string{"email": "cal@example.com", "role": "admin"})
		require.Equal(t, http.StatusCreated, r.Status, "%s", r.Raw)

		// Revoked: the link stops working.
		r = call(t, cp, "POST", "/api/v1/projects/"+pid+"/members", owner, map[string]string{"email": "dan@example.com"})
		require.Equal(t, http.StatusAccepted, r.Status)
		danID := r.Body["invitation"].(map[string]any)["id"].(string)
		danTok := s.mailedToken(t, "dan@example.com", "invited you to", "invitation", 1)
		stranger, _ := s.signup(t, "eve@example.com")
		assert.Equal(t, http.StatusNotFound, call(t, cp, "DELETE", "/api/v1/projects/"+pid+"/invitations/"+danID, stranger, nil).Status, "a stranger")
		require.Equal(t, http.StatusNoContent, call(t, cp, "DELETE", "/api/v1/projects/"+pid+"/invitations/"+danID, owner, nil).Status)
		r = call(t, cp, "POST", "/api/v1/auth/invitation/accept", "", map[string]string{"token": danTok, "password": "dan's long password"})
		assert.Equal(t, http.StatusBadRequest, r.Status, "revoked")
		assert.Equal(t, http.StatusUnauthorized, call(t, cp, "POST", "/api/v1/auth/login", "", map[string]string{"email": "dan@example.com", "password": "dan's long password"}).Status, "no account was made")
	})
}

// A password reset mails a one-time link; using it sets the password and ends every
// credential of the account. Asking for an address without an account looks the same
// and mails nothing. A logged-in change needs the current password and ends the other
// credentials, giving the one asking a new login.
func TestPasswordResetAndChange(t *testing.T) {
	databases(t, func(t *testing.T, db map[string]string) {
		s := startMailStack(t, db)
		col := s.receiver(t)
		cp := s.cp.URL
		login, _ := s.signup(t, "ana@example.com")
		pid := call(t, cp, "POST", "/api/v1/projects", login, map[string]string{"name": "reset"}).str("id")
		pat := call(t, cp, "POST", "/api/v1/tokens", login, map[string]any{"name": "script"}).str("token")
		require.True(t, strings.HasPrefix(pat, "osp_"), "a personal access token")
		require.Equal(t, http.StatusOK, call(t, cp, "GET", "/api/v1/me", pat, nil).Status)
		// Every kind of credential, each with a console token it minted.
		held := holdEverywhere(t, cp, col.HTTP, pid, "ana@example.com", "correct horse battery", login)

		r := call(t, cp, "POST", "/api/v1/auth/password-reset", "", map[string]string{"email": "nobody@example.com"})
		assert.Equal(t, http.StatusAccepted, r.Status, "%s", r.Raw)
		r = call(t, cp, "POST", "/api/v1/auth/password-reset", "", map[string]string{"email": "ANA@example.com"})
		assert.Equal(t, http.StatusAccepted, r.Status, "%s", r.Raw)
		tok := s.mailedToken(t, "ana@example.com", "Reset your password", "reset-password", 1)
		assert.Empty(t, s.mail.Messages(t, "nobody@example.com"), "no account, no mail")

		r = call(t, cp, "POST", "/api/v1/auth/password-reset/confirm", "", map[string]string{"token": tok, "password": "a brand new password"})
		require.Equal(t, http.StatusNoContent, r.Status, "%s", r.Raw)
		held.requireEnded(t, cp, col.HTTP, pid, time.Now())
		assert.Equal(t, http.StatusUnauthorized, call(t, cp, "GET", "/api/v1/me", login, nil).Status, "the login token ended")
		assert.Equal(t, http.StatusUnauthorized, call(t, cp, "GET", "/api/v1/me", pat, nil).Status, "the access token ended")
		r = call(t, cp, "POST", "/api/v1/auth/password-reset/confirm", "", map[string]string{"token": tok, "password": "yet another password"})
		assert.Equal(t, http.StatusBadRequest, r.Status, "the link works once")
		assert.Equal(t, http.StatusUnauthorized, call(t, cp, "POST", "/api/v1/auth/login", "", map[string]string{"email": "ana@example.com", "password": "correct horse battery"}).Status)
		r = call(t, cp, "POST", "/api/v1/auth/login", "", map[string]string{"email": "ana@example.com", "password": "a brand new password"})
		require.Equal(t, http.StatusOK, r.Status)
		login = r.str("token")

		// Change while logged in.
		other := call(t, cp, "POST", "/api/v1/auth/login", "", map[string]string{"email": "ana@example.com", "password": "a brand new password"}).str("token")
		held = holdEverywhere(t, cp, col.HTTP, pid, "ana@example.com", "a brand new password", other)
		r = call(t, cp, "PUT", "/api/v1/me/password", login, map[string]string{"current_password": "wrong", "password": "the third password"})
		assert.Equal(t, http.StatusForbidden, r.Status, "%s", r.Raw)
		r = call(t, cp, "PUT", "/api/v1/me/password", login, map[string]string{"current_password": "a brand new password", "password": "the third password"})
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Raw)
		fresh := r.str("token")
		held.requireEnded(t, cp, col.HTTP, pid, time.Now())
		assert.Equal(t, http.StatusOK, call(t, cp, "GET", "/api/v1/me", fresh, nil).Status, "the one asking stays logged in")
		assert.Equal(t, http.StatusUnauthorized, call(t, cp, "GET", "/api/v1/me", other, nil).Status, "other logins ended")
		assert.Equal(t, http.StatusOK, call(t, cp, "POST", "/api/v1/auth/login", "", map[string]string{"email": "ana@example.com", "password": "the third password"}).Status)
	})
}

// Without SVC_SMTP_URL the control plane runs as before: members are added by account,
// and what needs mail says so.
func TestEmailOff(t *testing.T) {
	s := startStack(t, map[string]string{"SVC_DATA_DIR": t.TempDir()})
	cp := s.cp.URL
	owner, _ := s.signup(t, "owner@example.com")
	s.signup(t, "bea@example.com")
	pid := call(t, cp, "POST", "/api/v1/projects", owner, map[string]string{"name": "p"}).str("id")
	r := call(t, cp, "POST", "/api/v1/projects/"+pid+"/members", owner, map[string]string{"email": "bea@example.com"})
	assert.Equal(t, http.StatusCreated, r.Status, "%s", r.Raw)
	r = call(t, cp, "POST", "/api/v1/projects/"+pid+"/members", owner, map[string]string{"email": "nobody@example.com"})
	assert.Equal(t, http.StatusNotFound, r.Status, "%s", r.Raw)
	r = call(t, cp, "POST", "/api/v1/auth/password-reset", "", map[string]string{"email": "owner@example.com"})
	assert.Equal(t, http.StatusNotImplemented, r.Status)
	assert.Equal(t, "email_not_configured", r.code())
	assert.Contains(t, r.message(), "SVC_SMTP_URL")
	assert.Equal(t, false, call(t, cp, "GET", "/api/v1/me/email", owner, nil).Body["email_enabled"])
}

// An agent invites through MCP as the dashboard does: an address without an account gets
// an invitation by email, listed as pending; a read-only token invites no one.
func TestMCPInviteMember(t *testing.T) {
	s := startMailStack(t, map[string]string{"SVC_DATA_DIR": t.TempDir()})
	cp := s.cp.URL
	owner, _ := s.signup(t, "owner@example.com")
	s.verify(t, "owner@example.com", 1) // only a confirmed address invites
	pid := call(t, cp, "POST", "/api/v1/projects", owner, map[string]string{"name": "agents"}).str("id")
	pat := call(t, cp, "POST", "/api/v1/tokens", owner, map[string]any{"name": "agent"}).str("token")
	readOnly := call(t, cp, "POST", "/api/v1/tokens", owner, map[string]any{"name": "ro", "read_only": true}).str("token")

	ro, err := mcpSession(t, cp, readOnly)
	require.NoError(t, err)
	_, errText := tool(t, ro, "invite_member", map[string]any{"project_id": pid, "email": "x@example.com"})
	assert.Contains(t, errText, "insufficient_scope")

	cs, err := mcpSession(t, cp, pat)
	require.NoError(t, err)
	out, errText := tool(t, cs, "invite_member", map[string]any{"project_id": pid, "email": "new@example.com", "role": "admin"})
	require.Empty(t, errText)
	inv := out["invitation"].(map[string]any)
	assert.Equal(t, "new@example.com", inv["email"])
	assert.Equal(t, "admin", inv["role"])
	s.mailedToken(t, "new@example.com", "invited you to agents", "invitation", 1)
	out, errText = tool(t, cs, "list_invitations", map[string]any{"project_id": pid})
	require.Empty(t, errText)
	assert.Len(t, out["invitations"], 1)
	assert.Empty(t, s.mail.Messages(t, "x@example.com"), "the read-only token's call sent nothing")
}
