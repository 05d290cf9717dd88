package triggerprocessor

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/mirrorcache"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelinedata"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/processor/triggerprocessor/internal/metadatatest"
)

func doublings(n int) []string {
	stmts := make([]string, n)
	for i := range stmts {
		stmts[i] = `set(event["b"], Concat([event["b"], event["b"]], "")) where event["b"] != nil`
	}
	return stmts
}

// A saved pipeline of 30 doublings over a 1 KiB record made the pipeline process
// build a 16 MiB body at 14 and would crash it at 30. The record now stops at the 10th
// statement and goes on as a failed item, as stored, with the error the console shows;
// the batch's other records are untouched.
func TestDoublingRecordBecomesAVisibleError(t *testing.T) {
	h := newHarness(t)
	p := h.processor(t, false)
	project := fmt.Sprintf("prj_toolarge_%d", time.Now().UnixNano())
	h.put(t, mirror.Project{ID: project, Version: 1, Pipeline: mirror.Pipeline{Transforms: doublings(30)}})

	stored := `{"n":1,"b":"` + strings.Repeat("a", 1000) + `"}`
	ld, lrs := pipelinedata.New()
	pipelinedata.Append(lrs, pipelinedata.Item{Body: []byte(stored), Signal: "event", Seq: 1})
	pipelinedata.Append(lrs, pipelinedata.Item{Body: []byte(`{"n":2}`), Signal: "event", Seq: 2})
	got := kept(t, p, request(project, nil), ld)
	require.Len(t, got, 2)

	assert.Equal(t, pipelinedata.KindFailed, got[0].Kind)
	assert.Equal(t, stored, string(got[0].Body), "as stored, not 1 MiB and not half transformed")
	assert.True(t, strings.HasPrefix(got[0].Error, `record_too_large_after_transforms: statement 9 "set(event[\"b\"]`), got[0].Error)
	assert.Contains(t, got[0].Error, "over the record limit of 1000000 bytes (SVC_MAX_RECORD_BYTES)")

	assert.Equal(t, pipelinedata.KindRecord, got[1].Kind)
	assert.Equal(t, `{"n":2}`, string(got[1].Body))

	// A smaller limit from the configuration stops it sooner.
	p.maxRecordBytes = 5000
	ld, lrs = pipelinedata.New()
	pipelinedata.Append(lrs, pipelinedata.Item{Body: []byte(stored), Signal: "event", Seq: 3})
	got = kept(t, p, request(project, nil), ld)
	require.Len(t, got, 1)
	assert.Contains(t, got[0].Error, "statement 2 ")
	assert.Contains(t, got[0].Error, "limit of 5000 bytes")
}

// recordsBy sums otelcol_trigger_records of one outcome.
func recordsBy(t *testing.T, tt *componenttest.Telemetry, outcome string) int64 {
	t.Helper()
	m, err := tt.GetMetric("otelcol_trigger_records")
	require.NoError(t, err)
	var n int64
	for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
		if v, _ := dp.Attributes.Value("outcome"); v.AsString() == outcome {
			n += dp.Value
		}
	}
	return n
}

// A tenant's failing transform logged a WARN for every record, so one
// project's mistake filled the operator's log. Each record is counted by outcome; the
// operator hears it once per project and configuration version, the rest at debug.
func TestTenantFailuresAreCountedAndWarnedOncePerVersion(t *testing.T) {
	h := newHarness(t)
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tt.Shutdown(context.Background())) })
	set := metadatatest.NewSettings(tt)
	core, logs := observer.New(zap.DebugLevel)
	set.Logger = zap.New(core)
	p, err := newProcessor(set)
	require.NoError(t, err)
	p.mirror = mirrorcache.DefaultExtension
	require.NoError(t, p.start(context.Background(), h.host))
	t.Cleanup(func() { require.NoError(t, p.shutdown(context.Background())) })

	project := fmt.Sprintf("prj_failing_%d", time.Now().UnixNano())
	stmts := append([]string{`set(event["p"], ParseJSON(event["raw"])) where event["raw"] != nil`}, doublings(30)...)
	h.put(t, mirror.Project{ID: project, Version: 1, Pipeline: mirror.Pipeline{Transforms: stmts}})
	big := `{"b":"` + strings.Repeat("a", 1000) + `"}`
	send := func(seq uint64) {
		ld, lrs := pipelinedata.New()
		for i := range uint64(5) {
			pipelinedata.Append(lrs, pipelinedata.Item{Body: []byte(`{"raw":"not json"}`), Signal: "event", Seq: seq + 2*i})
			pipelinedata.Append(lrs, pipelinedata.Item{Body: []byte(big), Signal: "event", Seq: seq + 2*i + 1})
		}
		_ = kept(t, p, request(project, nil), ld)
	}
	send(1)
	send(11)

	assert.Equal(t, int64(10), recordsBy(t, tt, "error"))
	assert.Equal(t, int64(10), recordsBy(t, tt, "too_large"))
	assert.Equal(t, 1, logs.FilterLevelExact(zap.WarnLevel).Len(), "one WARN for the version: %v", logs.FilterLevelExact(zap.WarnLevel).All())
	assert.Equal(t, project, logs.FilterLevelExact(zap.WarnLevel).All()[0].ContextMap()["project_id"])
	assert.GreaterOrEqual(t, logs.FilterLevelExact(zap.DebugLevel).FilterMessageSnippet("failed on them").Len()+
		logs.FilterLevelExact(zap.DebugLevel).FilterMessageSnippet("larger than the record limit").Len(), 10)

	// A new version of the pipeline, still failing, is worth telling once more.
	h.put(t, mirror.Project{ID: project, Version: 2, Pipeline: mirror.Pipeline{Transforms: stmts}})
	send(21)
	assert.Equal(t, 2, logs.FilterLevelExact(zap.WarnLevel).Len())
}
