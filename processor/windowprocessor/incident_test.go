package windowprocessor

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelinedata"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
)

// An incident-mode project's records pass untouched, even with window_enabled left
// set: no window call, nothing kept in the window store; the incident processor after
// this one takes them.
func TestIncidentModePassesUntouched(t *testing.T) {
	h := newHarness(t)
	p := h.processor(t, false)
	project := fmt.Sprintf("prj_incident_%d", time.Now().UnixNano())
	h.put(t, mirror.Project{ID: project, Version: 1, Pipeline: mirror.Pipeline{Mode: mirror.ModeIncident, WindowEnabled: true,
		Trigger: `severity_number >= 17`}})
	in := batch("pod-a", 17, 4, 1)
	out, err := p.processLogs(request(project, nil), in)
	require.NoError(t, err)
	var seqs []uint64
	for lr := range pipelinedata.All(out) {
		it := pipelinedata.Read(lr)
		assert.Equal(t, pipelinedata.KindRecord, it.Kind, "a record, not a window call")
		seqs = append(seqs, it.Seq)
	}
	assert.Equal(t, []uint64{1, 2, 3, 4}, seqs)
	_, total, err := p.store.Window(context.Background(), project, "", time.Now().Add(-time.Hour), 10)
	require.NoError(t, err)
	assert.Zero(t, total, "no window kept")
}
