package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	envprovider "go.opentelemetry.io/collector/confmap/provider/envprovider"
	fileprovider "go.opentelemetry.io/collector/confmap/provider/fileprovider"
	"go.opentelemetry.io/collector/otelcol"

	pipelinecheck "github.com/otelcol-svc/otelcol-svc/internal/collector/pipelinecheck"
)

// checkConfig checks the receiver role's shipped config, changed by edit, as the binary
// does before it starts anything (and as `otelcol-svc validate` does).
func checkConfig(t *testing.T, edit func(string) string) error {
	t.Helper()
	t.Setenv("NATS_URL", "nats://127.0.0.1:1")
	b, err := os.ReadFile(filepath.Join("..", "..", "configs", "receiver.yaml"))
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(path, []byte(edit(string(b))), 0o600))
	col, err := otelcol.NewCollector(otelcol.CollectorSettings{
		BuildInfo: component.NewDefaultBuildInfo(),
		Factories: components,
		ConfigProviderSettings: otelcol.ConfigProviderSettings{ResolverSettings: confmap.ResolverSettings{
			URIs:               []string{path},
			ProviderFactories:  []confmap.ProviderFactory{envprovider.NewFactory(), fileprovider.NewFactory()},
			ConverterFactories: []confmap.ConverterFactory{pipelinecheck.NewFactory()},
			DefaultScheme:      "env",
		}},
	})
	require.NoError(t, err)
	return col.DryRun(context.Background())
}

func replace(old, new string) func(string) string {
	return func(s string) string { return strings.ReplaceAll(s, old, new) }
}

// A config written when projectauth held the configuration mirror is refused before
// anything starts, with the form that replaces it, rather than run with a mirror of
// whatever projectauth still lends out.
func TestConfigsNamingProjectauthAsTheMirrorAreRefused(t *testing.T) {
	require.NoError(t, checkConfig(t, func(s string) string { return s }), "the shipped config")

	err := checkConfig(t, replace("mirror: configmirror", "mirror: projectauth"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "projectauth no longer holds the configuration mirror: add the configmirror extension and set mirror: configmirror")

	// projectauth's NATS settings, from when it dialled NATS for the mirror itself.
	err = checkConfig(t, replace("  projectauth:\n", "  projectauth:\n    nats:\n      url: ${env:NATS_URL}\n"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "projectauth no longer connects to NATS: move its `nats` settings to the configmirror extension")
}
