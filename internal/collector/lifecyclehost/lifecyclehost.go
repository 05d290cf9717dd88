// Package lifecyclehost is the collector host of the components' generated lifecycle tests
// (metadata.yaml tests.host): the extensions our components take from the host, real and
// started as the collector starts them before any pipeline. mdatagen's own nop host has no
// extensions, so with it every component that dials NATS or reads the configuration
// mirror could only skip its lifecycle test.
package lifecyclehost

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/extension/extensiontest"

	"github.com/otelcol-svc/otelcol-svc/extension/configmirrorextension"
	"github.com/otelcol-svc/otelcol-svc/extension/embeddednatsextension"
	"github.com/otelcol-svc/otelcol-svc/extension/projectauthextension"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/mirrorcache"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/natsclient"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// Host is a collector host holding extensions by ID.
type Host map[component.ID]component.Component

// GetExtensions implements component.Host.
func (h Host) GetExtensions() map[component.ID]component.Component { return h }

// New starts the embedded NATS extension (on a free port, its store in a temporary
// directory), the configmirror extension on it and the projectauth authenticator on that,
// under the IDs our components' default configs name (embeddednats, configmirror,
// projectauth). All stop when the test ends, after the component under test has been
// shut down.
func New(t *testing.T) Host {
	t.Helper()
	h := NATSOnly(t)
	start(t, h, configmirrorextension.NewFactory(), mirrorcache.DefaultExtension, nil)
	start(t, h, projectauthextension.NewFactory(), component.MustNewID("projectauth"), nil)
	// Wait for the mirror to be loaded, as a collector's components find it in steady
	// state: loading creates the mirror's buckets, and a stream still being created when
	// the server shuts down leaves nats-server goroutines behind (goleak sees them).
	cache := h[mirrorcache.DefaultExtension].(mirrorcache.Provider).MirrorCache()
	require.Eventually(t, cache.Ready, 30*time.Second, 10*time.Millisecond, "the configuration mirror did not load")
	return h
}

// NATSOnly is New with the embedded NATS extension alone.
func NATSOnly(t *testing.T) Host {
	t.Helper()
	h := Host{}
	start(t, h, embeddednatsextension.NewFactory(), natsclient.DefaultExtension, func(cfg component.Config) {
		c := cfg.(*embeddednatsextension.Config)
		c.Listen = "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
		c.StoreDir = t.TempDir()
	})
	return h
}

func start(t *testing.T, h Host, f extension.Factory, id component.ID, tweak func(component.Config)) {
	t.Helper()
	cfg := f.CreateDefaultConfig()
	if tweak != nil {
		tweak(cfg)
	}
	ext, err := f.Create(context.Background(), extensiontest.NewNopSettings(f.Type()), cfg)
	require.NoError(t, err)
	require.NoError(t, ext.Start(context.Background(), h))
	t.Cleanup(func() { require.NoError(t, ext.Shutdown(context.Background())) })
	h[id] = ext
}
