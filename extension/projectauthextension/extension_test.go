package projectauthextension

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap/confmaptest"
	"go.opentelemetry.io/collector/extension/extensionauth"
	"go.opentelemetry.io/collector/extension/extensiontest"

	"github.com/otelcol-svc/otelcol-svc/extension/configmirrorextension"
	"github.com/otelcol-svc/otelcol-svc/extension/projectauthextension/internal/metadata"
	"github.com/otelcol-svc/otelcol-svc/internal/apikey"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/principal"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

func TestConfig(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	for name, wantErr := range map[string]string{
		"": "", "tenants": "",
		"legacy_mirror": "projectauth no longer holds the configuration mirror: add the configmirror extension and set mirror: configmirror",
		"ingest_off":    "", "ingest_token": "", "ingest_bool": "",
		"ingest_bad": "push_ingest.auth must be on or off", "short_token": "at least 16 characters",
		"grpc_limit": "", "grpc_negative": "grpc.max_records_per_request must be 0",
	} {
		sub, err := cm.Sub(component.MustNewIDWithName("projectauth", name).String())
		require.NoError(t, err)
		cfg := createDefaultConfig().(*Config)
		require.NoError(t, sub.Unmarshal(cfg))
		if wantErr == "" {
			assert.NoError(t, cfg.Validate(), name)
		} else {
			assert.ErrorContains(t, cfg.Validate(), wantErr, name)
		}
	}
	def := createDefaultConfig().(*Config)
	assert.Equal(t, component.MustNewID("configmirror"), def.Mirror)
	assert.Equal(t, []component.ID{def.Mirror}, (&authenticator{cfg: def}).Dependencies(), "configmirror starts first")

	// An old config's `nats` settings are refused with where they went.
	sub, err := cm.Sub(component.MustNewIDWithName("projectauth", "legacy_nats").String())
	require.NoError(t, err)
	assert.ErrorContains(t, sub.Unmarshal(createDefaultConfig()), "projectauth no longer connects to NATS: move its `nats` settings to the configmirror extension (extensions: configmirror: nats: ...), list configmirror in service.extensions, and set mirror: configmirror here")
}

// mirrorHost starts the configmirror extension on the NATS at url and returns the host
// that holds it, as the collector starts it before projectauth (Dependencies).
func mirrorHost(t *testing.T, url string) component.Host {
	t.Helper()
	f := configmirrorextension.NewFactory()
	cfg := f.CreateDefaultConfig().(*configmirrorextension.Config)
	cfg.NATS.URL = url
	ext, err := f.Create(context.Background(), extensiontest.NewNopSettings(f.Type()), cfg)
	require.NoError(t, err)
	require.NoError(t, ext.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { _ = ext.Shutdown(context.Background()) })
	return componenttestHost{component.MustNewID("configmirror"): ext}
}

// Without the configmirror extension its `mirror` names, projectauth does not start, and
// says what to add.
func TestStartNeedsTheConfigmirrorExtension(t *testing.T) {
	ext, err := NewFactory().Create(context.Background(), extensiontest.NewNopSettings(metadata.Type), createDefaultConfig())
	require.NoError(t, err)
	err = ext.Start(context.Background(), componenttestHost{})
	assert.ErrorContains(t, err, "no configmirror extension is running: add it under `extensions:` and `service.extensions`")
}

func start(t *testing.T, url string) extensionauth.Server {
	t.Helper()
	ext, err := NewFactory().Create(context.Background(), extensiontest.NewNopSettings(metadata.Type), createDefaultConfig())
	require.NoError(t, err)
	require.NoError(t, ext.Start(context.Background(), mirrorHost(t, url)))
	t.Cleanup(func() { _ = ext.Shutdown(context.Background()) })
	return ext.(extensionauth.Server)
}

func TestResolvesKeysFromTheMirror(t *testing.T) {
	n := testenv.StartNATS(t)
	_, js := testenv.Connect(t, n.URL())
	m, err := mirror.Open(context.Background(), js, 1)
	require.NoError(t, err)
	project := apikey.Generate(apikey.KindProject)
	ingest := apikey.Generate(apikey.KindIngest)
	ctx := context.Background()
	require.NoError(t, m.PutKey(ctx, apikey.Hash(project), mirror.KeyEntry{KeyID: "k1", ProjectID: "p1", AccountID: "a1", Scope: mirror.ScopeProject}))
	require.NoError(t, m.PutKey(ctx, apikey.Hash(ingest), mirror.KeyEntry{KeyID: "k2", ProjectID: "p1", Scope: mirror.ScopeIngest, SourceID: "s1"}))

	auth := start(t, n.URL())
	require.Eventually(t, func() bool {
		_, err := auth.Authenticate(ctx, map[string][]string{"X-Api-Key": {project}})
		return err == nil
	}, 5*time.Second, 10*time.Millisecond)

	for name, sources := range map[string]map[string][]string{
		"http header":   {"X-Api-Key": {project}},
		"grpc metadata": {"x-api-key": {" " + project + " "}},
		"bearer":        {"Authorization": {"Bearer " + project}},
	} {
		got, err := auth.Authenticate(ctx, sources)
		require.NoError(t, err, name)
		p, ok := principal.FromContext(got)
		require.True(t, ok, name)
		assert.Equal(t, principal.Principal{ProjectID: "p1", KeyID: "k1", AccountID: "a1", Scope: "project"}, p, name)
	}
	_, err = auth.Authenticate(ctx, map[string][]string{})
	assert.ErrorIs(t, err, principal.ErrMissingKey)
	_, err = auth.Authenticate(ctx, map[string][]string{"X-Api-Key": {"osk_unknown"}})
	assert.ErrorIs(t, err, principal.ErrInvalidKey)
	// gRPC clients read this text; HTTP clients read the ingest receiver's, the same words.
	assert.EqualError(t, err, "the API key is not valid: it is unknown, revoked, or not a project key")
	_, err = auth.Authenticate(ctx, map[string][]string{"X-Api-Key": {ingest}})
	assert.ErrorIs(t, err, principal.ErrInvalidKey, "an ingest-scoped key only opens its source's ingest URL")

	require.NoError(t, m.DeleteKey(ctx, apikey.Hash(project)))
	require.Eventually(t, func() bool {
		_, err := auth.Authenticate(ctx, map[string][]string{"X-Api-Key": {project}})
		return errors.Is(err, principal.ErrInvalidKey)
	}, time.Second, 5*time.Millisecond, "a revoked key must stop working within a second")
}

func TestUnavailableUntilTheMirrorIsLoaded(t *testing.T) {
	port := testenv.FreePort(t) // nothing listens here yet
	auth := start(t, "nats://127.0.0.1:"+itoa(port))
	_, err := auth.Authenticate(context.Background(), map[string][]string{"X-Api-Key": {"osk_anything"}})
	assert.ErrorIs(t, err, principal.ErrNotReady, "an unknown key is not known to be invalid before the mirror loads")
}

func itoa(i int) string { return strconv.Itoa(i) }
