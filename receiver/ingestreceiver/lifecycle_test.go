package ingestreceiver

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension/extensiontest"

	"github.com/otelcol-svc/otelcol-svc/extension/projectauthextension"
)

// newLifecycleHost is the host of the generated lifecycle test (metadata.yaml tests.host):
// Start takes the authenticator named in the config from the host's extensions. It is the
// real projectauth extension, created but not started (its key mirror stays empty, so the
// receiver would answer 503 until it loads).
func newLifecycleHost(t *testing.T) component.Host {
	f := projectauthextension.NewFactory()
	ext, err := f.Create(context.Background(), extensiontest.NewNopSettings(f.Type()), f.CreateDefaultConfig())
	require.NoError(t, err)
	return lifecycleHost{component.NewID(f.Type()): ext}
}

type lifecycleHost map[component.ID]component.Component

func (h lifecycleHost) GetExtensions() map[component.ID]component.Component { return h }
