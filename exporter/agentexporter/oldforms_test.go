package agentexporter

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/exporter/exportertest"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelinedata"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/principal"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
)

// The sink role's old configuration, `agent/sink`, is refused when the exporter is
// created (so `otelcol-svc validate` says it too), naming the sink exporter.
func TestAnAgentExporterNamedSinkIsRefused(t *testing.T) {
	f := NewFactory()
	set := exportertest.NewNopSettings(f.Type())
	set.ID = component.NewIDWithName(f.Type(), "sink")
	_, err := f.CreateLogs(context.Background(), set, f.CreateDefaultConfig())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "rename `agent/sink` to `sink`")

	set.ID = component.NewIDWithName(f.Type(), "other")
	_, err = f.CreateLogs(context.Background(), set, f.CreateDefaultConfig())
	require.NoError(t, err, "only the old name is refused")
}

// A pipeline that still hands the agent exporter agent results (the sink role's
// receiver in front of it) fails each batch naming the sink exporter, and sends nothing:
// the results stay on the output stream for the sink exporter.
func TestResultsHandedToTheAgentExporterAreRefused(t *testing.T) {
	e := newEnv(t)
	hook := newAgent(t, nil)
	p := sinkProject("old", mirror.Sink{ID: "s_hook", Kind: "webhook", URL: hook.srv.URL})
	p.Pipeline.AgentEndpointURL = hook.srv.URL
	e.putProject(t, p)
	r := e.start(t, nil)

	ld, lrs := pipelinedata.New()
	pipelinedata.Append(lrs, pipelinedata.Item{Body: []byte(`{"text":"x"}`), Kind: pipelinedata.KindResult, Seq: 7,
		SinkID: "s_hook", RequestID: "req_1", MsgID: "out:req_1:abc"})
	err := r.exp.ConsumeLogs(principal.NewContext(context.Background(), principal.Principal{ProjectID: "old"}), ld)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "use the `sink` exporter instead of `agent/sink`")
	assert.Empty(t, hook.requests(), "neither delivered nor sent to the agent")
	assert.Empty(t, e.deadLetters(t, "old"), "nor dead-lettered")

	require.NoError(t, consume(r, "old", records(1)), "records still go to the agent")
	assert.Len(t, hook.requests(), 1)
}
