//go:build cluster

package streams

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// A replicated bucket reports a lost Update with another error code than a single-replica
// one: UpdateKV still sees it as a conflict and retries, so concurrent writers lose no
// increment on the buckets production runs with three replicas.
func TestClusterUpdateKVReplicatedBucket(t *testing.T) {
	cl := testenv.StartNATSCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var kvs []jetstream.KeyValue
	for _, n := range cl.Nodes {
		_, js := testenv.Connect(t, n.URL())
		kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "counters", History: 1, Replicas: 3})
		require.NoError(t, err)
		kvs = append(kvs, kv)
	}
	const writers, each = 6, 20
	incr := func(old []byte, exists bool) ([]byte, error) {
		n, _ := strconv.Atoi(string(old))
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
