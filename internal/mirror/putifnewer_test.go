package mirror_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// A publish of the whole configuration writes what it read from the database before: a
// project the API changed meanwhile (a later version in the mirror) keeps its change.
func TestPutProjectIfNewerKeepsALaterVersion(t *testing.T) {
	ctx := context.Background()
	n := testenv.StartNATS(t)
	_, js := testenv.Connect(t, n.URL())
	ms, err := mirror.Open(ctx, js, 1)
	require.NoError(t, err)
	kv, err := js.KeyValue(ctx, mirror.BucketProjects)
	require.NoError(t, err)
	read := func() mirror.Project {
		e, err := kv.Get(ctx, "p1")
		require.NoError(t, err)
		var p mirror.Project
		require.NoError(t, json.Unmarshal(e.Value(), &p))
		return p
	}

	require.NoError(t, ms.PutProjectIfNewer(ctx, mirror.Project{ID: "p1", Version: 2, Name: "created"}))
	assert.Equal(t, "created", read().Name, "a missing entry is created")
	require.NoError(t, ms.PutProject(ctx, mirror.Project{ID: "p1", Version: 3, Name: "saved by the API",
		Pipeline: mirror.Pipeline{AgentEndpointURL: "https://agent.example.com"}}))
	require.NoError(t, ms.PutProjectIfNewer(ctx, mirror.Project{ID: "p1", Version: 2, Name: "old snapshot"}))
	assert.Equal(t, "saved by the API", read().Name, "an older snapshot does not overwrite a later version")
	assert.Equal(t, "https://agent.example.com", read().Pipeline.AgentEndpointURL)
	require.NoError(t, ms.PutProjectIfNewer(ctx, mirror.Project{ID: "p1", Version: 3, Name: "same version"}))
	assert.Equal(t, "saved by the API", read().Name, "the same version is left as it is")
	require.NoError(t, ms.PutProjectIfNewer(ctx, mirror.Project{ID: "p1", Version: 4, Name: "newer"}))
	assert.Equal(t, "newer", read().Name, "a newer version is written")
}

// A full publish from an older snapshot must not bring back what the API deleted while
// it ran (a revoked key working again until the next publish); what was never there, or
// was deleted long ago by hand, it restores.
