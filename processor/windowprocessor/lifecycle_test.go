package windowprocessor

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension/extensiontest"

	"github.com/otelcol-svc/otelcol-svc/extension/projectauthextension"
)

// newLifecycleHost is the host of the generated lifecycle test (metadata.yaml tests.host):
// Start needs the projectauth extension's configuration mirror. The extension is the real
// one, created but not started, so its mirror is empty and every record passes through as
// a record of no project.
func newLifecycleHost(t *testing.T) component.Host {
	f := projectauthextension.NewFactory()
	ext, err := f.Create(context.Background(), extensiontest.NewNopSettings(f.Type()), f.CreateDefaultConfig())
	require.NoError(t, err)
	return lifecycleHost{component.NewID(f.Type()): ext}
}

type lifecycleHost map[component.ID]component.Component

func (h lifecycleHost) GetExtensions() map[component.ID]component.Component { return h }
