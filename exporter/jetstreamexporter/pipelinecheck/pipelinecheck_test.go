package pipelinecheck

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/yamlprovider"
)

func conf(t *testing.T, doc string) *confmap.Conf {
	t.Helper()
	ret, err := yamlprovider.NewFactory().Create(confmap.ProviderSettings{}).Retrieve(context.Background(), "yaml:"+doc, nil)
	require.NoError(t, err)
	c, err := ret.AsConf()
	require.NoError(t, err)
	return c
}

func convert(t *testing.T, doc string) error {
	t.Helper()
	return NewFactory().Create(confmap.ConverterSettings{}).Convert(context.Background(), conf(t, doc))
}

func TestShippedConfigsPass(t *testing.T) {
	files, err := filepath.Glob("../../../configs/*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		require.NoError(t, convert(t, string(b)), f)
	}
}

func TestBatchBeforeJetStreamRefused(t *testing.T) {
	err := convert(t, `
service:
  pipelines:
    logs:
      receivers: [ingest, otlp]
      processors: [memory_limiter, batch]
      exporters: [jetstream]
    traces/x:
      receivers: [otlp]
      processors: [batch/2]
      exporters: [debug, jetstream/raw]
`)
	require.Error(t, err)
	require.ErrorContains(t, err, `pipeline "logs": processor "batch" cannot sit before the "jetstream" exporter`)
	require.ErrorContains(t, err, `pipeline "traces/x": processor "batch/2" cannot sit before the "jetstream/raw" exporter`)
	require.ErrorContains(t, err, "a 2xx means stored")
	require.NotContains(t, err.Error(), `"memory_limiter" cannot`)
}

func TestOtherPipelinesMayBatch(t *testing.T) {
	require.NoError(t, convert(t, `
service:
  pipelines:
    logs:
      receivers: [ingest]
      processors: [memory_limiter/a]
      exporters: [jetstream]
    logs/debug:
      receivers: [ingest]
      processors: [batch]
      exporters: [debug]
`))
}
