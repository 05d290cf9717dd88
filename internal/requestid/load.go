package requestid

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

const (
	// Bucket is the JetStream KV bucket of the deployment's request-id key. Its own: the
	// configuration mirror's buckets (svc-keys holds API key hashes) are the control
	// plane's to write, and it prunes what it did not write there.
	Bucket = "svc-request-id"
	// KeyName is the key of the request-id key in Bucket.
	KeyName = "request-id"
)

// ErrBadKey means the stored key is not KeyBytes long: someone wrote the bucket by hand.
// Load does not replace it (another process may be issuing with it); an operator deletes
// the key and the next Load creates a new one (ids issued before then read as unmatched).
var ErrBadKey = errors.New("requestid: the stored key has the wrong length")

func errBadKey(n int) error {
	return fmt.Errorf("%w: %d bytes, want %d", ErrBadKey, n, KeyBytes)
}

// Load returns the Issuer of the deployment's key, creating the key when there is none.
// Processes racing to create it all end with the one that was stored first (kv.Create
// stores only when the key is absent). Every error but ErrBadKey is NATS being away or
// slow: Load is safe to call again until it succeeds.
//
// The bucket has one replica, like other buckets a data-plane process creates; losing
// it costs only that ids issued before read as unmatched.
func Load(ctx context.Context, js jetstream.JetStream) (*Issuer, error) {
	kv, err := openBucket(ctx, js)
	if err != nil {
		return nil, err
	}
	key := make([]byte, KeyBytes)
	_, _ = rand.Read(key)
	if _, err := kv.Create(ctx, KeyName, key); err == nil {
		return NewIssuer(key)
	} else if !errors.Is(err, jetstream.ErrKeyExists) {
		return nil, fmt.Errorf("requestid: store the key in %s: %w", Bucket, err)
	}
	e, err := kv.Get(ctx, KeyName)
	if err != nil {
		// ErrKeyNotFound here is a delete between our Create and Get: also worth a retry.
		return nil, fmt.Errorf("requestid: read the key from %s: %w", Bucket, err)
	}
	return NewIssuer(e.Value())
}

func openBucket(ctx context.Context, js jetstream.JetStream) (jetstream.KeyValue, error) {
	kv, err := js.KeyValue(ctx, Bucket)
	if err == nil {
		return kv, nil
	}
	if !errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, fmt.Errorf("requestid: open bucket %s: %w", Bucket, err)
	}
	kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: Bucket, Description: "otelcol-svc request-id key (never logged, never sent to clients)",
		History: 1, Storage: jetstream.FileStorage,
	})
	if errors.Is(err, jetstream.ErrBucketExists) {
		// Another process created it between our two calls.
		return js.KeyValue(ctx, Bucket)
	}
	if err != nil {
		return nil, fmt.Errorf("requestid: create bucket %s: %w", Bucket, err)
	}
	return kv, nil
}
