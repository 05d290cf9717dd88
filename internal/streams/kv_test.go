package streams

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// Writers of one counter through UpdateKV, at once and over two connections as two
// processes would be, lose no increment: each write is a compare-and-set, and the losers
// of a round read again.
func TestUpdateKVLosesNoConcurrentIncrement(t *testing.T) {
	srv := testenv.StartNATS(t)
	ctx := context.Background()
	var kvs []jetstream.KeyValue
	for range 2 {
		_, js := testenv.Connect(t, srv.URL())
		kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "counters", History: 1})
		require.NoError(t, err)
		kvs = append(kvs, kv)
	}
	incrementConcurrently(t, ctx, kvs, 8, 25)
}

// incrementConcurrently has writers goroutines add one to key "n" each times through
// UpdateKV, taking turns over kvs (connections or nodes), and checks the sum.
func incrementConcurrently(t *testing.T, ctx context.Context, kvs []jetstream.KeyValue, writers, each int) {
	t.Helper()
	incr := func(old []byte, exists bool) ([]byte, error) {
		n := 0
		if exists {
			var err error
			if n, err = strconv.Atoi(string(old)); err != nil {
				return nil, err
			}
		}
		return []byte(strconv.Itoa(n + 1)), nil
	}
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				if _, err := UpdateKV(ctx, kvs[w%len(kvs)], "n", incr); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	e, err := kvs[0].Get(ctx, "n")
	require.NoError(t, err)
	assert.Equal(t, strconv.Itoa(writers*each), string(e.Value()))
}

// What the function decides is what happens: its error is returned with nothing written,
// ErrKVUnchanged writes nothing and is no error, and a deleted key is absent (created
// again).
func TestUpdateKVFunctionDecides(t *testing.T) {
	srv := testenv.StartNATS(t)
	ctx := context.Background()
	_, js := testenv.Connect(t, srv.URL())
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "b", History: 1})
	require.NoError(t, err)

	rev, err := UpdateKV(ctx, kv, "k", func(old []byte, exists bool) ([]byte, error) {
		assert.False(t, exists)
		return []byte("a"), nil
	})
	require.NoError(t, err)

	refused := errors.New("over the limit")
	_, err = UpdateKV(ctx, kv, "k", func([]byte, bool) ([]byte, error) { return nil, refused })
	require.ErrorIs(t, err, refused)
	got, err := UpdateKV(ctx, kv, "k", func(old []byte, exists bool) ([]byte, error) {
		assert.True(t, exists)
		assert.Equal(t, "a", string(old))
		return nil, ErrKVUnchanged
	})
	require.NoError(t, err)
	assert.Equal(t, rev, got, "nothing written: the revision read")
	e, err := kv.Get(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, "a", string(e.Value()))
	assert.Equal(t, rev, e.Revision())

	require.NoError(t, kv.Delete(ctx, "k"))
	_, err = UpdateKV(ctx, kv, "k", func(old []byte, exists bool) ([]byte, error) {
		assert.False(t, exists, "a deleted key is absent")
		return []byte("b"), nil
	})
	require.NoError(t, err)
	e, err = kv.Get(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, "b", string(e.Value()))
}

// countingKV counts the reads UpdateKV makes of a real bucket.
type countingKV struct {
	jetstream.KeyValue
	gets int
}

func (c *countingKV) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	c.gets++
	return c.KeyValue.Get(ctx, key)
}

// KVAttempts bounds the rounds, or (0) lifts the bound for counts that must not be dropped:
// a key another writer wins 70 times in a row, past the default bound, is still written.
func TestUpdateKVAttempts(t *testing.T) {
	srv := testenv.StartNATS(t)
	ctx := context.Background()
	_, js := testenv.Connect(t, srv.URL())
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "b", History: 1})
	require.NoError(t, err)
	_, err = kv.Put(ctx, "k", []byte("0"))
	require.NoError(t, err)

	// losing makes the next n writes of fn lose: another writer puts the key in between.
	losing := func(n int) (func([]byte, bool) ([]byte, error), *int) {
		calls := 0
		return func(old []byte, exists bool) ([]byte, error) {
			calls++
			if calls <= n {
				_, err := kv.Put(ctx, "k", []byte("other"))
				require.NoError(t, err)
			}
			return []byte("mine"), nil
		}, &calls
	}

	fn, calls := losing(2)
	_, err = UpdateKV(ctx, kv, "k", fn, KVAttempts(2))
	require.ErrorIs(t, err, ErrKVContended)
	assert.Equal(t, 2, *calls)

	fn, calls = losing(70)
	_, err = UpdateKV(ctx, kv, "k", fn)
	require.ErrorIs(t, err, ErrKVContended, "the default bound")
	assert.Equal(t, kvAttempts, *calls)

	fn, calls = losing(70)
	_, err = UpdateKV(ctx, kv, "k", fn, KVAttempts(0))
	require.NoError(t, err)
	assert.Equal(t, 71, *calls)
	e, err := kv.Get(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, "mine", string(e.Value()))

	// Unbounded still ends with the context.
	cctx, cancel := context.WithCancel(ctx)
	fn, _ = losing(1 << 30)
	_, err = UpdateKV(cctx, kv, "k", func(old []byte, exists bool) ([]byte, error) {
		cancel()
		return fn(old, exists)
	}, KVAttempts(0))
	require.ErrorIs(t, err, context.Canceled)
}

// KVAssume saves the read when the guess is right, and costs only a lost round when it is
// stale: the update then applies to what the key really holds.
func TestUpdateKVAssume(t *testing.T) {
	srv := testenv.StartNATS(t)
	ctx := context.Background()
	_, js := testenv.Connect(t, srv.URL())
	b, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "b", History: 1})
	require.NoError(t, err)
	kv := &countingKV{KeyValue: b}
	appendX := func(old []byte, exists bool) ([]byte, error) { return append(old, 'x'), nil }

	rev, err := UpdateKV(ctx, kv, "k", appendX, KVAssume(nil, 0))
	require.NoError(t, err)
	rev, err = UpdateKV(ctx, kv, "k", appendX, KVAssume([]byte("x"), rev))
	require.NoError(t, err)
	assert.Equal(t, 0, kv.gets, "right guesses: no read")

	_, err = b.Put(ctx, "k", []byte("other"))
	require.NoError(t, err)
	_, err = UpdateKV(ctx, kv, "k", appendX, KVAssume([]byte("xx"), rev))
	require.NoError(t, err)
	assert.Equal(t, 1, kv.gets)
	e, err := b.Get(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, "otherx", string(e.Value()), "applied to the value written meanwhile")
}
