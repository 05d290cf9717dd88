package service

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"time"

	"github.com/otelcol-svc/otelcol-svc/components/consoletoken"
	"github.com/otelcol-svc/otelcol-svc/components/mirror"
	"github.com/otelcol-svc/otelcol-svc/controlplane/store"
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
		now := time.Now().UTC()
		ttl := consoleTokenTTL
		if !cred.ExpiresAt.IsZero() {
			// At least a second: the credential was valid when the request was checked.
			ttl = max(min(ttl, cred.ExpiresAt.Sub(now)), time.Second)
		}
		tok, err := consoletoken.Issue(s.ConsoleKey, consoletoken.Claims{UserID: userID, ProjectID: p.ID,
			Grant: members[userID].Since, Credential: cred.ID}, ttl, now)
		if err != nil {
			return err
		}
		ct = ConsoleToken{Token: tok, ExpiresAt: now.Add(ttl).Format(time.RFC3339), ReceiverURL: s.ReceiverURL}
		return nil
	})
	return ct, err
}

// RevokeCredentials tells the receivers that credentials (personal access tokens,
// sessions, OAuth grants, by id) are revoked, so the console tokens they minted stop
// working within the mirror's latency. Called once the revocation is committed: the
// credential itself already fails at the control plane. While NATS is unreachable the
// publish is retried in the background for as long as such a token can live.
func (s *Service) RevokeCredentials(ctx context.Context, ids ...string) {
	if len(ids) == 0 || s.Mirror == nil { // nil: a service without a data plane (unit tests)
		return
	}
	now := time.Now()
	left := s.revoke(ctx, ids, now)
	if len(left) == 0 {
		return
	}
	s.Logger.Warn("revocation not yet published to the data plane; retrying", "credentials", len(left))
	go func() {
		deadline := now.Add(consoletoken.MaxTTL + consoletoken.Leeway)
		wait := 100 * time.Millisecond
		for len(left) > 0 && time.Now().Before(deadline) {
			time.Sleep(wait)
			wait = min(2*wait, 10*time.Second)
			left = s.revoke(context.Background(), left, now)
		}
		if len(left) > 0 {
			s.Logger.Error("revocation never reached the data plane; console tokens minted with these credentials lived until they expired", "credentials", len(left))
		}
	}()
}

// revoke publishes revocations and returns the ids it could not.
func (s *Service) revoke(ctx context.Context, ids []string, at time.Time) []string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	ms, _, err := s.Mirror(ctx)
	if err != nil {
		return ids
	}
	var left []string
	for _, id := range ids {
		if err := ms.Revoke(ctx, id, at); err != nil {
			left = append(left, id)
		}
	}
	return left
}
