//go:build cluster

package streams

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
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
	incrementConcurrently(t, ctx, kvs, 6, 20)
}
