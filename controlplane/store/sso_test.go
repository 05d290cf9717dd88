package store

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// An account is linked to the first provider subject that logs in to it and refuses any
// other; an SSO join is remembered per project and person; both databases.
func TestSSOSubjectAndJoins(t *testing.T) {
	eachDatabase(t, func(t *testing.T, open func([]string) *Store) {
		s := open(migrations)
		now := time.Now().UTC()
		inTx(t, s, func(ctx context.Context, tx *Tx) error {
			require.NoError(t, tx.CreateSSOUser(ctx, User{ID: "u_1", Email: "a@example.com", PasswordHash: "x", CreatedAt: now}, now))
			sub, err := tx.SSOSubject(ctx, "u_1")
			require.NoError(t, err)
			require.Empty(t, sub)
			require.NoError(t, tx.SetSSOSubject(ctx, "u_1", "alice"))
			require.NoError(t, tx.SetSSOSubject(ctx, "u_1", "alice"), "the same subject logs in again")
			require.ErrorIs(t, tx.SetSSOSubject(ctx, "u_1", "someone-else"), ErrConflict)
			sub, err = tx.SSOSubject(ctx, "u_1")
			require.NoError(t, err)
			require.Equal(t, "alice", sub)

			require.NoError(t, tx.CreateProject(ctx, Project{ID: "p_1", Name: "p", OwnerID: "u_1", CreatedAt: now, UpdatedAt: now}))
			joined, err := tx.SSOJoined(ctx, "p_1", "u_1")
			require.NoError(t, err)
			require.False(t, joined)
			require.NoError(t, tx.RecordSSOJoin(ctx, "p_1", "u_1"))
			require.NoError(t, tx.RecordSSOJoin(ctx, "p_1", "u_1"))
			joined, err = tx.SSOJoined(ctx, "p_1", "u_1")
			require.NoError(t, err)
			require.True(t, joined)
			return nil
		})
	})
}
