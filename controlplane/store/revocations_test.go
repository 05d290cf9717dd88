package store

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A revocation is pending until published, listed while in force, pending again when
// the credential is revoked again (with the later expiry), and swept once expired, which
// says how many expired without ever being published.
func TestRevocationsPendingPublishedAndSwept(t *testing.T) {
	eachDatabase(t, func(t *testing.T, open func([]string) *Store) {
		s := open(migrations)
		now := time.Now().Truncate(time.Millisecond)
		ids := func(rs []Revocation) []string {
			var out []string
			for _, r := range rs {
				out = append(out, r.CredentialID)
			}
			return out
		}
		inTx(t, s, func(ctx context.Context, tx *Tx) error {
			require.NoError(t, tx.AddRevocations(ctx, now, now.Add(time.Minute), "pat_a", "ses_b"))
			require.NoError(t, tx.AddRevocations(ctx, now.Add(-time.Hour), now.Add(-time.Second), "ogr_old"))
			require.NoError(t, tx.RevocationsPublished(ctx, now, "pat_a"))
			pending, err := tx.Revocations(ctx, now, true)
			require.NoError(t, err)
			assert.Equal(t, []string{"ses_b"}, ids(pending))
			all, err := tx.Revocations(ctx, now, false)
			require.NoError(t, err)
			assert.Equal(t, []string{"pat_a", "ses_b"}, ids(all), "the expired one is not in force")

			require.NoError(t, tx.AddRevocations(ctx, now.Add(time.Second), now.Add(2*time.Minute), "pat_a"))
			pending, err = tx.Revocations(ctx, now, true)
			require.NoError(t, err)
			require.Equal(t, []string{"pat_a", "ses_b"}, ids(pending), "revoked again: published again")
			assert.True(t, now.Equal(pending[0].RevokedAt), "the first revocation's time stays: %s", pending[0].RevokedAt)
			assert.True(t, now.Add(2*time.Minute).Equal(pending[0].ExpiresAt), "the later expiry wins: %s", pending[0].ExpiresAt)

			deleted, unpublished, err := tx.SweepRevocations(ctx, now.Add(90*time.Second))
			require.NoError(t, err)
			assert.Equal(t, int64(2), deleted, "ogr_old and ses_b")
			assert.Equal(t, int64(2), unpublished)
			all, err = tx.Revocations(ctx, now, false)
			require.NoError(t, err)
			assert.Equal(t, []string{"pat_a"}, ids(all))
			return nil
		})
	})
}
