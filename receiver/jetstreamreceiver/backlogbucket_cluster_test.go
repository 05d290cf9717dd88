//go:build cluster

package jetstreamreceiver

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// In a replicated deployment the bucket of backlog runs has the streams' replicas: a
// node lost does not take the done entries with it, and with them the only thing that
// keeps a finished backlog (paid agent calls) from running again.
func TestClusterTheBacklogBucketHasTheStreamsReplicas(t *testing.T) {
	cl := testenv.StartNATSCluster(t, 3)
	_, js := testenv.Connect(t, cl.URL())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cfg := createDefaultConfig().(*Config)
	cfg.Stream.Replicas = 3
	r := &jsReceiver{js: js, cfg: cfg}
	_, err := r.backlogKV(ctx)
	require.NoError(t, err)
	assert.Equal(t, 3, bucketConfig(t, js).Replicas)

	// A process configured with one replica (or started first) binds it as it is.
	one := createDefaultConfig().(*Config)
	_, err = (&jsReceiver{js: js, cfg: one}).backlogKV(ctx)
	require.NoError(t, err)
	assert.Equal(t, 3, bucketConfig(t, js).Replicas)
}
