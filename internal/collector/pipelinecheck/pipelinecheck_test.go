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

// The pipeline and sink roles talk through the request's context too (the project, the
// batch's order hand-off, trigger cooldowns given back, the delivery outcome), and the
// jetstream receiver acknowledges a message when the call returns: a batch processor
// there would lose every call's context and acknowledge unprocessed messages.
func TestBatchInThePipelineAndSinkRolesRefused(t *testing.T) {
	err := convert(t, `
service:
  pipelines:
    logs/pipeline:
      receivers: [jetstream/raw]
      processors: [trigger, batch, window]
      exporters: [agent]
    logs/sink:
      receivers: [jetstream/output]
      processors: [batch/results]
      exporters: [sink]
    logs/custom:
      receivers: [otlp]
      processors: [batch]
      exporters: [agent/2]
`)
	require.Error(t, err)
	require.ErrorContains(t, err, `pipeline "logs/pipeline": processor "batch" cannot sit in this pipeline: the jetstream receiver acknowledges`)
	require.ErrorContains(t, err, "the trigger processor reads the project")
	require.ErrorContains(t, err, `pipeline "logs/sink": processor "batch/results" cannot sit in this pipeline`)
	require.ErrorContains(t, err, "the sink exporter reads the project from the request's context")
	require.ErrorContains(t, err, `pipeline "logs/custom": processor "batch" cannot sit in this pipeline: the agent exporter reads`)
	require.NotContains(t, err.Error(), `"trigger" cannot`)
	require.NotContains(t, err.Error(), `"window" cannot`)
}

// The pipeline role's own processors are synchronous, and memory_limiter may guard it.
func TestPipelineRoleWithItsProcessorsPasses(t *testing.T) {
	require.NoError(t, convert(t, `
service:
  pipelines:
    logs/pipeline:
      receivers: [jetstream/raw]
      processors: [memory_limiter, trigger, window, incident]
      exporters: [agent]
    logs/sink:
      receivers: [jetstream/output]
      exporters: [sink]
`))
}

// The ingest role keeps its stricter rule: the pipeline's processors run after storage.
func TestTriggerBeforeJetStreamRefused(t *testing.T) {
	err := convert(t, `
service:
  pipelines:
    logs:
      receivers: [ingest]
      processors: [trigger]
      exporters: [jetstream]
`)
	require.ErrorContains(t, err, `processor "trigger" cannot sit before the "jetstream" exporter`)
}
