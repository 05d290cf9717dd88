package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// eachDatabase runs fn against a fresh SQLite file and a fresh PostgreSQL database; open
// (called again to reopen) migrates the same database up to the given migrations.
func eachDatabase(t *testing.T, fn func(t *testing.T, open func(upTo []string) *Store)) {
	for name, url := range map[string]func(t *testing.T) string{
		"sqlite":   func(*testing.T) string { return "" },
		"postgres": func(t *testing.T) string { return testenv.PostgresURL(t) },
	} {
		t.Run(name, func(t *testing.T) {
			dir, dbURL := t.TempDir(), url(t)
			fn(t, func(upTo []string) *Store {
				s, err := open(context.Background(), dir, dbURL, upTo)
				require.NoError(t, err)
				t.Cleanup(func() { s.Close() })
				return s
			})
		})
	}
}

func inTx(t *testing.T, s *Store, fn func(ctx context.Context, tx *Tx) error) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, s.InTx(ctx, func(tx *Tx) error { return fn(ctx, tx) }))
}

// Sessions that lived among the access tokens before their table existed are gone after
// the upgrade (their users log in again); the personal access tokens stay.
func TestSessionsMigrationDropsOldSessionRows(t *testing.T) {
	eachDatabase(t, func(t *testing.T, open func([]string) *Store) {
		old := open(migrations[:4])
		now := time.Now().UTC()
		inTx(t, old, func(ctx context.Context, tx *Tx) error {
			require.NoError(t, tx.CreateUser(ctx, User{ID: "u_1", Email: "a@example.com", PasswordHash: "x", CreatedAt: now}))
			for _, id := range []string{"ses_1", "pat_1", "sesX1"} {
				// The columns of that time: CreateAccessToken writes later ones too.
				_, err := tx.exec(ctx, `INSERT INTO access_tokens (id, user_id, name, prefix, hash, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
					id, "u_1", id, "p", "h-"+id, now.UnixMilli(), now.Add(time.Hour).UnixMilli())
				require.NoError(t, err)
			}
			return nil
		})
		require.NoError(t, old.Close())

		s := open(migrations)
		inTx(t, s, func(ctx context.Context, tx *Tx) error {
			as, err := tx.AccessTokens(ctx, "u_1")
			require.NoError(t, err)
			var ids []string
			for _, a := range as {
				ids = append(ids, a.ID)
			}
			assert.ElementsMatch(t, []string{"pat_1", "sesX1"}, ids, "only ses_ rows were sessions")
			return nil
		})
	})
}

// A session is found by its secret's hash until it is deleted; pruning keeps a user's
// newest sessions and drops expired ones, and never touches another user's.
func TestSessions(t *testing.T) {
	eachDatabase(t, func(t *testing.T, open func([]string) *Store) {
		s := open(migrations)
		now := time.Now().UTC().Truncate(time.Millisecond)
		inTx(t, s, func(ctx context.Context, tx *Tx) error {
			for _, u := range []string{"u_a", "u_b"} {
				require.NoError(t, tx.CreateUser(ctx, User{ID: u, Email: u + "@example.com", PasswordHash: "x", CreatedAt: now}))
			}
			return nil
		})

		one := Session{ID: "ses_one", UserID: "u_a", Hash: "hash-one", CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
		inTx(t, s, func(ctx context.Context, tx *Tx) error {
			require.NoError(t, tx.CreateSession(ctx, one))
			got, err := tx.SessionByHash(ctx, "hash-one")
			require.NoError(t, err)
			assert.Equal(t, one, got)
			seen := now.Add(time.Minute)
			require.NoError(t, tx.TouchSession(ctx, one.ID, seen))
			got, err = tx.SessionByHash(ctx, "hash-one")
			require.NoError(t, err)
			assert.Equal(t, seen, got.LastSeenAt)

			_, err = tx.SessionByHash(ctx, "no-such-hash")
			assert.ErrorIs(t, err, ErrNotFound)
			require.NoError(t, tx.DeleteSession(ctx, one.ID))
			_, err = tx.SessionByHash(ctx, "hash-one")
			assert.ErrorIs(t, err, ErrNotFound, "a deleted session is gone at once")
			assert.ErrorIs(t, tx.DeleteSession(ctx, one.ID), ErrNotFound)
			return nil
		})

		// u_a: one expired session and five live ones (created a second apart); u_b: one.
		inTx(t, s, func(ctx context.Context, tx *Tx) error {
			require.NoError(t, tx.CreateSession(ctx, Session{ID: "ses_expired", UserID: "u_a", Hash: "h-expired", CreatedAt: now.Add(-2 * time.Hour), ExpiresAt: now}))
			for i := 0; i < 5; i++ {
				require.NoError(t, tx.CreateSession(ctx, Session{ID: fmt.Sprintf("ses_a%d", i), UserID: "u_a", Hash: fmt.Sprintf("h-a%d", i),
					CreatedAt: now.Add(time.Duration(i) * time.Second), ExpiresAt: now.Add(time.Hour)}))
			}
			require.NoError(t, tx.CreateSession(ctx, Session{ID: "ses_b", UserID: "u_b", Hash: "h-b", CreatedAt: now.Add(-time.Hour), ExpiresAt: now.Add(time.Hour)}))
			ended, err := tx.PruneSessions(ctx, "u_a", now, 3)
			assert.ElementsMatch(t, []string{"ses_a0", "ses_a1"}, ended, "the live sessions ended, whose console tokens must end too")
			return err
		})
		inTx(t, s, func(ctx context.Context, tx *Tx) error {
			for hash, live := range map[string]bool{"h-expired": false, "h-a0": false, "h-a1": false, "h-a2": true, "h-a3": true, "h-a4": true, "h-b": true} {
				_, err := tx.SessionByHash(ctx, hash)
				if live {
					assert.NoError(t, err, hash)
				} else {
					assert.ErrorIs(t, err, ErrNotFound, hash)
				}
			}
			return nil
		})
	})
}
