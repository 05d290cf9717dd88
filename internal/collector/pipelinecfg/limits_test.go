package pipelinecfg_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/mirrorcache"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelinecfg"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/validation"
)

// The data plane compiles no pipeline past the statement and length limits,
// whatever the control plane let through (an older one, or a mirror written by hand).
func TestCompileRefusesPastTheLimits(t *testing.T) {
	stmts := make([]string, validation.MaxStatements+1)
	for i := range stmts {
		stmts[i] = `set(event["b"], Concat([event["b"], event["b"]], ""))`
	}
	long := `body == "` + strings.Repeat("x", validation.MaxExpressionBytes) + `"`
	for _, tt := range []struct {
		p     mirror.Pipeline
		field string
		msg   string
	}{
		{mirror.Pipeline{Transforms: stmts}, "transforms", "101 statements; a pipeline has at most 100"},
		{mirror.Pipeline{Transforms: []string{`set(event["a"], 1)`, `set(event["x"], "` + strings.Repeat("x", 5000) + `")`}}, "transforms", "statement 1 is 5019 bytes long; an expression has at most 4096"},
		{mirror.Pipeline{Trigger: long}, "trigger", "bytes long; an expression has at most 4096"},
		{mirror.Pipeline{WindowEnabled: true, ContextFilter: long}, "context_filter", "at most 4096"},
		{mirror.Pipeline{WindowEnabled: true, GroupKey: long}, "group_key", "at most 4096"},
		{mirror.Pipeline{CooldownSeconds: 60, DedupKey: long}, "dedup_key", "at most 4096"},
	} {
		_, err := pipelinecfg.Compile(tt.p)
		fe, ok := pipelinecfg.IsFieldError(err)
		require.True(t, ok, "%v", err)
		assert.Equal(t, tt.field, fe.Field)
		assert.Contains(t, fe.Err.Error(), tt.msg)
	}

	// At the limits, a pipeline compiles.
	_, err := pipelinecfg.Compile(mirror.Pipeline{Transforms: stmts[:validation.MaxStatements],
		Trigger: `body == "` + strings.Repeat("x", validation.MaxExpressionBytes-11) + `"`})
	require.NoError(t, err)
}

// A pipeline saved before the statement, length and function limits
// existed no longer compiles after the upgrade, and its project pauses. The operator
// hears it once per project and configuration version, at WARN, with the limit; the
// checks repeated at every reconcile say nothing more.
func TestPipelineOverTheLimitsIsWarnedOncePerVersion(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	c := pipelinecfg.NewCache(mirrorcache.NewCache(zap.NewNop()))
	defer c.Close()
	c.SetLogger(zap.New(core))

	over := mirror.Project{ID: "prj_old", Version: 3, Pipeline: mirror.Pipeline{Transforms: make([]string, 101)}}
	for range 5 {
		err := c.Check(over)
		require.Error(t, err)
		assert.True(t, pipelinecfg.IsOverLimits(err))
	}
	grok := mirror.Project{ID: "prj_grok", Version: 1, Pipeline: mirror.Pipeline{
		Transforms: []string{`set(event["g"], ExtractGrokPatterns(body, "%{X}", false, ["X=%{WORD}"]))`}}}
	require.Error(t, c.Check(grok))
	require.Error(t, c.Check(grok))
	// A mistake of the ordinary kind is the user's, shown when saved: not logged here.
	require.Error(t, c.Check(mirror.Project{ID: "prj_typo", Version: 1, Pipeline: mirror.Pipeline{Trigger: `status ==`}}))

	warns := logs.FilterMessageSnippet("past the limits of this version").All()
	require.Len(t, warns, 2, "one per project and version")
	assert.Equal(t, zap.WarnLevel, warns[0].Level)
	assert.Equal(t, "prj_old", warns[0].ContextMap()["project_id"])
	assert.Contains(t, warns[0].ContextMap()["error"], "101 statements; a pipeline has at most 100")
	assert.Equal(t, "prj_grok", warns[1].ContextMap()["project_id"])
	assert.Contains(t, warns[1].ContextMap()["error"], `"ExtractGrokPatterns": pattern definitions are not allowed`)

	// The next version, still over, is said again.
	over.Version = 4
	require.Error(t, c.Check(over))
	assert.Len(t, logs.FilterMessageSnippet("past the limits of this version").All(), 3)
}
