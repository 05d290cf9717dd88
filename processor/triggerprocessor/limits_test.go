package triggerprocessor

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/components/mirror"
	"github.com/otelcol-svc/otelcol-svc/components/pipelinedata"
)

func doublings(n int) []string {
	stmts := make([]string, n)
	for i := range stmts {
		stmts[i] = `set(event["b"], Concat([event["b"], event["b"]], "")) where event["b"] != nil`
	}
	return stmts
}

// Issue 22: a saved pipeline of 30 doublings over a 1 KiB record made the pipeline process
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
