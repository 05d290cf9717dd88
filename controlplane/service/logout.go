package service

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/otelcol-svc/otelcol-svc/controlplane/store"
	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
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
// console tokens any of them minted, at the receivers within the mirror's latency.
// Logging out everywhere calls it; a change that must end them with it (a password reset
// or change, an SSO claim) calls revokeAllTx in its own transaction instead.
func (s *Service) RevokeAllForUser(ctx context.Context, userID string) error {
	var ids []string
	err := s.Store.InTx(ctx, func(tx *store.Tx) (err error) {
		ids, err = revokeAllTx(ctx, tx, userID)
		return err
	})
	if err == nil {
		s.RevokeCredentials(ctx, ids...)
	}
	return err
}

// revokeAllTx ends the user's credentials in tx and returns their ids, which the caller
// hands to RevokeCredentials once tx commits. In the transaction of the change that calls
// for it, the change and the ending stand or fall together: a reset that ended nothing
// would otherwise leave the link used up and every old credential working.
func revokeAllTx(ctx context.Context, tx *store.Tx, userID string) ([]string, error) {
	// The generation first: it holds the user's row, which what a credential creates
	// locks too (credentialHeld), so nothing made by an ended credential lands after.
	gen, err := tx.NextLoginGeneration(ctx, userID)
	if err != nil {
		return nil, err
	}
	sessions, err := tx.DeleteSessions(ctx, userID)
	if err != nil {
		return nil, err
	}
	pats, err := tx.DeleteAccessTokens(ctx, userID)
	if err != nil {
		return nil, err
	}
	// The codes before the grants: a code exchanged meanwhile has its grant listed.
	if err := tx.DeleteOAuthCodes(ctx, userID); err != nil {
		return nil, err
	}
	grants, err := tx.OAuthGrants(ctx, userID)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, g := range grants {
		if err := tx.DeleteOAuthGrant(ctx, userID, g.ID); err != nil {
			return nil, err
		}
		ids = append(ids, g.ID)
	}
	ids = append(append(append(ids, sessions...), pats...), LoginCredentialID(userID, gen))
	return ids, RecordRevocations(ctx, tx, ids...)
}

// CredentialEnded answers a request whose credential was ended (by logging out everywhere
// or a password change) after it was checked and before what it made was stored.
var CredentialEnded = apierror.New(http.StatusUnauthorized, apierror.InvalidToken,
	"the credential this request came with was ended while it ran (logged out everywhere, or the password changed); log in again")

// credentialHeld re-checks, in the transaction of something a credential creates (a
// personal access token, an OAuth code), that the credential still stands: it was checked
// when the request arrived, and a log-out everywhere committed since would otherwise miss
// what it makes. A context without a credential (no request) passes.
func credentialHeld(ctx context.Context, tx *store.Tx, userID string) error {
	gen, err := tx.LockUser(ctx, userID)
	if err != nil {
		return err
	}
	id := CredentialOf(ctx).ID
	if id == "" {
		return nil
	}
	held := id == LoginCredentialID(userID, gen)
	if !held && !strings.HasPrefix(id, "lgn_") {
		if held, err = tx.HoldsCredential(ctx, userID, id); err != nil {
			return err
		}
	}
	if !held {
		return CredentialEnded
	}
	return nil
}

// LoginGeneration is the user's current login generation, which new login tokens name.
func (s *Service) LoginGeneration(ctx context.Context, userID string) (gen int64, err error) {
	err = s.Store.InTx(ctx, func(tx *store.Tx) error {
		gen, err = tx.LoginGeneration(ctx, userID)
		return err
	})
	return gen, err
}
