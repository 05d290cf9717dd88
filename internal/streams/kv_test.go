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
	const writers, each = 8, 25
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
				if _, err := UpdateKV(ctx, kvs[w%2], "n", incr); err != nil {
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
