package pipelinecfg_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/components/mirror"
	"github.com/otelcol-svc/otelcol-svc/components/pipelinecfg"
	"github.com/otelcol-svc/otelcol-svc/components/validation"
)

// Issue 22: the data plane compiles no pipeline past the statement and length limits,
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
