package service

import (
	"context"
	"fmt"

	"github.com/otelcol-svc/otelcol-svc/controlplane/store"
)

// Logging out everywhere. Sessions, personal access tokens and OAuth grants are rows,
// checked on every request: deleting them ends them at the control plane, and the console
// tokens they minted end at the receivers through the mirror's revocations. A login token
// (a JWT) is no row: it names the user's login generation, counts only while that is the
// user's, and the console tokens it mints name the generation as their credential
// (LoginCredentialID), so raising the generation and revoking its id ends both.

// LoginCredentialID is the credential id of the login tokens of a user's generation gen,
// which the console tokens they mint name.
func LoginCredentialID(userID string, gen int64) string {
	return fmt.Sprintf("lgn_%s_%d", userID, gen)
}

// RevokeAllForUser ends every credential the user holds: dashboard sessions, login
// tokens, personal access tokens, OAuth grants (with codes not yet exchanged), and the
// console tokens any of them minted, at the receivers within the mirror's latency. Logging
// out everywhere, a password change and a password reset call it.
func (s *Service) RevokeAllForUser(ctx context.Context, userID string) error {
	var ids []string
	err := s.Store.InTx(ctx, func(tx *store.Tx) error {
		ids = nil
		sessions, err := tx.DeleteSessions(ctx, userID)
		if err != nil {
			return err
		}
		pats, err := tx.DeleteAccessTokens(ctx, userID)
		if err != nil {
			return err
		}
		grants, err := tx.OAuthGrants(ctx, userID)
		if err != nil {
			return err
		}
		for _, g := range grants {
			if err := tx.DeleteOAuthGrant(ctx, userID, g.ID); err != nil {
				return err
			}
			ids = append(ids, g.ID)
		}
		if err := tx.DeleteOAuthCodes(ctx, userID); err != nil {
			return err
		}
		gen, err := tx.NextLoginGeneration(ctx, userID)
		if err != nil {
			return err
		}
		ids = append(append(append(ids, sessions...), pats...), LoginCredentialID(userID, gen))
		return RecordRevocations(ctx, tx, ids...)
	})
	if err == nil {
		s.RevokeCredentials(ctx, ids...)
	}
	return err
}

// LoginGeneration is the user's current login generation, which new login tokens name.
func (s *Service) LoginGeneration(ctx context.Context, userID string) (gen int64, err error) {
	err = s.Store.InTx(ctx, func(tx *store.Tx) error {
		gen, err = tx.LoginGeneration(ctx, userID)
		return err
	})
	return gen, err
}
