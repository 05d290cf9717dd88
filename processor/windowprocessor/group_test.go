package windowprocessor

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelinedata"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
)

// Each window call names its group, so the agent exporter can keep one group's calls in
// order while other groups go ahead.
func TestWindowCallCarriesItsGroup(t *testing.T) {
	h := newHarness(t)
	p := h.processor(t, false)
	project := fmt.Sprintf("prj_group_%d", time.Now().UnixNano())
	h.put(t, mirror.Project{ID: project, Version: 1, Pipeline: mirror.Pipeline{
		WindowEnabled: true, Trigger: `severity_number >= 17`, GroupKey: `resource_attributes["k8s.pod.name"]`}})

	ld := batch("pod-a", 17, 1, 1)
	b := batch("pod-b", 17, 1, 2)
	b.ResourceLogs().MoveAndAppendTo(ld.ResourceLogs())
	out, err := p.processLogs(request(project, nil), ld)
	require.NoError(t, err)
	var groups []string
	for lr := range pipelinedata.All(out) {
		groups = append(groups, pipelinedata.Read(lr).Group)
	}
	assert.Equal(t, []string{"pod-a", "pod-b"}, groups)
}
