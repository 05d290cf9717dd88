package pipelinecfg_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/lifecyclehost"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/mirrorcache"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/natsclient"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelinecfg"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/principal"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// startMirror runs the real extensions (embedded NATS, configmirror with its mirror
// cache) and returns the mirror's writer and the cache.
func startMirror(t *testing.T) (*mirror.Store, *mirrorcache.Cache) {
	t.Helper()
	host := lifecyclehost.New(t)
	m, err := mirrorcache.FromHost(host, mirrorcache.DefaultExtension)
	require.NoError(t, err)
	_, js := testenv.Connect(t, host[natsclient.DefaultExtension].(natsclient.Embedded).ClientURL())
	store, err := mirror.Open(context.Background(), js, 1)
	require.NoError(t, err)
	require.Eventually(t, m.Ready, 10*time.Second, 10*time.Millisecond)
	return store, m
}

func put(t *testing.T, store *mirror.Store, m *mirrorcache.Cache, p mirror.Project) {
	t.Helper()
	require.NoError(t, store.PutProject(context.Background(), p))
	require.Eventually(t, func() bool {
		got, ok := m.Project(p.ID)
		return ok && got.Version == p.Version
	}, 10*time.Second, 10*time.Millisecond)
}

func request(project string) context.Context {
	return principal.NewContext(context.Background(), principal.Principal{ProjectID: project, Scope: "pipeline"})
}

func TestDeletingAProjectFreesItsCompiledPipeline(t *testing.T) {
	store, m := startMirror(t)
	c := pipelinecfg.NewCache(m)
	defer c.Close()
	for _, id := range []string{"prj_one", "prj_two"} {
		put(t, store, m, mirror.Project{ID: id, Version: 1, Pipeline: mirror.Pipeline{Trigger: `severity_number >= 17`}})
		_, compiled, ok, err := c.ForRequest(request(id))
		require.NoError(t, err)
		require.True(t, ok)
		require.NotNil(t, compiled.Trigger)
	}
	require.Equal(t, 2, c.Len())

	require.NoError(t, store.DeleteProject(context.Background(), "prj_one"))
	require.Eventually(t, func() bool { return c.Len() == 1 }, 10*time.Second, 10*time.Millisecond,
		"the deleted project's entry is dropped")
	_, _, ok, err := c.ForRequest(request("prj_one"))
	assert.True(t, ok)
	assert.ErrorIs(t, err, pipelinecfg.ErrNoProject)
	_, compiled, _, err := c.ForRequest(request("prj_two"))
	require.NoError(t, err)
	assert.Equal(t, int64(1), compiled.Version, "the other project keeps its entry")
}

func TestEachCacheCompilesOncePerVersion(t *testing.T) {
	store, m := startMirror(t)
	a, b := pipelinecfg.NewCache(m), pipelinecfg.NewCache(m)
	defer a.Close()
	defer b.Close()
	p := mirror.Project{ID: "prj_v", Version: 1, Pipeline: mirror.Pipeline{Trigger: `severity_number >= 17`}}
	put(t, store, m, p)
	first, err := a.Get(p)
	require.NoError(t, err)
	again, err := a.Get(p)
	require.NoError(t, err)
	assert.Same(t, first, again, "the same version is not compiled again")
	other, err := b.Get(p)
	require.NoError(t, err)
	assert.NotSame(t, first, other, "caches of two components share nothing")

	p.Version, p.Pipeline.Trigger = 2, `severity_number >=`
	err = a.Check(p)
	var fe *pipelinecfg.FieldError
	require.ErrorAs(t, err, &fe, "a new version is compiled, and its error kept")
	assert.Equal(t, "trigger", fe.Field)
}
