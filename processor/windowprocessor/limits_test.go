package windowprocessor

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

// Issue 22 in window mode: a record that 30 doublings would grow past the record limit
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
