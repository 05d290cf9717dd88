package triggerprocessor

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelinedata"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
)

// An incident-mode project's records pass untouched: the incident processor after this
// one takes them, matching or not (resolve_when and the context need the others).
func TestIncidentModePassesUntouched(t *testing.T) {
	h := newHarness(t)
	p := h.processor(t, false)
	project := fmt.Sprintf("prj_incident_%d", time.Now().UnixNano())
	h.put(t, mirror.Project{ID: project, Version: 1, Pipeline: mirror.Pipeline{Mode: mirror.ModeIncident,
		Trigger: `severity_number >= 17`, Transforms: []string{`set(event["seen"], true)`}, CooldownSeconds: 60}})
	in := batch("pod-a", 9, 3, 1)
	b := batch("pod-a", 17, 3, 4)
	b.ResourceLogs().MoveAndAppendTo(in.ResourceLogs())
	var want []pipelinedata.Item
	for lr := range pipelinedata.All(in) {
		want = append(want, pipelinedata.Read(lr))
	}
	got := kept(t, p, request(project, nil), in)
	require.Len(t, got, 6, "none dropped, none held back by a cooldown")
	for i, it := range got {
		assert.Equal(t, want[i].Seq, it.Seq)
		assert.Equal(t, string(want[i].Body), string(it.Body), "not transformed here")
		assert.Zero(t, it.Suppressed)
	}
}
