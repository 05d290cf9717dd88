package store

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A mailed link works once and only before it expires; a newer one of the same kind
// replaces the older; verification marks only the address the link was mailed to.
func TestEmailTokensOnceAndVerify(t *testing.T) {
	eachDatabase(t, func(t *testing.T, open func([]string) *Store) {
		s := open(migrations)
		now := time.Now().UTC()
		inTx(t, s, func(ctx context.Context, tx *Tx) error {
			require.NoError(t, tx.CreateUser(ctx, User{ID: "u_1", Email: "a@example.com", PasswordHash: "x", CreatedAt: now}))
			u, err := tx.UserByID(ctx, "u_1")
			require.NoError(t, err)
			assert.True(t, u.EmailVerifiedAt.IsZero(), "a new account is unverified")

			tok := EmailToken{Hash: "h1", Kind: EmailVerify, UserID: "u_1", Email: "a@example.com", CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
			require.NoError(t, tx.CreateEmailToken(ctx, tok))
			tok.Hash = "h2"
			require.NoError(t, tx.CreateEmailToken(ctx, tok))
			_, err = tx.TakeEmailToken(ctx, EmailVerify, "h1", now)
			assert.ErrorIs(t, err, ErrNotFound, "the older link was replaced")
			_, err = tx.TakeEmailToken(ctx, EmailPasswordReset, "h2", now)
			assert.ErrorIs(t, err, ErrNotFound, "a verification link is no reset link")
			got, err := tx.TakeEmailToken(ctx, EmailVerify, "h2", now)
			require.NoError(t, err)
			assert.Equal(t, "u_1", got.UserID)
			_, err = tx.TakeEmailToken(ctx, EmailVerify, "h2", now)
			assert.ErrorIs(t, err, ErrNotFound, "used once")

			require.NoError(t, tx.CreateEmailToken(ctx, EmailToken{Hash: "h3", Kind: EmailPasswordReset, UserID: "u_1", Email: "a@example.com", CreatedAt: now, ExpiresAt: now.Add(time.Minute)}))
			_, err = tx.TakeEmailToken(ctx, EmailPasswordReset, "h3", now.Add(time.Minute))
			assert.ErrorIs(t, err, ErrNotFound, "expired")

			assert.ErrorIs(t, tx.VerifyEmail(ctx, "u_1", "old@example.com", now), ErrNotFound, "not its address")
			require.NoError(t, tx.VerifyEmail(ctx, "u_1", "a@example.com", now))
			u, err = tx.UserByEmail(ctx, "a@example.com")
			require.NoError(t, err)
			assert.Equal(t, now.UnixMilli(), u.EmailVerifiedAt.UnixMilli())
			return nil
		})
	})
}

// Invitations: one per project and address, listed until they expire, found by their
// secret's hash only while live, taken once.
func TestInvitations(t *testing.T) {
	eachDatabase(t, func(t *testing.T, open func([]string) *Store) {
		s := open(migrations)
		now := time.Now().UTC()
		inTx(t, s, func(ctx context.Context, tx *Tx) error {
			require.NoError(t, tx.CreateUser(ctx, User{ID: "u_1", Email: "owner@example.com", PasswordHash: "x", CreatedAt: now}))
			require.NoError(t, tx.CreateProject(ctx, Project{ID: "p_1", Name: "prod", OwnerID: "u_1", Version: 1, CreatedAt: now, UpdatedAt: now}))
			inv := Invitation{ID: "inv_1", ProjectID: "p_1", Email: "b@example.com", Role: RoleAdmin, Hash: "h1", InvitedBy: "u_1", CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
			require.NoError(t, tx.PutInvitation(ctx, inv))
			inv.ID, inv.Hash, inv.Role = "inv_2", "h2", RoleMember
			require.NoError(t, tx.PutInvitation(ctx, inv))
			require.NoError(t, tx.PutInvitation(ctx, Invitation{ID: "inv_3", ProjectID: "p_1", Email: "c@example.com", Role: RoleMember, Hash: "h3", InvitedBy: "u_1", CreatedAt: now, ExpiresAt: now.Add(time.Minute)}))

			list, err := tx.Invitations(ctx, "p_1", now)
			require.NoError(t, err)
			require.Len(t, list, 2, "inviting again replaced the first")
			list, err = tx.Invitations(ctx, "p_1", now.Add(2*time.Minute))
			require.NoError(t, err)
			require.Len(t, list, 1, "expired ones are not pending")
			assert.Equal(t, "inv_2", list[0].ID)

			_, err = tx.InvitationByHash(ctx, "h1", now)
			assert.ErrorIs(t, err, ErrNotFound)
			got, err := tx.InvitationByHash(ctx, "h2", now)
			require.NoError(t, err)
			assert.Equal(t, RoleMember, got.Role)
			p, err := tx.InvitedProject(ctx, got.ProjectID)
			require.NoError(t, err)
			assert.Equal(t, "prod", p.Name)
			require.NoError(t, tx.TakeInvitation(ctx, "inv_2"))
			assert.ErrorIs(t, tx.TakeInvitation(ctx, "inv_2"), ErrNotFound, "taken once")

			assert.ErrorIs(t, tx.DeleteInvitation(ctx, "p_other", "inv_3"), ErrNotFound, "another project's")
			require.NoError(t, tx.DeleteInvitation(ctx, "p_1", "inv_3"))
			require.NoError(t, tx.SweepEmail(ctx, now))
			return nil
		})
	})
}
