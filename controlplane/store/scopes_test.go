package store

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Keys made before keys had scopes keep doing everything (Scopes nil), tokens made before
// limits open every project, and every account starts at login generation 0, so an
// upgrade changes nothing anyone holds; new rows keep what they are given.
func TestScopesMigrationKeepsWhatExists(t *testing.T) {
	eachDatabase(t, func(t *testing.T, open func([]string) *Store) {
		old := open(migrations[:12])
		now := time.Now().UTC()
		inTx(t, old, func(ctx context.Context, tx *Tx) error {
			require.NoError(t, tx.CreateUser(ctx, User{ID: "u_1", Email: "a@example.com", PasswordHash: "x", CreatedAt: now}))
			require.NoError(t, tx.CreateProject(ctx, Project{ID: "p_1", Name: "one", OwnerID: "u_1", SigningSecret: "s", CreatedAt: now, UpdatedAt: now}))
			_, err := tx.exec(ctx, `INSERT INTO api_keys (id, project_id, name, prefix, hash, scope, source_id, created_at) VALUES ('k_old', 'p_1', 'old', 'osk_', 'h-old', 'project', '', 1)`)
			require.NoError(t, err)
			_, err = tx.exec(ctx, `INSERT INTO access_tokens (id, user_id, name, prefix, hash, created_at, expires_at) VALUES ('pat_old', 'u_1', 'old', 'osp_', 'h-pat', 1, ?)`, now.Add(time.Hour).UnixMilli())
			return err
		})
		old.Close()

		s := open(migrations)
		inTx(t, s, func(ctx context.Context, tx *Tx) error {
			ks, err := tx.Keys(ctx, "p_1")
			require.NoError(t, err)
			require.Len(t, ks, 1)
			assert.Nil(t, ks[0].Scopes, "a key from before scopes lists none: it may do everything")
			pat, err := tx.AccessTokenByHash(ctx, "h-pat")
			require.NoError(t, err)
			assert.Nil(t, pat.ProjectIDs)
			assert.False(t, pat.ReadOnly)
			gen, err := tx.LoginGeneration(ctx, "u_1")
			require.NoError(t, err)
			assert.Zero(t, gen)

			require.NoError(t, tx.CreateKey(ctx, Key{ID: "k_new", ProjectID: "p_1", Name: "new", Prefix: "osk_", Hash: "h-new", Scope: "project",
				Scopes: []string{"ingest", "results"}, CreatedAt: now}))
			k, err := tx.SetKeyScopes(ctx, "p_1", "k_old", []string{"ingest"})
			require.NoError(t, err)
			assert.Equal(t, []string{"ingest"}, k.Scopes, "narrowed")
			_, err = tx.SetKeyScopes(ctx, "p_2", "k_old", []string{"ingest"})
			assert.ErrorIs(t, err, ErrNotFound, "another project's key")
			ks, err = tx.Keys(ctx, "p_1")
			require.NoError(t, err)
			assert.Equal(t, []string{"ingest", "results"}, ks[1].Scopes)

			require.NoError(t, tx.CreateAccessToken(ctx, AccessToken{ID: "pat_new", UserID: "u_1", Name: "ro", Prefix: "osp_", Hash: "h-new-pat",
				CreatedAt: now, ExpiresAt: now.Add(time.Hour), ProjectIDs: []string{"p_1"}, ReadOnly: true}))
			pat, err = tx.AccessTokenByHash(ctx, "h-new-pat")
			require.NoError(t, err)
			assert.Equal(t, []string{"p_1"}, pat.ProjectIDs)
			assert.True(t, pat.ReadOnly)

			// Logging out everywhere: every session and token goes, the generation rises.
			require.NoError(t, tx.CreateSession(ctx, Session{ID: "ses_1", UserID: "u_1", Hash: "h-ses", CreatedAt: now, ExpiresAt: now.Add(time.Hour)}))
			ended, err := tx.NextLoginGeneration(ctx, "u_1")
			require.NoError(t, err)
			assert.Zero(t, ended)
			gen, err = tx.LoginGeneration(ctx, "u_1")
			require.NoError(t, err)
			assert.Equal(t, int64(1), gen)
			ids, err := tx.DeleteSessions(ctx, "u_1")
			require.NoError(t, err)
			assert.Equal(t, []string{"ses_1"}, ids)
			ids, err = tx.DeleteAccessTokens(ctx, "u_1")
			require.NoError(t, err)
			assert.ElementsMatch(t, []string{"pat_old", "pat_new"}, ids)
			left, err := tx.AccessTokens(ctx, "u_1")
			require.NoError(t, err)
			assert.Empty(t, left)
			_, err = tx.LoginGeneration(ctx, "u_nobody")
			assert.ErrorIs(t, err, ErrNotFound)
			return nil
		})
	})
}
