package ingestreceiver

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/extension/extensiontest"

	"github.com/otelcol-svc/otelcol-svc/extension/projectauthextension"
)

// The receiver finds push ingest, console reads and replay authorization by asserting its
// authenticator to dataPlaneAuth at Start: the projectauth extension must keep offering
// all of it, or those paths would answer 500 in a real collector while unit tests (with
// their fakes) pass.
func TestProjectauthOffersTheDataPlaneSide(t *testing.T) {
	f := projectauthextension.NewFactory()
	ext, err := f.Create(context.Background(), extensiontest.NewNopSettings(f.Type()), f.CreateDefaultConfig())
	require.NoError(t, err)
	_, ok := ext.(dataPlaneAuth)
	require.True(t, ok)
}
