//go:build cluster

package mirror

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// A collector that starts before the control plane on a new cluster creates the mirror's
// buckets with one replica; the control plane, asking for three, raises them, so the
// configuration does not live on a single node.
func TestClusterMirrorBucketsRaisedToReplicas(t *testing.T) {
	cl := testenv.StartNATSCluster(t, 3)
	_, js := testenv.Connect(t, cl.URL())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	_, err := Open(ctx, js, 1) // the data plane, first
	require.NoError(t, err)
	replicas := func(name string) int {
		kv, err := js.KeyValue(ctx, name)
		require.NoError(t, err)
		st, err := kv.Status(ctx)
		require.NoError(t, err)
		return st.(*jetstream.KeyValueBucketStatus).StreamInfo().Config.Replicas
	}
	require.Equal(t, 1, replicas(BucketProjects))

	_, err = Open(ctx, js, 3) // the control plane
	require.NoError(t, err)
	for _, b := range []string{BucketKeys, BucketProjects, BucketSources, BucketKeyUsage, BucketSettings} {
		assert.Equal(t, 3, replicas(b), b)
	}
	_, err = Open(ctx, js, 1) // a data-plane process again: never lowers
	require.NoError(t, err)
	assert.Equal(t, 3, replicas(BucketProjects))
}
