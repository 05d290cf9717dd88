package service

import (
	"context"
	"database/sql"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/controlplane/auth"
	"github.com/otelcol-svc/otelcol-svc/controlplane/store"
	"github.com/otelcol-svc/otelcol-svc/internal/apikey"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// logoutDB is a service on a fresh database of each kind, with a user holding a
// dashboard session, and a second connection to the same database for what the store
// offers no call for (a trigger standing in for a failure).
type logoutDB struct {
	svc      *Service
	raw      *sql.DB
	postgres bool
	userID   string
	session  string
}

func logoutDatabases(t *testing.T, fn func(t *testing.T, d logoutDB)) {
	for name, url := range map[string]func() string{
		"sqlite":   func() string { return "" },
		"postgres": func() string { return testenv.PostgresURL(t) },
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			dir, dbURL := t.TempDir(), url()
			db, err := store.Open(ctx, dir, dbURL)
			require.NoError(t, err)
			t.Cleanup(func() { db.Close() })
			raw, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "controlplane.db")+"?_pragma=busy_timeout(5000)")
			if dbURL != "" {
				raw, err = sql.Open("pgx", dbURL)
			}
			require.NoError(t, err)
			t.Cleanup(func() { raw.Close() })
			hash, err := auth.HashPassword("the old password")
			require.NoError(t, err)
			d := logoutDB{svc: &Service{Store: db, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))},
				raw: raw, postgres: dbURL != "", userID: NewID("u_"), session: NewID("ses_")}
			now := time.Now()
			require.NoError(t, db.InTx(ctx, func(tx *store.Tx) error {
				if err := tx.CreateUser(ctx, store.User{ID: d.userID, Email: "ana@example.com", PasswordHash: hash, CreatedAt: now}); err != nil {
					return err
				}
				return tx.CreateSession(ctx, store.Session{ID: d.session, UserID: d.userID, Hash: apikey.Hash(d.session), CreatedAt: now, ExpiresAt: now.Add(time.Hour)})
			}))
			fn(t, d)
		})
	}
}

func (d logoutDB) sessionHeld(t *testing.T) bool {
	t.Helper()
	var n int
	q := `SELECT count(*) FROM sessions WHERE id = ?`
	if d.postgres {
		q = `SELECT count(*) FROM sessions WHERE id = $1`
	}
	require.NoError(t, d.raw.QueryRow(q, d.session).Scan(&n))
	return n == 1
}

// A password reset whose ending of the old credentials fails changes nothing: the password
// stays, the link still works, and used again once the failure is gone, ends them. (Ended
// in a second transaction, the password was set and the link used up while every old
// session, token and grant kept working, and the link could not be retried.)
func TestPasswordResetEndsEverythingOrNothing(t *testing.T) {
	logoutDatabases(t, func(t *testing.T, d logoutDB) {
		ctx := context.Background()
		secret := apikey.Generate(apikey.KindAccess)
		now := time.Now()
		require.NoError(t, d.svc.Store.InTx(ctx, func(tx *store.Tx) error {
			return tx.CreateEmailToken(ctx, store.EmailToken{Hash: apikey.Hash(secret), Kind: store.EmailPasswordReset,
				UserID: d.userID, Email: "ana@example.com", CreatedAt: now, ExpiresAt: now.Add(ResetTTL)})
		}))
		refuse := []string{`CREATE TRIGGER refuse_logout BEFORE DELETE ON sessions BEGIN SELECT RAISE(ABORT, 'sessions cannot be deleted now'); END`}
		if d.postgres {
			refuse = []string{`CREATE FUNCTION refuse_logout() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'sessions cannot be deleted now'; END $$`,
				`CREATE TRIGGER refuse_logout BEFORE DELETE ON sessions FOR EACH ROW EXECUTE FUNCTION refuse_logout()`}
		}
		for _, q := range refuse {
			_, err := d.raw.Exec(q)
			require.NoError(t, err)
		}
		e := &Email{Svc: d.svc}
		_, err := e.ConfirmPasswordReset(ctx, secret, "the new password")
		require.Error(t, err, "the sessions could not be ended")
		var u store.User
		require.NoError(t, d.svc.Store.InTx(ctx, func(tx *store.Tx) (err error) { u, err = tx.UserByID(ctx, d.userID); return err }))
		assert.NoError(t, auth.CheckPassword("the old password", u.PasswordHash), "the password changed though the sessions did not end")
		assert.True(t, d.sessionHeld(t))

		_, err = d.raw.Exec(`DROP TRIGGER refuse_logout` + map[bool]string{true: " ON sessions"}[d.postgres])
		require.NoError(t, err)
		_, err = e.ConfirmPasswordReset(ctx, secret, "the new password")
		require.NoError(t, err, "the link works again")
		require.NoError(t, d.svc.Store.InTx(ctx, func(tx *store.Tx) (err error) { u, err = tx.UserByID(ctx, d.userID); return err }))
		assert.NoError(t, auth.CheckPassword("the new password", u.PasswordHash))
		assert.False(t, d.sessionHeld(t), "the session ended with the reset")
	})
}

// A request checked before its user logged out everywhere and storing something after
// (a personal access token here) is refused: what it made would otherwise outlive the
// log-out. Its credential is re-checked in the transaction that stores it.
func TestCredentialEndedWhileTheRequestRan(t *testing.T) {
	logoutDatabases(t, func(t *testing.T, d logoutDB) {
		ctx := context.Background()
		gen, err := d.svc.LoginGeneration(ctx, d.userID)
		require.NoError(t, err)
		bySession := WithCredential(ctx, Credential{ID: d.session})
		byLogin := WithCredential(ctx, Credential{ID: LoginCredentialID(d.userID, gen)})
		_, _, err = d.svc.CreateAccessToken(bySession, d.userID, "before", 1)
		require.NoError(t, err, "a held session makes a token")
		_, _, err = d.svc.CreateAccessToken(byLogin, d.userID, "before", 1)
		require.NoError(t, err, "a login token of the current generation makes a token")

		require.NoError(t, d.svc.RevokeAllForUser(ctx, d.userID))
		for what, ctx := range map[string]context.Context{"session": bySession, "login token": byLogin} {
			_, _, err = d.svc.CreateAccessToken(ctx, d.userID, "after", 1)
			assert.ErrorIs(t, err, CredentialEnded, "a token made by the ended %s", what)
		}
		toks, err := d.svc.AccessTokens(ctx, d.userID)
		require.NoError(t, err)
		assert.Empty(t, toks, "nothing outlives logging out everywhere")

		gen, err = d.svc.LoginGeneration(ctx, d.userID)
		require.NoError(t, err)
		_, _, err = d.svc.CreateAccessToken(WithCredential(ctx, Credential{ID: LoginCredentialID(d.userID, gen)}), d.userID, "again", 1)
		assert.NoError(t, err, "logged in again")
	})
}
