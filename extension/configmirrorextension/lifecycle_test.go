package configmirrorextension

import (
	"context"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension/extensiontest"

	"github.com/otelcol-svc/otelcol-svc/extension/embeddednatsextension"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/natsclient"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// newLifecycleHost is the host of the generated lifecycle test (metadata.yaml tests.host):
// the embedded NATS extension that Start dials, real and started on a free port, with the
// configuration mirror's buckets in it.
// (internal/collector/lifecyclehost cannot be used here: it imports this package.)
func newLifecycleHost(t *testing.T) component.Host {
	f := embeddednatsextension.NewFactory()
	cfg := f.CreateDefaultConfig().(*embeddednatsextension.Config)
	cfg.Listen = "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	cfg.StoreDir = t.TempDir()
	ext, err := f.Create(context.Background(), extensiontest.NewNopSettings(f.Type()), cfg)
	require.NoError(t, err)
	require.NoError(t, ext.Start(context.Background(), host(nil)))
	t.Cleanup(func() { require.NoError(t, ext.Shutdown(context.Background())) })
	// The mirror's buckets exist before the extension starts, as the control plane has
	// made them in a deployment: a bucket still being created when the server shuts down
	// leaves nats-server goroutines behind (goleak sees them).
	_, js := testenv.Connect(t, ext.(natsclient.Embedded).ClientURL())
	_, err = mirror.Open(context.Background(), js, 1)
	require.NoError(t, err)
	return host{natsclient.DefaultExtension: ext}
}

type host map[component.ID]component.Component

func (h host) GetExtensions() map[component.ID]component.Component { return h }
