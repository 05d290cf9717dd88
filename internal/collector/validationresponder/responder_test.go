package validationresponder

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/validation"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

func TestCheckOverNATS(t *testing.T) {
	n := testenv.StartNATS(t)
	nc, _ := testenv.Connect(t, n.URL())
	ctx := context.Background()

	// No collector running: the control plane must hear "unavailable", not "valid".
	_, err := validation.Check(ctx, nc, mirror.Pipeline{Trigger: `status == "x"`})
	require.ErrorIs(t, err, validation.ErrUnavailable)
	// Past the statement and length limits it is refused without asking: such
	// a pipeline may not even fit in a NATS message.
	res, err := validation.Check(ctx, nc, mirror.Pipeline{Transforms: make([]string, validation.MaxStatements+1)})
	require.NoError(t, err)
	assert.Equal(t, validation.Result{Field: "transforms", Message: "101 statements; a pipeline has at most 100"}, res)
	res, err = validation.Check(ctx, nc, mirror.Pipeline{GroupKey: string(make([]byte, 2<<20))})
	require.NoError(t, err)
	assert.Equal(t, "group_key", res.Field)

	svc, err := Start(nc)
	require.NoError(t, err)
	t.Cleanup(func() { _ = svc.Stop() })

	res, err = validation.Check(ctx, nc, mirror.Pipeline{Trigger: `severity_number >= 17`, GroupKey: "traceId"})
	require.NoError(t, err)
	assert.Equal(t, validation.Result{OK: true}, res)

	res, err = validation.Check(ctx, nc, mirror.Pipeline{Trigger: `status == "x"`, Transforms: []string{`set(event["a"], 1`}})
	require.NoError(t, err)
	assert.False(t, res.OK)
	assert.Equal(t, "transforms", res.Field)
	assert.NotEmpty(t, res.Message)

	res, err = validation.Check(ctx, nc, mirror.Pipeline{BatchSize: 5000})
	require.NoError(t, err)
	assert.Equal(t, validation.Result{Field: "batch_size", Message: "must be between 1 and 1000, got 5000"}, res)

	res, err = validation.Check(ctx, nc, mirror.Pipeline{CooldownSeconds: 60, DedupKey: `resource_attributes["k8s.pod.name"`})
	require.NoError(t, err)
	assert.False(t, res.OK, "the dedup key is compiled as the data plane will run it")
	assert.Equal(t, "dedup_key", res.Field)
	assert.Contains(t, res.Message, "resource_attributes")

	res, err = validation.Check(ctx, nc, mirror.Pipeline{CooldownSeconds: 90000})
	require.NoError(t, err)
	assert.Equal(t, "cooldown_seconds", res.Field)

	// A second collector joins the queue group; any one answers, exactly once.
	nc2, _ := testenv.Connect(t, n.URL())
	svc2, err := Start(nc2)
	require.NoError(t, err)
	t.Cleanup(func() { _ = svc2.Stop() })
	for range 4 {
		res, err = validation.Check(ctx, nc, mirror.Pipeline{Trigger: `body == "x"`})
		require.NoError(t, err)
		assert.True(t, res.OK)
	}
}

// Every data-plane process answers saves by compiling, so a statement
// that expands while compiling (grok pattern definitions referring to themselves ran a
// process out of memory) is refused by name, and the process stays well.
func TestCheckRefusesFunctionsThatExpand(t *testing.T) {
	res := Check(mirror.Pipeline{Transforms: []string{`set(event["a"], 1)`, `set(event["g"], ExtractGrokPatterns(b, "%{X}", false, ["X=%{X}%{X}"]))`}})
	assert.False(t, res.OK)
	assert.Equal(t, "transforms", res.Field)
	assert.Contains(t, res.Message, `statement 1`)
	assert.Contains(t, res.Message, `"ExtractGrokPatterns": pattern definitions are not allowed`)

	res = Check(mirror.Pipeline{Trigger: `Len(GetXML(body, "//*")) > 0`})
	assert.Equal(t, "trigger", res.Field)
	assert.Contains(t, res.Message, `"GetXML" is not available in pipelines`)
}
