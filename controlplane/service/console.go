package service

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"time"

	"github.com/otelcol-svc/otelcol-svc/controlplane/store"
	"github.com/otelcol-svc/otelcol-svc/internal/consoletoken"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
)

// consoleTokenTTL is the lifetime of a console token: the dashboard asks for a new one
// when it nears expiry, and a leaked one is soon useless.
const consoleTokenTTL = 10 * time.Minute

// ConsoleToken lets its holder read one project's recent records and fields from the
// receiver (the data-plane read API), so payloads never pass through the control plane.
type ConsoleToken struct {
	Token       string `json:"token" jsonschema:"send as Authorization: Bearer <token> to the receiver's console API"`
	ExpiresAt   string `json:"expires_at" jsonschema:"when the token stops working (RFC 3339); ask for a new one then"`
	ReceiverURL string `json:"receiver_url" jsonschema:"the receiver that serves the console API"`
}

// ConsolePublicKeys is what the mirror publishes for receivers to verify console tokens.
func (s *Service) ConsolePublicKeys() mirror.ConsoleKeys {
	pub := s.ConsoleKey.Public().(ed25519.PublicKey)
	return mirror.ConsoleKeys{PublicKeys: []string{base64.StdEncoding.EncodeToString(pub)}}
}

// Credential is what a request was authenticated with, as a console token minted by it
// names it: a personal access token's, a dashboard session's or an OAuth grant's id
// (empty for a login token, which cannot be revoked), and when it stops working.
type Credential struct {
	ID        string
	ExpiresAt time.Time
	// Limits narrow what a personal access token may do (limits.go).
	Limits Limits
}

// IssueConsoleToken issues a console token for a member of the project, naming their
// membership's grant and the credential that asked, so that receivers stop honouring it
// when the membership ends or the credential is revoked; it expires no later than the
// credential does.
func (s *Service) IssueConsoleToken(ctx context.Context, userID, id string, cred Credential) (ct ConsoleToken, err error) {
	err = s.InProject(ctx, userID, id, Read, func(ctx context.Context, tx *store.Tx, p store.Project, _ string, _ *mirror.Store) error {
		members, err := tx.MemberGrants(ctx, p.ID)
		if err != nil {
			return err
		}
		if members[userID].Since == 0 {
			return store.ErrNotFound // not a member (any more)
		}
		// The email names the user where they act through the data plane (an
		// incident's acknowledged_by), as the people around them know them.
		u, err := tx.UserByID(ctx, userID)
		if err != nil {
			return err
		}
		// Recorded before the token exists: data is never read with no trail.
		if err := tx.AuditRead(ctx); err != nil {
			return err
		}
		now := time.Now().UTC()
		ttl := consoleTokenTTL
		if !cred.ExpiresAt.IsZero() {
			// At least a second: the credential was valid when the request was checked.
			ttl = max(min(ttl, cred.ExpiresAt.Sub(now)), time.Second)
		}
		tok, err := consoletoken.Issue(s.ConsoleKey, consoletoken.Claims{UserID: userID, ProjectID: p.ID,
			Grant: members[userID].Since, Credential: cred.ID, Email: u.Email, ReadOnly: cred.Limits.ReadOnly}, ttl, now)
		if err != nil {
			return err
		}
		ct = ConsoleToken{Token: tok, ExpiresAt: now.Add(ttl).Format(time.RFC3339), ReceiverURL: s.ReceiverURL}
		return nil
	})
	return ct, err
}

// revocationKeep is how long a revocation is kept and published after it was made: as
// long as a console token minted with the credential can be honoured. That is the
// token's lifetime, plus the receivers' clock leeway, plus a minute for a token minted by
// a request that was checked just before the revocation committed and for the clocks of
// control planes sharing the database.
const revocationKeep = consoleTokenTTL + consoletoken.Leeway + time.Minute

// RecordRevocations records that credentials (personal access tokens, sessions, OAuth
// grants, by id) are revoked, inside the transaction that revokes them: once that
// commits, the revocation reaches the receivers even if NATS is down and the control
// plane restarts before it is back (Resync publishes every recorded one). Call
// RevokeCredentials after the commit to publish at once.
func RecordRevocations(ctx context.Context, tx *store.Tx, ids ...string) error {
	now := time.Now()
	return tx.AddRevocations(ctx, now, now.Add(revocationKeep), ids...)
}

// RevokeCredentials tells the receivers that credentials, revoked and recorded with
// RecordRevocations in a committed transaction, are revoked, so the console tokens they
// minted stop working within the mirror's latency (the credential itself already fails at
// the control plane). While NATS is unreachable the recorded revocations are published by
// a retry in the background, or by the next start's Resync.
func (s *Service) RevokeCredentials(ctx context.Context, ids ...string) {
	if len(ids) == 0 || s.Mirror == nil { // nil: a service without a data plane (unit tests)
		return
	}
	now := time.Now()
	revs := make([]store.Revocation, len(ids))
	for i, id := range ids {
		revs[i] = store.Revocation{CredentialID: id, RevokedAt: now}
	}
	if left, _ := s.publishRevocations(ctx, revs); left > 0 {
		s.Logger.Warn("revocation not yet published to the data plane; retrying", "credentials", left)
		s.drainRevocations()
	}
}

// publishRevocations writes revocations to the mirror and records which it took; left is
// how many it did not.
func (s *Service) publishRevocations(ctx context.Context, revs []store.Revocation) (left int, err error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	ms, _, err := s.Mirror(ctx)
	if err != nil {
		return len(revs), err
	}
	var done []string
	for _, r := range revs {
		if err = ms.Revoke(ctx, r.CredentialID, r.RevokedAt); err != nil {
			// One failed write means NATS is away: the rest would wait out their timeouts.
			break
		}
		done = append(done, r.CredentialID)
	}
	if len(done) > 0 {
		if merr := s.Store.InTx(ctx, func(tx *store.Tx) error { return tx.RevocationsPublished(ctx, time.Now(), done...) }); merr != nil {
			// Published all the same; unmarked, they are only published again.
			s.Logger.Warn("revocations published but not marked so", "error", merr)
		}
	}
	return len(revs) - len(done), err
}

// PublishPendingRevocations publishes the recorded revocations not yet published and
// still in force; left is how many are still unpublished.
func (s *Service) PublishPendingRevocations(ctx context.Context) (left int, err error) {
	pending, err := s.revocationsInForce(ctx, true)
	if err != nil || len(pending) == 0 {
		return 0, err
	}
	return s.publishRevocations(ctx, pending)
}

// SweepRevocations deletes the recorded revocations that have expired.
func (s *Service) SweepRevocations(ctx context.Context) error {
	_, err := s.revocationsInForce(ctx, true)
	return err
}

// revocationsInForce lists the recorded revocations still in force (pendingOnly: those
// not yet published), after deleting the expired ones.
func (s *Service) revocationsInForce(ctx context.Context, pendingOnly bool) ([]store.Revocation, error) {
	now := time.Now()
	var revs []store.Revocation
	var lost int64
	err := s.Store.InTx(ctx, func(tx *store.Tx) error {
		var err error
		if _, lost, err = tx.SweepRevocations(ctx, now); err != nil {
			return err
		}
		revs, err = tx.Revocations(ctx, now, pendingOnly)
		return err
	})
	if lost > 0 && err == nil {
		s.Logger.Error("revocation never reached the data plane; console tokens minted with these credentials lived until they expired", "credentials", lost)
	}
	return revs, err
}

// drainRevocations starts (unless it runs) the background retry that publishes the
// recorded revocations until none is pending. The database, not this goroutine, holds
// what is pending: a revocation recorded while it runs is drained too, and one left when
// the process stops is published by the next start's Resync.
func (s *Service) drainRevocations() {
	s.revMu.Lock()
	defer s.revMu.Unlock()
	s.revAgain = true
	if s.revDraining {
		return
	}
	s.revDraining = true
	go func() {
		wait := 100 * time.Millisecond
		for {
			time.Sleep(wait)
			s.revMu.Lock()
			s.revAgain = false
			s.revMu.Unlock()
			left, err := s.PublishPendingRevocations(context.Background())
			if err == nil && left == 0 {
				s.revMu.Lock()
				// A failure reported during this pass may be of a revocation recorded
				// after it read the table: one more pass.
				if !s.revAgain {
					s.revDraining = false
					s.revMu.Unlock()
					s.Logger.Info("pending revocations published to the data plane")
					return
				}
				s.revMu.Unlock()
				continue
			}
			wait = min(2*wait, 10*time.Second)
		}
	}()
}
