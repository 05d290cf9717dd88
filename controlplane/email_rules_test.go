package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// startMailStackAt is a control plane over db whose mail goes to smtpURL (a server that
// may not be there).
func startMailStackAt(t *testing.T, db map[string]string, smtpURL string) *stack {
	t.Helper()
	listen := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	env := map[string]string{"SVC_SMTP_URL": smtpURL, "SVC_SMTP_FROM": "otelcol-svc <noreply@example.com>",
		"SVC_CONTROLPLANE_LISTEN": listen, "SVC_PUBLIC_URL": "http://" + listen}
	for k, v := range db {
		env[k] = v
	}
	return startStack(t, env)
}

// verify opens the n-th verification link mailed to email.
func (s *mailStack) verify(t *testing.T, email string, n int) {
	t.Helper()
	tok := s.mailedToken(t, email, "Confirm your email address", "verify-email", n)
	r := call(t, s.cp.URL, "POST", "/api/v1/auth/verify-email", "", map[string]string{"token": tok})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Raw)
	require.Equal(t, true, r.Body["verified"])
}

func stopControlPlane(t *testing.T, s *stack) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s.cp.Stop(ctx)
}

// Turning email on over a database whose members never verified their address (every
// account from before, and anyone added while email was off): a role change still
// changes the role (a demotion when offboarding must not silently do nothing), and the
// owner's own address is the owner's 409, not an invitation mailed to them.
func TestEmailOnOverExistingMembers(t *testing.T) {
	databases(t, func(t *testing.T, db map[string]string) {
		off := startStack(t, db)
		owner, _ := off.signup(t, "owner@example.com")
		bea, _ := off.signup(t, "bea@example.com")
		pid := call(t, off.cp.URL, "POST", "/api/v1/projects", owner, map[string]string{"name": "p"}).str("id")
		r := call(t, off.cp.URL, "POST", "/api/v1/projects/"+pid+"/members", owner, map[string]string{"email": "bea@example.com", "role": "admin"})
		require.Equal(t, http.StatusCreated, r.Status, "%s", r.Raw)
		stopControlPlane(t, off)

		s := startMailStack(t, db)
		cp := s.cp.URL
		r = call(t, cp, "POST", "/api/v1/projects/"+pid+"/members", owner, map[string]string{"email": "bea@example.com", "role": "member"})
		require.Equal(t, http.StatusCreated, r.Status, "the role changes, no invitation: %s", r.Raw)
		p := call(t, cp, "GET", "/api/v1/projects/"+pid, bea, nil)
		require.Equal(t, http.StatusOK, p.Status, "%s", p.Raw)
		assert.Equal(t, "member", p.Body["role"], "demoted")
		r = call(t, cp, "POST", "/api/v1/projects/"+pid+"/members", owner, map[string]string{"email": "owner@example.com"})
		assert.Equal(t, http.StatusConflict, r.Status, "%s", r.Raw)
		assert.Empty(t, call(t, cp, "GET", "/api/v1/projects/"+pid+"/invitations", owner, nil).Body["invitations"])
		assert.Empty(t, s.mail.Messages(t, "bea@example.com"), "no invitation mailed")
		assert.Empty(t, s.mail.Messages(t, "owner@example.com"), "no invitation mailed")
	})
}

// Invitations carry the inviter's words from the operator's domain: only an account that
// proved its own address sends them, and at most InvitesPerHourByAccount an hour
// whatever the project.
func TestInviteNeedsVerifiedInviter(t *testing.T) {
	s := startMailStack(t, map[string]string{"SVC_DATA_DIR": t.TempDir()})
	cp := s.cp.URL
	owner, _ := s.signup(t, "owner@example.com")
	pid := call(t, cp, "POST", "/api/v1/projects", owner, map[string]string{"name": "p"}).str("id")
	r := call(t, cp, "POST", "/api/v1/projects/"+pid+"/members", owner, map[string]string{"email": "x@example.com"})
	assert.Equal(t, http.StatusForbidden, r.Status, "%s", r.Raw)
	assert.Contains(t, r.message(), "confirm your own email address")
	assert.Empty(t, call(t, cp, "GET", "/api/v1/projects/"+pid+"/invitations", owner, nil).Body["invitations"])

	s.verify(t, "owner@example.com", 1)
	other := call(t, cp, "POST", "/api/v1/projects", owner, map[string]string{"name": "q"}).str("id")
	for i := range 20 {
		project := pid
		if i%2 == 1 {
			project = other
		}
		r = call(t, cp, "POST", "/api/v1/projects/"+project+"/members", owner, map[string]string{"email": fmt.Sprintf("u%d@example.com", i)})
		require.Equal(t, http.StatusAccepted, r.Status, "%d: %s", i, r.Raw)
	}
	r = call(t, cp, "POST", "/api/v1/projects/"+other+"/members", owner, map[string]string{"email": "u20@example.com"})
	assert.Equal(t, http.StatusTooManyRequests, r.Status, "%s", r.Raw)
	assert.Contains(t, r.message(), "you sent 20 invitations")
	assert.Empty(t, s.mail.Messages(t, "x@example.com"))
	assert.Empty(t, s.mail.Messages(t, "u20@example.com"))
}

// With the mail server down: signing up still works (its mail is sent after the
// answer), an invitation is refused with 502 and nothing new is left pending (the
// address's earlier invitation, whose mail did go, still works), and a reset request
// answers 202 as always.
func TestEmailWithSMTPDown(t *testing.T) {
	db := map[string]string{"SVC_DATA_DIR": t.TempDir()}
	s := startMailStack(t, db)
	owner, _ := s.signup(t, "owner@example.com")
	s.verify(t, "owner@example.com", 1)
	pid := call(t, s.cp.URL, "POST", "/api/v1/projects", owner, map[string]string{"name": "p"}).str("id")
	r := call(t, s.cp.URL, "POST", "/api/v1/projects/"+pid+"/members", owner, map[string]string{"email": "x@example.com"})
	require.Equal(t, http.StatusAccepted, r.Status, "%s", r.Raw)
	xID := r.Body["invitation"].(map[string]any)["id"]
	xTok := s.mailedToken(t, "x@example.com", "invited you to", "invitation", 1)
	stopControlPlane(t, s.stack)

	down := startMailStackAt(t, db, "smtp://127.0.0.1:"+strconv.Itoa(testenv.FreePort(t)))
	cp := down.cp.URL
	down.signup(t, "new@example.com")
	r = call(t, cp, "POST", "/api/v1/projects/"+pid+"/members", owner, map[string]string{"email": "y@example.com"})
	assert.Equal(t, http.StatusBadGateway, r.Status, "%s", r.Raw)
	assert.Equal(t, "email_failed", r.code())
	r = call(t, cp, "POST", "/api/v1/projects/"+pid+"/members", owner, map[string]string{"email": "x@example.com", "role": "admin"})
	assert.Equal(t, http.StatusBadGateway, r.Status, "%s", r.Raw)
	list := call(t, cp, "GET", "/api/v1/projects/"+pid+"/invitations", owner, nil).Body["invitations"].([]any)
	require.Len(t, list, 1, "only the invitation whose mail went")
	assert.Equal(t, xID, list[0].(map[string]any)["id"])
	assert.Equal(t, "member", list[0].(map[string]any)["role"])
	assert.Equal(t, "owner@example.com", list[0].(map[string]any)["invited_by_email"])
	r = call(t, cp, "POST", "/api/v1/auth/invitation", "", map[string]string{"token": xTok})
	assert.Equal(t, http.StatusOK, r.Status, "the earlier link still works: %s", r.Raw)
	r = call(t, cp, "POST", "/api/v1/auth/password-reset", "", map[string]string{"email": "owner@example.com"})
	assert.Equal(t, http.StatusAccepted, r.Status, "%s", r.Raw)
}

// The invitation link proves the address: it claims an account someone else made with
// it and never verified (their password and credentials end). Accepting never lowers a
// role, and a link stops working when whoever sent it can no longer invite. Opening
// links is limited loosely per client address (an office onboards many at once); the
// audit log names the invitation, the join and the reset.
func TestInvitationClaimsRolesAndAudit(t *testing.T) {
	databases(t, func(t *testing.T, db map[string]string) {
		s := startMailStack(t, db)
		cp := s.cp.URL
		owner, _ := s.signup(t, "owner@example.com")
		s.verify(t, "owner@example.com", 1)
		pid := call(t, cp, "POST", "/api/v1/projects", owner, map[string]string{"name": "p"}).str("id")

		// A squatter's unverified account with bea's address.
		squat, _ := s.signup(t, "bea@example.com")
		r := call(t, cp, "POST", "/api/v1/projects/"+pid+"/members", owner, map[string]string{"email": "bea@example.com"})
		require.Equal(t, http.StatusAccepted, r.Status, "%s", r.Raw)
		invID := r.Body["invitation"].(map[string]any)["id"]
		beaTok := s.mailedToken(t, "bea@example.com", "invited you to", "invitation", 1)
		for i := range 30 { // more than the 20 an hour that mailing is allowed
			r = call(t, cp, "POST", "/api/v1/auth/invitation", "", map[string]string{"token": beaTok})
			require.Equal(t, http.StatusOK, r.Status, "open %d: %s", i, r.Raw)
		}
		assert.Equal(t, "owner@example.com", r.Body["invited_by"])
		r = call(t, cp, "POST", "/api/v1/auth/invitation/accept", "", map[string]string{"token": beaTok, "password": "bea's real password"})
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Raw)
		bea := r.str("token")
		assert.Equal(t, http.StatusUnauthorized, call(t, cp, "GET", "/api/v1/me", squat, nil).Status, "the squatter's login ended")
		assert.Equal(t, http.StatusUnauthorized, call(t, cp, "POST", "/api/v1/auth/login", "", map[string]string{"email": "bea@example.com", "password": "correct horse battery"}).Status)
		assert.Equal(t, "member", call(t, cp, "GET", "/api/v1/projects/"+pid, bea, nil).Body["role"])

		evs := auditEvents(t, cp, "/api/v1/projects/"+pid+"/audit", owner)
		created := findAction(evs, "invitation.create")
		require.NotNil(t, created, "%v", evs)
		assert.Equal(t, invID, created["target"])
		assert.Contains(t, fmt.Sprint(created["changes"]), "bea@example.com")
		assert.Nil(t, findAction(evs, "member.add"), "an invitation is not a member added")
		joined := findAction(evs, "invitation.accept")
		require.NotNil(t, joined, "%v", evs)
		assert.Equal(t, invID, joined["target"])

		// A stale "member" invitation does not demote an admin.
		r = call(t, cp, "POST", "/api/v1/projects/"+pid+"/members", owner, map[string]string{"email": "dan@example.com"})
		require.Equal(t, http.StatusAccepted, r.Status, "%s", r.Raw)
		danTok := s.mailedToken(t, "dan@example.com", "invited you to", "invitation", 1)
		dan, _ := s.signup(t, "dan@example.com")
		s.verify(t, "dan@example.com", 1)
		require.Equal(t, http.StatusCreated, call(t, cp, "POST", "/api/v1/projects/"+pid+"/members", owner, map[string]string{"email": "dan@example.com", "role": "admin"}).Status)
		r = call(t, cp, "POST", "/api/v1/auth/invitation/accept", "", map[string]string{"token": danTok, "password": "not dan's password"})
		assert.Equal(t, http.StatusUnauthorized, r.Status, "a verified account is not claimed: %s", r.Raw)
		assert.Contains(t, r.message(), "reset your password")
		r = call(t, cp, "POST", "/api/v1/auth/invitation/accept", "", map[string]string{"token": danTok, "password": "correct horse battery"})
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Raw)
		assert.Equal(t, "admin", call(t, cp, "GET", "/api/v1/projects/"+pid, dan, nil).Body["role"], "still an admin")

		// An admin's invitation stops working once they are demoted.
		r = call(t, cp, "POST", "/api/v1/projects/"+pid+"/members", dan, map[string]string{"email": "fay@example.com"})
		require.Equal(t, http.StatusAccepted, r.Status, "%s", r.Raw)
		fayTok := s.mailedToken(t, "fay@example.com", "invited you to", "invitation", 1)
		require.Equal(t, http.StatusCreated, call(t, cp, "POST", "/api/v1/projects/"+pid+"/members", owner, map[string]string{"email": "dan@example.com", "role": "member"}).Status)
		r = call(t, cp, "POST", "/api/v1/auth/invitation/accept", "", map[string]string{"token": fayTok, "password": "fay's long password"})
		assert.Equal(t, http.StatusBadRequest, r.Status, "%s", r.Raw)
		assert.Contains(t, r.message(), "can no longer invite")

		// A reset ends a dashboard session too, and is in the account's log.
		b := newBrowser(t, cp)
		require.Equal(t, http.StatusOK, b.do("POST", "/api/v1/auth/session", map[string]string{"email": "bea@example.com", "password": "bea's real password"}, false).Status)
		require.Equal(t, http.StatusOK, b.do("GET", "/api/v1/auth/session", nil, false).Status)
		require.Equal(t, http.StatusAccepted, call(t, cp, "POST", "/api/v1/auth/password-reset", "", map[string]string{"email": "bea@example.com"}).Status)
		resetTok := s.mailedToken(t, "bea@example.com", "Reset your password", "reset-password", 1)
		r = call(t, cp, "POST", "/api/v1/auth/password-reset/confirm", "", map[string]string{"token": resetTok, "password": "bea's newest password"})
		require.Equal(t, http.StatusNoContent, r.Status, "%s", r.Raw)
		assert.Equal(t, http.StatusUnauthorized, b.do("GET", "/api/v1/auth/session", nil, false).Status, "the session ended")
		fresh := call(t, cp, "POST", "/api/v1/auth/login", "", map[string]string{"email": "bea@example.com", "password": "bea's newest password"}).str("token")
		reset := findAction(auditEvents(t, cp, "/api/v1/audit", fresh), "password.reset")
		require.NotNil(t, reset)
		assert.Equal(t, "email_link", reset["credential"].(map[string]any)["kind"])
	})
}

// A reset link used after its 30 minutes is refused through the API and changes nothing
// (the stored expiry is moved into the past, as the clock would move past it).
func TestResetLinkExpires(t *testing.T) {
	databases(t, func(t *testing.T, db map[string]string) {
		s := startMailStack(t, db)
		cp := s.cp.URL
		r := call(t, cp, "POST", "/api/v1/auth/signup", "", map[string]string{"email": "ana@example.com", "password": "short"})
		assert.Equal(t, http.StatusBadRequest, r.Status, "one password rule for signup too: %s", r.Raw)
		assert.Contains(t, r.message(), "8 to 256 characters")
		s.signup(t, "ana@example.com")
		require.Equal(t, http.StatusAccepted, call(t, cp, "POST", "/api/v1/auth/password-reset", "", map[string]string{"email": "ana@example.com"}).Status)
		tok := s.mailedToken(t, "ana@example.com", "Reset your password", "reset-password", 1)
		past := time.Now().Add(-time.Second).UnixMilli()
		res, err := rawDB(t, db).Exec(fmt.Sprintf(`UPDATE email_tokens SET expires_at = %d WHERE kind = 'reset'`, past))
		require.NoError(t, err)
		n, _ := res.RowsAffected()
		require.EqualValues(t, 1, n)
		r = call(t, cp, "POST", "/api/v1/auth/password-reset/confirm", "", map[string]string{"token": tok, "password": "a brand new password"})
		assert.Equal(t, http.StatusBadRequest, r.Status, "%s", r.Raw)
		assert.Equal(t, "invalid_token", r.code())
		assert.Equal(t, http.StatusOK, call(t, cp, "POST", "/api/v1/auth/login", "", map[string]string{"email": "ana@example.com", "password": "correct horse battery"}).Status, "the password did not change")
	})
}

// blackHole is a mail server that accepts connections and never answers, as one that
// hangs does: each connection is reported when accepted and when the client gives up.
type blackHole struct {
	addr             string
	accepted, closed chan struct{}
}

func startBlackHole(t *testing.T) *blackHole {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	b := &blackHole{addr: ln.Addr().String(), accepted: make(chan struct{}, 16), closed: make(chan struct{}, 16)}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			b.accepted <- struct{}{}
			go func() {
				_, _ = io.Copy(io.Discard, c)
				b.closed <- struct{}{}
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return b
}

// A mail server that hangs holds neither a reset request nor a password change: both
// answer while the mail is still waiting for it (before, the answer came only after the
// 15 s delivery timeout, and a browser giving up earlier lost its new session).
func TestMailAfterTheAnswer(t *testing.T) {
	db := map[string]string{"SVC_DATA_DIR": t.TempDir()}
	s := startMailStack(t, db)
	owner, _ := s.signup(t, "owner@example.com")
	s.verify(t, "owner@example.com", 1)
	stopControlPlane(t, s.stack)

	bh := startBlackHole(t)
	cp := startMailStackAt(t, db, "smtp://"+bh.addr).cp.URL
	r := call(t, cp, "PUT", "/api/v1/me/password", owner, map[string]string{"current_password": "correct horse battery", "password": "the second password"})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Raw)
	select {
	case <-bh.closed:
		t.Fatal("the password change waited for the mail server")
	default:
	}
	waitFor(t, bh.accepted, "the password-changed notice to be sent")

	r = call(t, cp, "POST", "/api/v1/auth/password-reset", "", map[string]string{"email": "owner@example.com"})
	require.Equal(t, http.StatusAccepted, r.Status, "%s", r.Raw)
	select {
	case <-bh.closed:
		t.Fatal("the reset request waited for the mail server")
	default:
	}
	waitFor(t, bh.accepted, "the reset mail to be sent")
}

func waitFor(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}
