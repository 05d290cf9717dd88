package store

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The hourly sweep removes what has expired and what is left without use, and keeps
// everything still live.
func TestSweepOAuth(t *testing.T) {
	eachDatabase(t, func(t *testing.T, open func([]string) *Store) {
		s := open(migrations)
		now := time.Now().UTC()
		past, future := now.Add(-time.Minute), now.Add(time.Hour)
		inTx(t, s, func(ctx context.Context, tx *Tx) error {
			require.NoError(t, tx.CreateUser(ctx, User{ID: "u_1", Email: "a@example.com", PasswordHash: "x", CreatedAt: now}))
			for _, c := range []OAuthClient{
				{ID: "ocl_live", Name: "live", RedirectURIs: []string{"https://a.example.com/cb"}, CreatedAt: now},
				{ID: "ocl_idle", Name: "idle", RedirectURIs: []string{"https://b.example.com/cb"}, CreatedAt: now.Add(-60 * 24 * time.Hour)},
			} {
				require.NoError(t, tx.CreateOAuthClient(ctx, c))
			}
			require.NoError(t, tx.CreateOAuthRequest(ctx, OAuthRequest{ID: "oar_old", ClientID: "ocl_live", CreatedAt: past, ExpiresAt: past}))
			require.NoError(t, tx.CreateOAuthRequest(ctx, OAuthRequest{ID: "oar_new", ClientID: "ocl_live", CreatedAt: now, ExpiresAt: future}))
			require.NoError(t, tx.CreateOAuthCode(ctx, OAuthCode{Hash: "code-old", UserID: "u_1", ClientID: "ocl_live", CreatedAt: past, ExpiresAt: past}))
			for _, g := range []string{"ogr_live", "ogr_spent"} {
				require.NoError(t, tx.CreateOAuthGrant(ctx, OAuthGrant{ID: g, UserID: "u_1", ClientID: "ocl_live", CreatedAt: now}))
			}
			require.NoError(t, tx.CreateOAuthToken(ctx, OAuthToken{Hash: "tok-live", Kind: OAuthAccess, GrantID: "ogr_live", CreatedAt: now, ExpiresAt: future}))
			require.NoError(t, tx.CreateOAuthToken(ctx, OAuthToken{Hash: "tok-spent", Kind: OAuthRefresh, GrantID: "ogr_spent", CreatedAt: past, ExpiresAt: past}))
			return nil
		})
		inTx(t, s, func(ctx context.Context, tx *Tx) error {
			n, err := tx.SweepOAuth(ctx, now, now.Add(-30*24*time.Hour))
			require.NoError(t, err)
			assert.EqualValues(t, 5, n, "old request, old code, spent token, its grant, idle client")
			_, err = tx.OAuthRequestByID(ctx, "oar_old")
			assert.ErrorIs(t, err, ErrNotFound)
			_, err = tx.OAuthRequestByID(ctx, "oar_new")
			assert.NoError(t, err)
			_, err = tx.OAuthCodeByHash(ctx, "code-old")
			assert.ErrorIs(t, err, ErrNotFound)
			_, err = tx.OAuthGrantByID(ctx, "ogr_spent")
			assert.ErrorIs(t, err, ErrNotFound)
			_, err = tx.OAuthTokenByHash(ctx, "tok-live")
			assert.NoError(t, err)
			_, err = tx.OAuthClientByID(ctx, "ocl_idle")
			assert.ErrorIs(t, err, ErrNotFound)
			c, err := tx.OAuthClientByID(ctx, "ocl_live")
			require.NoError(t, err)
			assert.Equal(t, []string{"https://a.example.com/cb"}, c.RedirectURIs)
			// A user's grant goes with its tokens; another user's id finds nothing.
			assert.ErrorIs(t, tx.DeleteOAuthGrant(ctx, "u_other", "ogr_live"), ErrNotFound)
			require.NoError(t, tx.DeleteOAuthGrant(ctx, "u_1", "ogr_live"))
			_, err = tx.OAuthTokenByHash(ctx, "tok-live")
			assert.ErrorIs(t, err, ErrNotFound)
			return nil
		})
	})
}
