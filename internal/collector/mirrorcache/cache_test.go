package mirrorcache

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

func startCache(t *testing.T) (*mirror.Store, jetstream.JetStream, *Cache) {
	t.Helper()
	n := testenv.StartNATS(t)
	_, js := testenv.Connect(t, n.URL())
	ctx, cancel := context.WithCancel(context.Background())
	store, err := mirror.Open(ctx, js, 1)
	require.NoError(t, err)
	c := NewCache(zap.NewNop())
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx, js) }()
	t.Cleanup(func() { cancel(); <-done })
	require.Eventually(t, c.Ready, 10*time.Second, 10*time.Millisecond)
	return store, js, c
}

func newPub(t *testing.T) ed25519.PublicKey {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	return pub
}

func TestConsoleKeys(t *testing.T) {
	store, _, c := startCache(t)
	ctx := context.Background()
	assert.Empty(t, c.ConsoleKeys())
	got, err := store.ConsoleKeys(ctx)
	require.NoError(t, err)
	assert.Empty(t, got.PublicKeys)

	oldKey, newKey := newPub(t), newPub(t)
	enc := base64.StdEncoding.EncodeToString
	require.NoError(t, store.PutConsoleKeys(ctx, mirror.ConsoleKeys{PublicKeys: []string{enc(newKey), "not base64!", enc([]byte("short")), enc(oldKey)}}))
	require.Eventually(t, func() bool { return len(c.ConsoleKeys()) == 2 }, 10*time.Second, 10*time.Millisecond)
	// Entries that are not Ed25519 public keys are skipped; the others keep their order.
	assert.Equal(t, []ed25519.PublicKey{newKey, oldKey}, c.ConsoleKeys())
	got, err = store.ConsoleKeys(ctx)
	require.NoError(t, err)
	assert.Len(t, got.PublicKeys, 4)

	// Rotation done: the old key is withdrawn.
	require.NoError(t, store.PutConsoleKeys(ctx, mirror.ConsoleKeys{PublicKeys: []string{enc(newKey)}}))
	require.Eventually(t, func() bool { return len(c.ConsoleKeys()) == 1 }, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, []ed25519.PublicKey{newKey}, c.ConsoleKeys())
}

func TestCacheLoadsExistingSettings(t *testing.T) {
	// Keys published before the data plane starts are there as soon as it is Ready.
	n := testenv.StartNATS(t)
	_, js := testenv.Connect(t, n.URL())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store, err := mirror.Open(ctx, js, 1)
	require.NoError(t, err)
	key := newPub(t)
	require.NoError(t, store.PutConsoleKeys(ctx, mirror.ConsoleKeys{PublicKeys: []string{base64.StdEncoding.EncodeToString(key)}}))
	require.NoError(t, store.PutSource(ctx, "ik", mirror.Source{ID: "s1", ProjectID: "p", Name: "gh"}))

	c := NewCache(zap.NewNop())
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx, js) }()
	defer func() { cancel(); <-done }()
	require.Eventually(t, c.Ready, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, []ed25519.PublicKey{key}, c.ConsoleKeys())
	src, ok := c.Source("ik")
	assert.True(t, ok)
	assert.Equal(t, "gh", src.Name)
}

// A destination's Since is the control plane's clock; streams are stamped by the NATS
// server's. The cache measures the writer's offset from each entry, so a control plane
// whose clock runs ten minutes ahead still starts new destinations at the right message.
func TestServerTimeCorrectsTheWritersClock(t *testing.T) {
	store, js, c := startCache(t)
	ctx := context.Background()

	require.NoError(t, store.PutProject(ctx, mirror.Project{ID: "same-clock", Version: 1}))
	require.Eventually(t, func() bool { _, ok := c.Project("same-clock"); return ok }, 10*time.Second, 10*time.Millisecond)
	p, _ := c.Project("same-clock")
	now := time.Now()
	got, known := p.ServerTime(now)
	assert.True(t, known)
	assert.WithinDuration(t, now, got, time.Second, "one machine, one clock")

	ahead := 10 * time.Minute
	enabled := time.Now().Add(ahead) // the writer's clock when it enabled a destination
	skewed := mirror.Project{ID: "ahead", Version: 1, Sinks: []mirror.Sink{{ID: "s", Enabled: true, Since: enabled}}, WrittenAt: time.Now().Add(ahead)}
	require.NoError(t, putRaw(t, js, skewed)) // as a writer with that clock would
	require.Eventually(t, func() bool { _, ok := c.Project("ahead"); return ok }, 10*time.Second, 10*time.Millisecond)
	p, _ = c.Project("ahead")
	got, known = p.ServerTime(p.Sinks[0].Since)
	assert.True(t, known)
	assert.WithinDuration(t, enabled.Add(-ahead), got, time.Second, "converted to the server's clock")

	old := mirror.Project{ID: "old-writer", Version: 1} // written without WrittenAt
	require.NoError(t, putRaw(t, js, old))
	require.Eventually(t, func() bool { _, ok := c.Project("old-writer"); return ok }, 10*time.Second, 10*time.Millisecond)
	p, _ = c.Project("old-writer")
	got, known = p.ServerTime(now)
	assert.False(t, known, "no WrittenAt: the offset is unknown")
	assert.Equal(t, now, got)
}

// putRaw stores a project entry as it is, WrittenAt included, as a writer with another
// clock (or an older writer, without WrittenAt) would.
func putRaw(t *testing.T, js jetstream.JetStream, p mirror.Project) error {
	t.Helper()
	kv, err := js.KeyValue(context.Background(), mirror.BucketProjects)
	require.NoError(t, err)
	b, err := json.Marshal(p)
	require.NoError(t, err)
	_, err = kv.Put(context.Background(), p.ID, b)
	return err
}

// TestCacheSeesChangesRightAfterNATSRestarts: a NATS server that restarts takes the
// cache's watches with it. A change written as soon as the server is back (the control
// plane's publish when NATS returns: a revoked credential, a deleted key) is in the cache
// well before the client would notice the watch went silent (its heartbeats are missed
// after 18 s), not only then.
func TestCacheSeesChangesRightAfterNATSRestarts(t *testing.T) {
	n := testenv.StartNATS(t)
	// Reconnecting as the data plane's connections do (internal/collector/natsclient).
	nc, err := nats.Connect(n.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	c := NewCache(zap.NewNop())
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx, js) }()
	t.Cleanup(func() { cancel(); <-done })
	require.Eventually(t, c.Ready, 10*time.Second, 10*time.Millisecond)

	n.Stop()
	require.Eventually(t, func() bool { return !nc.IsConnected() }, 10*time.Second, 5*time.Millisecond)
	n.Start(t)
	require.Eventually(t, nc.IsConnected, 10*time.Second, 5*time.Millisecond)
	_, wjs := testenv.Connect(t, n.URL())
	store, err := mirror.Open(context.Background(), wjs, 1)
	require.NoError(t, err)
	require.NoError(t, store.Revoke(context.Background(), "pat_after_restart", time.Now()))
	written := time.Now()
	// 5 s, not the contract's second: this is a unit test on a shared CI box; what it
	// tells apart is the re-watch on reconnect from the 18 s heartbeat.
	require.Eventually(t, func() bool { return c.Revoked("pat_after_restart") }, 5*time.Second, 5*time.Millisecond,
		"the revocation written after the restart is not in the cache")
	t.Logf("in the cache %s after the write", time.Since(written).Round(time.Millisecond))
}
