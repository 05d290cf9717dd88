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

// IssueConsoleToken issues a console token for a member of the project, naming their
// membership's grant, so that receivers stop honouring it when the membership ends.
func (s *Service) IssueConsoleToken(ctx context.Context, userID, id string) (ct ConsoleToken, err error) {
	err = s.InProject(ctx, userID, id, Read, func(ctx context.Context, tx *store.Tx, p store.Project, _ string, _ *mirror.Store) error {
		members, err := tx.MemberGrants(ctx, p.ID)
		if err != nil {
			return err
		}
		if members[userID].Since == 0 {
			return store.ErrNotFound // not a member (any more)
		}
		now := time.Now().UTC()
		tok, err := consoletoken.Issue(s.ConsoleKey, consoletoken.Claims{UserID: userID, ProjectID: p.ID, Grant: members[userID].Since}, consoleTokenTTL, now)
		if err != nil {
			return err
		}
		ct = ConsoleToken{Token: tok, ExpiresAt: now.Add(consoleTokenTTL).Format(time.RFC3339), ReceiverURL: s.ReceiverURL}
		return nil
	})
	return ct, err
}
