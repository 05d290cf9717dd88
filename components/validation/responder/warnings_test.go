package responder

import (
	"context"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/components/mirror"
	"github.com/otelcol-svc/otelcol-svc/components/streams"
	"github.com/otelcol-svc/otelcol-svc/components/testenv"
	"github.com/otelcol-svc/otelcol-svc/components/validation"
)

// Issue 23 finding 7: a misspelt field and a number compared with a string validate
// and never match. The check of a project's pipeline warns about both, at the field's
// position, from the project's stored records, and the pipeline stays valid.
func TestCheckProjectWarnsAboutFieldsOverNATS(t *testing.T) {
	n := testenv.StartNATS(t)
	nc, _ := testenv.Connect(t, n.URL())
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	ctx := context.Background()
	const project = "p_warnings"
	require.NoError(t, streams.Create(ctx, js, streams.RawConfig(project, streams.DefaultLimits())))
	for i := range 5 {
		_, err := js.Publish(ctx, streams.RawSubject(project), fmt.Appendf(nil,
			`{"severityNumber":%d,"severityText":"ERROR","body":"boom","attributes":{"http.status":"500","retries":3}}`, 13+i))
		require.NoError(t, err)
	}

	svc, err := Start(nc, WithJetStream(js))
	require.NoError(t, err)
	t.Cleanup(func() { _ = svc.Stop() })

	p := mirror.Pipeline{
		Trigger:    "severty_number >= 17 or\nseverity_number >= \"high\" or attributes[\"http.status\"] == 500",
		Transforms: []string{`set(event["team"], "a")`, `set(event["x"], attributes["retries"]) where event["team"] == "a" and attributes["retrys"] > 1`},
	}
	res, err := validation.CheckProject(ctx, nc, project, p)
	require.NoError(t, err)
	require.True(t, res.OK, "warnings never make a pipeline invalid: %+v", res)
	one := 1
	assert.Equal(t, []validation.Warning{
		{Field: "trigger", Position: &validation.Position{Line: 1, Column: 1},
			Message: "no field named severty_number in the project's last 5 records; did you mean severity_number?"},
		{Field: "trigger", Position: &validation.Position{Line: 2, Column: 1},
			Message: "compared with a string, but severity_number is a number in the project's records: it never matches; write the number without quotes"},
		{Field: "trigger", Position: &validation.Position{Line: 2, Column: 30},
			Message: `compared with a number, but attributes["http.status"] is a string in the project's records: it never matches; quote the value, or convert the field with Int() or Double()`},
		{Field: "transforms", Index: &one, Position: &validation.Position{Line: 1, Column: 71},
			Message: `no field named attributes["retrys"] in the project's last 5 records; did you mean attributes["retries"]?`},
	}, res.Warnings)

	// The same pipeline of a project without records, or checked without a project (an
	// older control plane), warns about nothing.
	res, err = validation.CheckProject(ctx, nc, "p_empty", p)
	require.NoError(t, err)
	assert.True(t, res.OK)
	assert.Empty(t, res.Warnings)
	res, err = validation.Check(ctx, nc, p)
	require.NoError(t, err)
	assert.Equal(t, validation.Result{OK: true}, res)

	// A correct pipeline has no warnings.
	res, err = validation.CheckProject(ctx, nc, project, mirror.Pipeline{Trigger: `severity_number >= 17 and attributes["http.status"] == "500"`, GroupKey: "severity_text"})
	require.NoError(t, err)
	assert.Equal(t, validation.Result{OK: true}, res)
}
