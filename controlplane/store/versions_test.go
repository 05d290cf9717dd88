package store

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
)

// Migration 9: a project saved before pipeline versions existed has its pipeline as
// version 1 (saved by no one known), and further versions are kept, newest
// MaxPipelineVersions of them.
func TestPipelineVersionsMigrationAndBound(t *testing.T) {
	eachDatabase(t, func(t *testing.T, open func([]string) *Store) {
		old := open(migrations[:8])
		now := time.Now().Truncate(time.Millisecond).UTC()
		inTx(t, old, func(ctx context.Context, tx *Tx) error {
			require.NoError(t, tx.CreateUser(ctx, User{ID: "u_1", Email: "a@example.com", PasswordHash: "x", CreatedAt: now}))
			_, err := tx.exec(ctx, `INSERT INTO projects (id, name, owner_id, pipeline, signing_secret, version, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
				"p_1", "one", "u_1", `{"trigger":"body == \"x\"","transforms":[]}`, "whsec_x", 7, now.UnixMilli(), now.UnixMilli())
			require.NoError(t, err)
			_, err = tx.exec(ctx, `INSERT INTO members (project_id, user_id, role, created_at) VALUES (?, ?, ?, ?)`, "p_1", "u_1", RoleOwner, now.UnixMilli())
			return err
		})
		old.Close()

		s := open(migrations)
		inTx(t, s, func(ctx context.Context, tx *Tx) error {
			p, _, err := tx.ProjectForUser(ctx, "p_1", "u_1")
			require.NoError(t, err)
			assert.Equal(t, int64(7), p.Version)
			assert.Equal(t, int64(1), p.PipelineVersion)
			assert.True(t, p.AgentSince.IsZero())
			v, err := tx.PipelineVersionOf(ctx, "p_1", 1)
			require.NoError(t, err)
			assert.Equal(t, `body == "x"`, v.Pipeline.Trigger)
			assert.Equal(t, "", v.SavedBy)
			assert.True(t, now.Equal(v.SavedAt))

			for n := int64(2); n <= MaxPipelineVersions+30; n++ {
				require.NoError(t, tx.AddPipelineVersion(ctx, PipelineVersion{ProjectID: "p_1", Version: n, SavedBy: "u_1", SavedAt: now,
					Pipeline: mirror.Pipeline{Trigger: "body == \"x\"", BatchSize: int(n)}}))
			}
			all, err := tx.PipelineVersions(ctx, "p_1", 0, 1000)
			require.NoError(t, err)
			require.Len(t, all, MaxPipelineVersions)
			assert.Equal(t, int64(MaxPipelineVersions+30), all[0].Version)
			assert.Equal(t, int64(31), all[len(all)-1].Version)
			assert.Equal(t, "a@example.com", all[0].SavedByEmail)
			_, err = tx.PipelineVersionOf(ctx, "p_1", 30)
			assert.ErrorIs(t, err, ErrNotFound, "past the bound")
			page, err := tx.PipelineVersions(ctx, "p_1", 50, 5)
			require.NoError(t, err)
			assert.Equal(t, int64(49), page[0].Version)
			assert.Len(t, page, 5)
			return nil
		})
		// A version saved twice (two saves racing) is a conflict, which ends its transaction.
		err := s.InTx(context.Background(), func(tx *Tx) error {
			return tx.AddPipelineVersion(context.Background(), PipelineVersion{ProjectID: "p_1", Version: 40, SavedAt: now})
		})
		assert.ErrorIs(t, err, ErrConflict)
	})
}
