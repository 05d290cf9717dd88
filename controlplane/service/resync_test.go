package service

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/controlplane/store"
	"github.com/otelcol-svc/otelcol-svc/internal/apikey"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// A key revoked and a source deleted while a re-publish of the mirror runs stay gone: the
// re-publish had read them from the database just before, and wrote them back (the key
// worked again until the next full re-publish, hours later).
func TestRevokedDuringAResyncStaysRevoked(t *testing.T) {
	for name, url := range map[string]func() string{
		"sqlite":   func() string { return "" },
		"postgres": func() string { return testenv.PostgresURL(t) },
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			db, err := store.Open(ctx, t.TempDir(), url())
			require.NoError(t, err)
			t.Cleanup(func() { db.Close() })
			n := testenv.StartNATS(t)
			_, js := testenv.Connect(t, n.URL())
			ms, err := mirror.Open(ctx, js, 1)
			require.NoError(t, err)
			s := &Service{Store: db, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
				Mirror: func(context.Context) (*mirror.Store, jetstream.JetStream, error) { return ms, js, nil }}

			userID := NewID("u_")
			require.NoError(t, db.InTx(ctx, func(tx *store.Tx) error {
				return tx.CreateUser(ctx, store.User{ID: userID, Email: "owner@example.com", CreatedAt: time.Now()})
			}))
			name := "racing"
			p, err := s.CreateProject(ctx, userID, &name)
			require.NoError(t, err)
			key, secret, err := s.CreateKey(ctx, userID, p.ID, "revoked mid-publish")
			require.NoError(t, err)
			kept, keptSecret, err := s.CreateKey(ctx, userID, p.ID, "kept")
			require.NoError(t, err)
			src, err := s.CreateSource(ctx, userID, p.ID, mirror.Source{Name: "github", Connector: "webhook", EventType: "push"})
			require.NoError(t, err)

			s.afterSnapshot = func() {
				require.NoError(t, s.DeleteKey(ctx, userID, p.ID, key.ID))
				require.NoError(t, s.DeleteSource(ctx, userID, p.ID, src.ID))
			}
			require.NoError(t, s.Resync(ctx))

			keys, err := ms.List(ctx, mirror.BucketKeys)
			require.NoError(t, err)
			assert.NotContains(t, keys, apikey.Hash(secret), "the revoked key is back in the mirror")
			assert.Contains(t, keys, apikey.Hash(keptSecret), "a key nobody touched was published (%s)", kept.ID)
			sources, err := ms.List(ctx, mirror.BucketSources)
			require.NoError(t, err)
			assert.NotContains(t, sources, src.IngestKey, "the deleted source is back in the mirror")
			projects, err := ms.List(ctx, mirror.BucketProjects)
			require.NoError(t, err)
			assert.Contains(t, projects, p.ID)
		})
	}
}
