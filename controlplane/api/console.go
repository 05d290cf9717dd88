package api

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"net/http"
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
func (s *Server) consolePublicKeys() mirror.ConsoleKeys {
	pub := s.ConsoleKey.Public().(ed25519.PublicKey)
	return mirror.ConsoleKeys{PublicKeys: []string{base64.StdEncoding.EncodeToString(pub)}}
}

// consoleTokenFor issues a console token for a member of p, naming their membership's
// grant, so that receivers stop honouring it when the membership ends.
func (s *Server) consoleTokenFor(ctx context.Context, tx *store.Tx, userID string, p store.Project) (ConsoleToken, error) {
	members, err := tx.MemberGrants(ctx, p.ID)
	if err != nil {
		return ConsoleToken{}, err
	}
	if members[userID] == 0 {
		return ConsoleToken{}, store.ErrNotFound // not a member (any more)
	}
	now := time.Now().UTC()
	tok, err := consoletoken.Issue(s.ConsoleKey, consoletoken.Claims{UserID: userID, ProjectID: p.ID, Grant: members[userID]}, consoleTokenTTL, now)
	if err != nil {
		return ConsoleToken{}, err
	}
	return ConsoleToken{Token: tok, ExpiresAt: now.Add(consoleTokenTTL).Format(time.RFC3339), ReceiverURL: s.ReceiverURL}, nil
}

func (s *Server) consoleToken(w http.ResponseWriter, r *http.Request) {
	s.onProject(w, r, read, func(ctx context.Context, tx *store.Tx, p store.Project, _ string, _ *mirror.Store, rep *reply) error {
		ct, err := s.consoleTokenFor(ctx, tx, currentUser(r).ID, p)
		if err != nil {
			return err
		}
		rep.set(http.StatusOK, ct)
		return nil
	})
}
