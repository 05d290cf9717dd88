package windowprocessor

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/processor/processorhelper"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelinedata"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/windowstore"
	"github.com/otelcol-svc/otelcol-svc/processor/windowprocessor/internal/metadata"
	"github.com/otelcol-svc/otelcol-svc/processor/windowprocessor/internal/metadatatest"
)

// In window mode: a record that 30 doublings would grow past the record limit
// neither triggers nor joins a window; it goes on as a failed item, as stored, with the
// error, for the agent exporter to dead-letter. A later trigger's window lacks it.
func TestDoublingRecordBecomesAVisibleErrorInWindowMode(t *testing.T) {
	h := newHarness(t)
	p := h.processor(t, false)
	project := fmt.Sprintf("prj_toolarge_%d", time.Now().UnixNano())
	stmts := make([]string, 30)
	for i := range stmts {
		stmts[i] = `set(event["b"], Concat([event["b"], event["b"]], "")) where event["b"] != nil`
	}
	h.put(t, mirror.Project{ID: project, Version: 1, Pipeline: mirror.Pipeline{WindowEnabled: true,
		Trigger: `event["t"] == true`, Transforms: stmts}})

	stored := `{"n":1,"t":true,"b":"` + strings.Repeat("a", 1000) + `"}`
	ld, lrs := pipelinedata.New()
	pipelinedata.Append(lrs, pipelinedata.Item{Body: []byte(stored), Signal: "event", Seq: 1})
	pipelinedata.Append(lrs, pipelinedata.Item{Body: []byte(`{"n":2}`), Signal: "event", Seq: 2})
	pipelinedata.Append(lrs, pipelinedata.Item{Body: []byte(`{"n":3,"t":true}`), Signal: "event", Seq: 3})
	out, err := p.processLogs(request(project, nil), ld)
	require.NoError(t, err)
	var items []pipelinedata.Item
	for lr := range pipelinedata.All(out) {
		items = append(items, pipelinedata.Read(lr))
	}
	require.Len(t, items, 2)
	assert.Equal(t, pipelinedata.KindFailed, items[0].Kind)
	assert.Equal(t, uint64(1), items[0].Seq)
	assert.Equal(t, stored, string(items[0].Body))
	assert.True(t, strings.HasPrefix(items[0].Error, "record_too_large_after_transforms: statement 9 "), items[0].Error)

	assert.Equal(t, pipelinedata.KindWindowCall, items[1].Kind)
	assert.Equal(t, `{"trigger":{"n":3,"t":true},"window":[{"n":2}]}`, string(items[1].Body), "the failed record is in no window")
}

// recordsBy sums otelcol_window_records of one outcome.
func recordsBy(t *testing.T, tt *componenttest.Telemetry, outcome string) int64 {
	t.Helper()
	m, err := tt.GetMetric("otelcol_window_records")
	require.NoError(t, err)
	var n int64
	for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
		if v, _ := dp.Attributes.Value("outcome"); v.AsString() == outcome {
			n += dp.Value
		}
	}
	return n
}

// A tenant's failing transform logged a WARN for every record. Each is
// counted by outcome; the operator hears it once per project and configuration version.
func TestTenantFailuresAreCountedAndWarnedOncePerVersionInWindowMode(t *testing.T) {
	h := newHarness(t)
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tt.Shutdown(context.Background())) })
	set := metadatatest.NewSettings(tt)
	core, logs := observer.New(zap.DebugLevel)
	set.Logger = zap.New(core)
	p, err := newProcessor(createDefaultConfig().(*Config), set)
	require.NoError(t, err)
	require.NoError(t, p.start(context.Background(), h.host))
	t.Cleanup(func() { require.NoError(t, p.shutdown(context.Background())) })

	project := fmt.Sprintf("prj_failing_%d", time.Now().UnixNano())
	stmts := []string{`set(event["p"], ParseJSON(event["raw"])) where event["raw"] != nil`}
	for range 30 {
		stmts = append(stmts, `set(event["b"], Concat([event["b"], event["b"]], "")) where event["b"] != nil`)
	}
	pipeline := mirror.Pipeline{WindowEnabled: true, Trigger: `event["t"] == true`, Transforms: stmts}
	h.put(t, mirror.Project{ID: project, Version: 1, Pipeline: pipeline})
	big := `{"b":"` + strings.Repeat("a", 1000) + `"}`
	send := func(seq uint64) {
		ld, lrs := pipelinedata.New()
		for i := range uint64(5) {
			pipelinedata.Append(lrs, pipelinedata.Item{Body: []byte(`{"raw":"not json"}`), Signal: "event", Seq: seq + 2*i})
			pipelinedata.Append(lrs, pipelinedata.Item{Body: []byte(big), Signal: "event", Seq: seq + 2*i + 1})
		}
		_, err := p.processLogs(request(project, nil), ld)
		require.NoError(t, err)
	}
	send(1)
	send(11)

	assert.Equal(t, int64(10), recordsBy(t, tt, "error"))
	assert.Equal(t, int64(10), recordsBy(t, tt, "too_large"))
	warns := logs.FilterLevelExact(zap.WarnLevel).FilterField(zap.String("project_id", project))
	assert.Equal(t, 1, warns.Len(), "one WARN for the version: %v", warns.All())
	assert.Equal(t, 19, logs.FilterLevelExact(zap.DebugLevel).FilterField(zap.String("project_id", project)).Len(), "the others at debug")

	h.put(t, mirror.Project{ID: project, Version: 2, Pipeline: pipeline})
	send(21)
	assert.Equal(t, 2, logs.FilterLevelExact(zap.WarnLevel).FilterField(zap.String("project_id", project)).Len())
}

// A project's in-memory windows are held to memory_max_project_bytes,
// whatever the number of its groups: a trigger's window lacks the oldest context once
// the project passed it, and has the newest.
func TestProjectWindowsAreHeldToTheirMemoryBound(t *testing.T) {
	h := newHarness(t)
	cfg := createDefaultConfig().(*Config)
	cfg.MemoryMaxProjectBytes = 50_000
	p, err := newProcessor(cfg, processortest.NewNopSettings(metadata.Type))
	require.NoError(t, err)
	require.NoError(t, p.start(context.Background(), h.host))
	t.Cleanup(func() { require.NoError(t, p.shutdown(context.Background())) })

	project := fmt.Sprintf("prj_groups_%d", time.Now().UnixNano())
	h.put(t, mirror.Project{ID: project, Version: 1, Pipeline: mirror.Pipeline{WindowEnabled: true,
		Trigger: `event["t"] == true`, GroupKey: `event["g"]`}})
	pad := strings.Repeat("x", 1000)
	ld, lrs := pipelinedata.New()
	for i := range 200 {
		pipelinedata.Append(lrs, pipelinedata.Item{Body: []byte(fmt.Sprintf(`{"g":"%d","pad":"%s"}`, i, pad)), Signal: "event", Seq: uint64(i + 1)})
	}
	_, err = p.processLogs(request(project, nil), ld)
	require.ErrorIs(t, err, processorhelper.ErrSkipProcessingData, "no trigger yet")
	assert.LessOrEqual(t, p.store.(*windowstore.Memory).ProjectBytes(project), 50_000)

	ld, lrs = pipelinedata.New()
	pipelinedata.Append(lrs, pipelinedata.Item{Body: []byte(`{"g":"0","t":true}`), Signal: "event", Seq: 1000})
	pipelinedata.Append(lrs, pipelinedata.Item{Body: []byte(`{"g":"199","t":true}`), Signal: "event", Seq: 1001})
	out, err := p.processLogs(request(project, nil), ld)
	require.NoError(t, err)
	var bodies []string
	for lr := range pipelinedata.All(out) {
		bodies = append(bodies, string(pipelinedata.Read(lr).Body))
	}
	require.Len(t, bodies, 2)
	assert.Equal(t, `{"trigger":{"g":"0","t":true},"window":[]}`, bodies[0], "the oldest group was evicted")
	assert.Contains(t, bodies[1], `"window":[{"g":"199","pad":"`)
}

// One account's projects, each within memory_max_project_bytes,
// held the process's memory ten times over. memory_max_bytes holds the process: the
// projects that filled it lose their oldest context, and a small project's trigger
// still gets its whole window.
func TestProcessWindowsAreHeldToTheirMemoryBoundLargestProjectFirst(t *testing.T) {
	h := newHarness(t)
	cfg := createDefaultConfig().(*Config)
	cfg.MemoryMaxProjectBytes = 100_000
	cfg.MemoryMaxBytes = 250_000
	p, err := newProcessor(cfg, processortest.NewNopSettings(metadata.Type))
	require.NoError(t, err)
	require.NoError(t, p.start(context.Background(), h.host))
	t.Cleanup(func() { require.NoError(t, p.shutdown(context.Background())) })

	run := time.Now().UnixNano()
	pipeline := mirror.Pipeline{WindowEnabled: true, Trigger: `event["t"] == true`, GroupKey: `event["g"]`}
	small := fmt.Sprintf("prj_small_%d", run)
	h.put(t, mirror.Project{ID: small, Version: 1, Pipeline: pipeline})
	pad := strings.Repeat("x", 1000)
	store := func(project string, n int) {
		ld, lrs := pipelinedata.New()
		for i := range n {
			pipelinedata.Append(lrs, pipelinedata.Item{Body: []byte(fmt.Sprintf(`{"g":"%d","pad":"%s"}`, i, pad)), Signal: "event", Seq: uint64(i + 1)})
		}
		_, err := p.processLogs(request(project, nil), ld)
		require.ErrorIs(t, err, processorhelper.ErrSkipProcessingData, "no trigger yet")
	}
	trigger := func(project, group string) string {
		ld, lrs := pipelinedata.New()
		pipelinedata.Append(lrs, pipelinedata.Item{Body: []byte(fmt.Sprintf(`{"g":%q,"t":true}`, group)), Signal: "event", Seq: 100_000})
		out, err := p.processLogs(request(project, nil), ld)
		require.NoError(t, err)
		var bodies []string
		for lr := range pipelinedata.All(out) {
			bodies = append(bodies, string(pipelinedata.Read(lr).Body))
		}
		require.Len(t, bodies, 1)
		return bodies[0]
	}
	store(small, 10)
	var big []string
	for i := range 6 {
		id := fmt.Sprintf("prj_acct_%d_%d", i, run)
		big = append(big, id)
		h.put(t, mirror.Project{ID: id, Version: 1, Pipeline: pipeline})
		store(id, 90) // each within its own bound
	}
	mem := p.store.(*windowstore.Memory)
	assert.LessOrEqual(t, mem.TotalBytes(), 250_000)
	for i := range 10 {
		assert.Contains(t, trigger(small, fmt.Sprint(i)), `"window":[{"g":"`, "the small project kept group %d", i)
	}
	for _, id := range big {
		assert.Equal(t, `{"trigger":{"g":"0","t":true},"window":[]}`, trigger(id, "0"), "%s lost its oldest", id)
		assert.Contains(t, trigger(id, "89"), `"window":[{"g":"89","pad":"`, "%s kept its newest", id)
	}
}
