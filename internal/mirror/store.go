package mirror

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/otelcol-svc/otelcol-svc/internal/streams"
)

// Store writes the mirror. Every write is a KV put acknowledged by JetStream, so when a
// call returns, every watching data-plane process sees the change within milliseconds.
type Store struct {
	keys, projects, sources, usage, settings, revocations jetstream.KeyValue
}

// Open binds to (creating when missing) the mirror's buckets.
func Open(ctx context.Context, js jetstream.JetStream, replicas int) (*Store, error) {
	var s Store
	var err error
	if s.keys, err = bucket(ctx, js, BucketKeys, replicas); err != nil {
		return nil, err
	}
	if s.projects, err = bucket(ctx, js, BucketProjects, replicas); err != nil {
		return nil, err
	}
	if s.sources, err = bucket(ctx, js, BucketSources, replicas); err != nil {
		return nil, err
	}
	if s.usage, err = bucket(ctx, js, BucketKeyUsage, replicas); err != nil {
		return nil, err
	}
	if s.settings, err = bucket(ctx, js, BucketSettings, replicas); err != nil {
		return nil, err
	}
	if s.revocations, err = bucketTTL(ctx, js, BucketRevocations, replicas, RevocationTTL); err != nil {
		return nil, err
	}
	return &s, nil
}

// Watched returns the buckets the data plane keeps in memory (keys, projects, sources,
// settings, revocations; not the usage it writes), in that order.
func (s *Store) Watched() []jetstream.KeyValue {
	return []jetstream.KeyValue{s.keys, s.projects, s.sources, s.settings, s.revocations}
}

func bucket(ctx context.Context, js jetstream.JetStream, name string, replicas int) (jetstream.KeyValue, error) {
	return bucketTTL(ctx, js, name, replicas, 0)
}

// bucketTTL is bucket whose entries expire after ttl (0: never).
func bucketTTL(ctx context.Context, js jetstream.JetStream, name string, replicas int, ttl time.Duration) (jetstream.KeyValue, error) {
	kv, err := js.KeyValue(ctx, name)
	if err == nil {
		return raise(ctx, js, kv, replicas)
	}
	if !errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, fmt.Errorf("open bucket %s: %w", name, err)
	}
	if replicas < 1 {
		replicas = 1
	}
	kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      name,
		Description: "otelcol-svc configuration mirror",
		History:     1,
		Storage:     jetstream.FileStorage,
		Replicas:    replicas,
		TTL:         ttl,
	})
	if errors.Is(err, jetstream.ErrBucketExists) {
		// Another process created it between our two calls.
		return js.KeyValue(ctx, name)
	}
	if err != nil {
		return nil, fmt.Errorf("create bucket %s: %w", name, err)
	}
	return kv, nil
}

// raise gives an existing bucket more replicas when more are asked for: a data-plane
// process that started before the control plane on a new cluster creates the buckets
// with one replica (it has no replica setting), and the control plane, which has
// (SVC_MIRROR_REPLICAS), must not then leave the configuration on a single node. Never
// lowers: a process asking for fewer is one that does not know.
func raise(ctx context.Context, js jetstream.JetStream, kv jetstream.KeyValue, replicas int) (jetstream.KeyValue, error) {
	if replicas <= 1 {
		return kv, nil
	}
	st, err := kv.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("open bucket %s: %w", kv.Bucket(), err)
	}
	bs, ok := st.(*jetstream.KeyValueBucketStatus)
	if !ok || bs.StreamInfo().Config.Replicas >= replicas {
		return kv, nil
	}
	cfg := bs.StreamInfo().Config
	kv, err = js.UpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: kv.Bucket(), Description: cfg.Description, History: 1, Storage: jetstream.FileStorage, Replicas: replicas,
		TTL: cfg.MaxAge,
	})
	if err != nil {
		return nil, fmt.Errorf("bucket %s has %d replica(s); raising it to %d failed: %w", bs.Bucket(), cfg.Replicas, replicas, err)
	}
	return kv, nil
}

func put(ctx context.Context, kv jetstream.KeyValue, key string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if _, err := kv.Put(ctx, key, b); err != nil {
		return fmt.Errorf("mirror put %s/%s: %w", kv.Bucket(), key, unreachable(err))
	}
	return nil
}

// ErrUnavailable marks a write that failed because NATS could not be reached (a
// disconnection, a reconnection whose buffer is full, a timeout): the change can succeed
// later, so callers answer "retry later" rather than an internal error.
var ErrUnavailable = errors.New("the configuration store (NATS) is unreachable")

func unreachable(err error) error {
	for _, e := range []error{nats.ErrReconnectBufExceeded, nats.ErrConnectionClosed, nats.ErrConnectionReconnecting,
		nats.ErrDisconnected, nats.ErrConnectionDraining, nats.ErrTimeout, nats.ErrNoResponders,
		jetstream.ErrNoStreamResponse, context.DeadlineExceeded} {
		if errors.Is(err, e) {
			return fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
	}
	return err
}

func del(ctx context.Context, kv jetstream.KeyValue, key string) error {
	err := kv.Delete(ctx, key)
	if err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("mirror delete %s/%s: %w", kv.Bucket(), key, unreachable(err))
	}
	return nil
}

// PutKey publishes an API key by its hash (apikey.Hash).
func (s *Store) PutKey(ctx context.Context, hash string, e KeyEntry) error {
	return put(ctx, s.keys, hash, e)
}

// DeleteKey revokes a key.
func (s *Store) DeleteKey(ctx context.Context, hash string) error { return del(ctx, s.keys, hash) }

// PutProject publishes a project's configuration, stamped with this process's clock.
func (s *Store) PutProject(ctx context.Context, p Project) error {
	p.WrittenAt = time.Now().UTC()
	return put(ctx, s.projects, p.ID, p)
}

// PutProjectIfNewer publishes p unless the mirror holds the same or a later version of
// the project. A publish of the whole configuration (the control plane's resync) reads the
// database before it writes: a change the API made in between is in the mirror at a
// later version, and the older snapshot must not overwrite it (a project whose pipeline
// was saved during the first publish lost its agent until the next change). Each write
// is a compare-and-set on the entry's revision, so a concurrent write is seen, not lost.
func (s *Store) PutProjectIfNewer(ctx context.Context, p Project) error {
	p.WrittenAt = time.Now().UTC()
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	_, err = streams.UpdateKV(ctx, s.projects, p.ID, func(old []byte, exists bool) ([]byte, error) {
		var cur Project
		if exists && json.Unmarshal(old, &cur) == nil && cur.Version >= p.Version {
			return nil, streams.ErrKVUnchanged
		}
		return b, nil
	}, streams.KVAttempts(16))
	return wrapPut(s.projects, p.ID, err)
}

func wrapPut(kv jetstream.KeyValue, key string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("mirror put %s/%s: %w", kv.Bucket(), key, unreachable(err))
}

// DeleteProject removes a project's configuration.
func (s *Store) DeleteProject(ctx context.Context, id string) error { return del(ctx, s.projects, id) }

// PutSource publishes a push source under its ingest key.
func (s *Store) PutSource(ctx context.Context, ingestKey string, src Source) error {
	return put(ctx, s.sources, ingestKey, src)
}

// DeleteSource removes a push source.
func (s *Store) DeleteSource(ctx context.Context, ingestKey string) error {
	return del(ctx, s.sources, ingestKey)
}

// Written returns when an entry's current value was stored (by the NATS server's clock),
// and false when it is gone.
func (s *Store) Written(ctx context.Context, bucket, key string) (time.Time, bool, error) {
	kv, err := s.bucketKV(bucket)
	if err != nil {
		return time.Time{}, false, err
	}
	e, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, err
	}
	return e.Created(), true, nil
}

func (s *Store) bucketKV(bucket string) (jetstream.KeyValue, error) {
	switch bucket {
	case BucketKeys:
		return s.keys, nil
	case BucketProjects:
		return s.projects, nil
	case BucketSources:
		return s.sources, nil
	}
	return nil, fmt.Errorf("unknown bucket %q", bucket)
}

// List returns the entry names of a bucket (BucketKeys, BucketProjects, BucketSources), so
// a full re-publish can delete what no longer exists.
func (s *Store) List(ctx context.Context, bucket string) ([]string, error) {
	var kv jetstream.KeyValue
	switch bucket {
	case BucketKeys:
		kv = s.keys
	case BucketProjects:
		kv = s.projects
	case BucketSources:
		kv = s.sources
	default:
		return nil, fmt.Errorf("unknown bucket %q", bucket)
	}
	lister, err := kv.ListKeys(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = lister.Stop() }()
	var out []string
	for k := range lister.Keys() {
		out = append(out, k)
	}
	return out, nil
}

// KeyUsed records that a key was used at t.
func (s *Store) KeyUsed(ctx context.Context, keyID string, t time.Time) error {
	_, err := s.usage.Put(ctx, keyID, []byte(strconv.FormatInt(t.UnixMilli(), 10)))
	return err
}

// KeyLastUsed returns when a key was last used (zero when never or unknown).
func (s *Store) KeyLastUsed(ctx context.Context, keyID string) time.Time {
	e, err := s.usage.Get(ctx, keyID)
	if err != nil {
		return time.Time{}
	}
	ms, err := strconv.ParseInt(string(e.Value()), 10, 64)
	if err != nil {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// ForgetKeyUsage removes a deleted key's usage record.
func (s *Store) ForgetKeyUsage(ctx context.Context, keyID string) error {
	return del(ctx, s.usage, keyID)
}

// PutConsoleKeys publishes the public keys that verify console tokens, replacing the list.
func (s *Store) PutConsoleKeys(ctx context.Context, k ConsoleKeys) error {
	return put(ctx, s.settings, KeyConsoleTokenKeys, k)
}

// ConsoleKeys returns the published console token keys (none when never published), so a
// rotation can keep the current key beside the new one.
func (s *Store) ConsoleKeys(ctx context.Context) (ConsoleKeys, error) {
	var k ConsoleKeys
	e, err := s.settings.Get(ctx, KeyConsoleTokenKeys)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return k, nil
	}
	if err != nil {
		return k, fmt.Errorf("mirror get %s/%s: %w", BucketSettings, KeyConsoleTokenKeys, err)
	}
	if err := json.Unmarshal(e.Value(), &k); err != nil {
		return k, fmt.Errorf("mirror %s/%s: %w", BucketSettings, KeyConsoleTokenKeys, err)
	}
	return k, nil
}

// Revoke lists a credential (a personal access token's, a session's or an OAuth grant's
// id) as revoked: receivers refuse the console tokens minted with it from now on.
func (s *Store) Revoke(ctx context.Context, credentialID string, at time.Time) error {
	return put(ctx, s.revocations, credentialID, Revocation{RevokedAt: at.UTC()})
}
