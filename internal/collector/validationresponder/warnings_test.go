package validationresponder

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
	"github.com/otelcol-svc/otelcol-svc/internal/validation"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// A misspelt field and a number compared with a string validate
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
	// The first check of a project may answer before its catalog is read (a check waits
	// at most 300 ms for it, so a loaded machine can miss that); the read goes on and a
	// later check has the warnings, as a user typing sees them.
	var res validation.Result
	require.Eventually(t, func() bool {
		var err error
		res, err = validation.CheckProject(ctx, nc, project, p)
		require.NoError(t, err)
		require.True(t, res.OK, "warnings never make a pipeline invalid: %+v", res)
		return len(res.Warnings) > 0
	}, 10*time.Second, 50*time.Millisecond)
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

// A check waits for warnings at most warningsWait, and checks are answered side by side:
// while project B's records are slow to read (many large ones), a check of project A
// answers at once with its warnings, B's own check answers without warnings in time for
// the save, and B's next check, once the read finished, has them.
func TestASlowCatalogHoldsUpNoCheck(t *testing.T) {
	n := testenv.StartNATS(t)
	nc, js := testenv.Connect(t, n.URL())
	ctx := context.Background()
	c := newChecker(js)
	bStarted, releaseB := make(chan struct{}), make(chan struct{})
	var once sync.Once
	c.read = func(ctx context.Context, projectID string, take func([]byte)) error {
		if projectID == "p_slow" {
			once.Do(func() { close(bStarted) })
			select {
			case <-releaseB:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		take([]byte(`{"severityNumber":13,"body":"boom"}`))
		return nil
	}
	svc, err := micro.AddService(nc, micro.Config{Name: validation.ServiceName, Version: validation.Version,
		Endpoint: &micro.EndpointConfig{Subject: validation.Subject, Handler: micro.HandlerFunc(c.handle)}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = svc.Stop() })
	p := mirror.Pipeline{Trigger: "severty_number >= 17"}

	type answer struct {
		res  validation.Result
		err  error
		took time.Duration
	}
	bAnswer := make(chan answer, 1)
	go func() {
		start := time.Now()
		res, err := validation.CheckProject(ctx, nc, "p_slow", p)
		bAnswer <- answer{res, err, time.Since(start)}
	}()
	<-bStarted

	start := time.Now()
	res, err := validation.CheckProject(ctx, nc, "p_fast", p)
	took := time.Since(start)
	require.NoError(t, err)
	require.True(t, res.OK)
	require.Len(t, res.Warnings, 1, "A's catalog is read at once")
	assert.Less(t, took, warningsWait+200*time.Millisecond, "A's check does not wait behind B's read")

	b := <-bAnswer
	require.NoError(t, b.err)
	assert.Equal(t, validation.Result{OK: true}, b.res, "B's check answers, without warnings")
	assert.Less(t, b.took, catalogTime, "B's check does not wait for its catalog")

	close(releaseB)
	require.Eventually(t, func() bool {
		res, err := validation.CheckProject(ctx, nc, "p_slow", p)
		return err == nil && len(res.Warnings) == 1
	}, 5*time.Second, 20*time.Millisecond, "B's catalog, read in the background, warns on the next check")
}
