package store

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Migration 11: a project saved before agent_since_seq existed reads 0 (not recorded:
// the pipeline falls back to agent_since's time), and the sequence a save records is
// read back as it was written, beyond 32 bits.
func TestAgentSinceSeqMigrationAndRoundTrip(t *testing.T) {
	eachDatabase(t, func(t *testing.T, open func([]string) *Store) {
		old := open(migrations[:10])
		now := time.Now().Truncate(time.Millisecond).UTC()
		inTx(t, old, func(ctx context.Context, tx *Tx) error {
			require.NoError(t, tx.CreateUser(ctx, User{ID: "u_1", Email: "a@example.com", PasswordHash: "x", CreatedAt: now}))
			_, err := tx.exec(ctx, `INSERT INTO projects (id, name, owner_id, pipeline, signing_secret, version, agent_since, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
				"p_1", "one", "u_1", `{"agent_endpoint_url":"https://agent.example.com/"}`, "whsec_x", 3, now.UnixMilli(), now.UnixMilli(), now.UnixMilli())
			require.NoError(t, err)
			_, err = tx.exec(ctx, `INSERT INTO members (project_id, user_id, role, created_at) VALUES (?, ?, ?, ?)`, "p_1", "u_1", RoleOwner, now.UnixMilli())
			return err
		})
		old.Close()

		s := open(migrations)
		inTx(t, s, func(ctx context.Context, tx *Tx) error {
			p, _, err := tx.ProjectForUser(ctx, "p_1", "u_1")
			require.NoError(t, err)
			assert.True(t, now.Equal(p.AgentSince))
			assert.Zero(t, p.AgentSinceSeq)

			p.AgentSinceSeq = 1<<40 + 7
			p.Version++
			require.NoError(t, tx.UpdateProject(ctx, p))
			p, _, err = tx.ProjectForUser(ctx, "p_1", "u_1")
			require.NoError(t, err)
			assert.Equal(t, uint64(1<<40+7), p.AgentSinceSeq)
			return nil
		})
	})
}
