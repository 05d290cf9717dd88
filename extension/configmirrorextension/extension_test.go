package configmirrorextension

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap/confmaptest"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/extension/extensiontest"

	"github.com/otelcol-svc/otelcol-svc/extension/configmirrorextension/internal/metadata"
	"github.com/otelcol-svc/otelcol-svc/internal/apikey"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/mirrorcache"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/natsclient"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/validation"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

func TestConfig(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	for name, wantErr := range map[string]string{"": "", "cluster": "", "bad": "scheme must be nats"} {
		sub, err := cm.Sub(component.MustNewIDWithName("configmirror", name).String())
		require.NoError(t, err)
		cfg := createDefaultConfig().(*Config)
		require.NoError(t, sub.Unmarshal(cfg))
		if wantErr == "" {
			assert.NoError(t, cfg.Validate(), name)
		} else {
			assert.ErrorContains(t, cfg.Validate(), wantErr, name)
		}
	}
}

// An empty nats.url dials the embedded NATS extension, which must then start first.
func TestStartsAfterTheEmbeddedNATS(t *testing.T) {
	ext := newExt(t, "")
	assert.Equal(t, []component.ID{natsclient.DefaultExtension}, ext.(*configMirror).Dependencies())
	ext = newExt(t, "nats://127.0.0.1:4222")
	assert.Empty(t, ext.(*configMirror).Dependencies())
}

func newExt(t *testing.T, url string) extension.Extension {
	t.Helper()
	cfg := createDefaultConfig().(*Config)
	cfg.NATS.URL = url
	ext, err := NewFactory().Create(context.Background(), extensiontest.NewNopSettings(metadata.Type), cfg)
	require.NoError(t, err)
	return ext
}

func start(t *testing.T, url string) extension.Extension {
	t.Helper()
	ext := newExt(t, url)
	require.NoError(t, ext.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { _ = ext.Shutdown(context.Background()) })
	return ext
}

// The components that name this extension in their `mirror` setting read the mirror's
// current contents, and its changes within a second, from the host.
func TestComponentsReadTheMirrorThroughTheHost(t *testing.T) {
	n := testenv.StartNATS(t)
	_, js := testenv.Connect(t, n.URL())
	ctx := context.Background()
	m, err := mirror.Open(ctx, js, 1)
	require.NoError(t, err)
	key := apikey.Generate(apikey.KindProject)
	require.NoError(t, m.PutKey(ctx, apikey.Hash(key), mirror.KeyEntry{KeyID: "k1", ProjectID: "p1", Scope: mirror.ScopeProject}))
	require.NoError(t, m.PutProject(ctx, mirror.Project{ID: "p1", AccountID: "a1", Version: 1}))

	ext := start(t, n.URL())
	h := host{mirrorcache.DefaultExtension: ext}
	cache, err := mirrorcache.FromHost(h, mirrorcache.DefaultExtension)
	require.NoError(t, err)
	require.Eventually(t, cache.Ready, 10*time.Second, 10*time.Millisecond)
	e, ok := cache.Key(apikey.Hash(key))
	require.True(t, ok)
	assert.Equal(t, "p1", e.ProjectID)
	p, ok := cache.Project("p1")
	require.True(t, ok)
	assert.Equal(t, "a1", p.AccountID)
	assert.NotNil(t, ext.(interface{ JetStream() jetstream.JetStream }).JetStream(), "projectauth reports key use through it")

	require.NoError(t, m.DeleteKey(ctx, apikey.Hash(key)))
	require.Eventually(t, func() bool { _, ok := cache.Key(apikey.Hash(key)); return !ok }, time.Second, 5*time.Millisecond,
		"a revoked key must leave the mirror within a second")
}

// The control plane checks a pipeline before saving it by asking any running collector
// over NATS: the extension answers, with the data plane's own compiler, and stops
// answering at shutdown (the control plane then hears "unavailable", not "valid").
func TestAnswersTheControlPlanesPipelineChecks(t *testing.T) {
	n := testenv.StartNATS(t)
	nc, _ := testenv.Connect(t, n.URL())
	ctx := context.Background()

	ext := newExt(t, n.URL())
	require.NoError(t, ext.Start(ctx, componenttest.NewNopHost()))
	res, err := validation.Check(ctx, nc, mirror.Pipeline{Trigger: `severity_number >= 17`, GroupKey: "traceId"})
	require.NoError(t, err)
	assert.Equal(t, validation.Result{OK: true}, res)
	res, err = validation.Check(ctx, nc, mirror.Pipeline{Trigger: `status == "x"`, Transforms: []string{`set(event["a"], 1`}})
	require.NoError(t, err)
	assert.False(t, res.OK)
	assert.Equal(t, "transforms", res.Field)

	require.NoError(t, ext.Shutdown(ctx))
	_, err = validation.Check(ctx, nc, mirror.Pipeline{Trigger: `status == "x"`})
	assert.ErrorIs(t, err, validation.ErrUnavailable)
}
