package main

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/controlplane/service"
	"github.com/otelcol-svc/otelcol-svc/controlplane/store"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// TestARevocationItsControlPlaneDidNotPublishIsPublishedByAnother: a control plane
// revokes a personal access token and is killed after the commit, before it publishes
// the revocation (or it lost NATS while the others did not). Another control plane on
// the same database publishes it at its next mirror check, and the console token the
// credential minted stops working; before, only the recording process retried, and the
// token lived out its ten minutes.
func TestARevocationItsControlPlaneDidNotPublishIsPublishedByAnother(t *testing.T) {
	databases(t, func(t *testing.T, db map[string]string) {
		n := testenv.StartNATS(t)
		startValidator(t, n.URL())
		env := map[string]string{"NATS_URL": n.URL(), "SVC_JWT_SECRET": testJWTSecret, "SVC_MIRROR_CHECK_INTERVAL": "1s"}
		for k, v := range db {
			env[k] = v
		}
		s := &stack{nats: n, cp: testenv.StartControlPlane(t, env), db: db}
		col := s.receiver(t)
		cp := s.cp.URL
		login, userID := s.signup(t, "owner@example.com")
		pid := call(t, cp, "POST", "/api/v1/projects", login, map[string]string{"name": "died"}).str("id")
		r := call(t, cp, "POST", "/api/v1/tokens", login, map[string]any{"name": "revoked by a process that died"})
		require.Equal(t, http.StatusCreated, r.Status, "%s", r.Raw)
		patID := r.str("id")
		m := call(t, cp, "POST", "/api/v1/projects/"+pid+"/console-token", r.str("token"), nil)
		require.Equal(t, http.StatusOK, m.Status, "%s", m.Raw)
		tok := m.str("token")
		require.Eventually(t, func() bool { st, _ := consoleRead(t, col.HTTP, pid, tok); return st == http.StatusOK },
			10*time.Second, 20*time.Millisecond, "the console token reads the project")

		// What the dead process committed: the token deleted, its revocation recorded,
		// nothing published.
		ctx := context.Background()
		died, err := store.Open(ctx, db["SVC_DATA_DIR"], db["DATABASE_URL"])
		require.NoError(t, err)
		defer died.Close()
		require.NoError(t, died.InTx(ctx, func(tx *store.Tx) error {
			if err := tx.DeleteAccessToken(ctx, userID, patID); err != nil {
				return err
			}
			return service.RecordRevocations(ctx, tx, patID)
		}))

		require.Eventually(t, func() bool { st, _ := consoleRead(t, col.HTTP, pid, tok); return st == http.StatusUnauthorized },
			10*time.Second, 20*time.Millisecond, "the running control plane never published the revocation")
		_, code := consoleRead(t, col.HTTP, pid, tok)
		assert.Equal(t, "invalid_token", code)
	})
}
