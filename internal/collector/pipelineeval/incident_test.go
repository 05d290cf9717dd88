package pipelineeval_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelinecfg"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelineeval"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
)

func compileIncident(t testing.TB, p mirror.Pipeline) *pipelinecfg.Compiled {
	t.Helper()
	p.Mode = mirror.ModeIncident
	c, err := pipelinecfg.Compile(p)
	require.NoError(t, err)
	return c
}

func incident(t *testing.T, c *pipelinecfg.Compiled, body string) pipelineeval.IncidentResult {
	t.Helper()
	res, err := pipelineeval.New(pipelineeval.Options{MaxRecordBytes: 2000}).Incident(context.Background(), "prj", c, pipelineeval.Item{Seq: 1, Signal: "log", Body: []byte(body)})
	require.NoError(t, err)
	return res
}

var checkout = mirror.Pipeline{
	Trigger:       `severity_number >= 17`,
	ResolveWhen:   `body == "recovered"`,
	Fingerprint:   `resource_attributes["service.name"]`,
	ContextFilter: `attributes["noise"] == nil`,
}

func TestIncidentSaysWhatEachRecordDoes(t *testing.T) {
	c := compileIncident(t, checkout)
	require.NotNil(t, c.IncidentFields, "named fields only: decoded in part")

	res := incident(t, c, `{"severityNumber":17,"body":"timeout","resourceAttributes":{"service.name":"checkout"}}`)
	assert.True(t, res.Matched)
	assert.False(t, res.Resolves)
	assert.True(t, res.InContext)
	assert.Equal(t, "checkout", res.Fingerprint)
	assert.Equal(t, `{"severityNumber":17,"body":"timeout","resourceAttributes":{"service.name":"checkout"}}`, string(res.Body), "as stored")
	assert.Equal(t, "timeout", res.Title, "a log's body names its incident")

	res = incident(t, c, `{"severityNumber":9,"body":"recovered","resourceAttributes":{"service.name":"checkout"}}`)
	assert.False(t, res.Matched)
	assert.True(t, res.Resolves, "resolve_when is evaluated on records the trigger does not match")
	assert.Equal(t, "checkout", res.Fingerprint)

	res = incident(t, c, `{"severityNumber":9,"body":"ok","attributes":{"noise":1},"resourceAttributes":{"service.name":"cart"}}`)
	assert.False(t, res.Matched || res.Resolves || res.InContext)
	assert.Empty(t, res.Fingerprint, "a record nothing keeps needs no fingerprint")

	res = incident(t, c, `{"severityNumber":20,"body":"boom"}`)
	assert.True(t, res.Matched)
	assert.Equal(t, "", res.Fingerprint, "a record without the fingerprint's field shares the empty one")

	res = incident(t, compileIncident(t, mirror.Pipeline{}), `not even JSON`)
	assert.True(t, res.Matched && res.InContext, "an empty pipeline takes every record as it is")
	assert.Equal(t, "", res.Fingerprint)
	assert.Equal(t, "not even JSON", string(res.Body))

	res = incident(t, c, `{"severityNumber":`)
	assert.True(t, res.Skipped)
	assert.Equal(t, pipelineeval.StepRecord, res.Step)
}

// Transforms run first, as in window mode: the trigger, resolve_when and fingerprint
// read the transformed record, and calls carry it.
func TestIncidentTransformsComeFirst(t *testing.T) {
	c := compileIncident(t, mirror.Pipeline{
		Transforms:  []string{`set(event["svc"], resource_attributes["service.name"])`, `set(event["sev"], severity_number)`},
		Trigger:     `event["sev"] >= 17`,
		Fingerprint: `event["svc"]`,
	})
	res := incident(t, c, `{"severityNumber":17,"resourceAttributes":{"service.name":"checkout"}}`)
	assert.True(t, res.Matched)
	assert.Equal(t, "checkout", res.Fingerprint)
	assert.JSONEq(t, `{"severityNumber":17,"resourceAttributes":{"service.name":"checkout"},"svc":"checkout","sev":17}`, string(res.Body))

	grow := compileIncident(t, mirror.Pipeline{Transforms: []string{`set(event["p"], Concat([event["p"], event["p"], event["p"]], ""))`}})
	res = incident(t, grow, `{"p":"`+strings.Repeat("x", 900)+`"}`)
	assert.True(t, res.Skipped)
	assert.True(t, res.TooLarge, "dead-lettered as in the other modes")
	assert.False(t, res.Matched)
}

func TestIncidentTitle(t *testing.T) {
	for body, want := range map[string]string{
		`{"_event_type":"payment.failed","title":"Card declined","body":"x"}`: "Card declined",
		`{"_event_type":"payment.failed","status":"failed"}`:                  "payment.failed",
		`{"body":{"nested":true},"message":"  disk full  "}`:                  "disk full",
		`{"body":{"nested":true},"name":"GET /items"}`:                        "GET /items",
		// A push source's envelope: an Alertmanager alert's summary is its text.
		`{"_event_type":"alert.firing","_source":"am","text":"Disk almost full on db-1","labels":{},"payload":{"summary":"x"}}`: "Disk almost full on db-1",
		`{"body":""}`:     "fp",
		`not JSON at all`: "fp",
	} {
		assert.Equal(t, want, pipelineeval.IncidentTitle([]byte(body), "log", "fp"), body)
	}
	long := pipelineeval.IncidentTitle([]byte(fmt.Sprintf(`{"title":%q}`, strings.Repeat("ü", 2000))), "event", "")
	assert.LessOrEqual(t, len(long), 1024)
}

// A fingerprint may be any value of a record: a long one is cut, and two that differ
// only past the cut stay two incidents.
func TestLongFingerprintsAreBoundedAndDistinct(t *testing.T) {
	c := compileIncident(t, mirror.Pipeline{Fingerprint: `body`})
	long := strings.Repeat("é", 3000)
	a := incident(t, c, fmt.Sprintf(`{"body":%q}`, long+"a"))
	b := incident(t, c, fmt.Sprintf(`{"body":%q}`, long+"b"))
	assert.LessOrEqual(t, len(a.Fingerprint), pipelineeval.MaxFingerprintBytes)
	assert.True(t, strings.HasPrefix(a.Fingerprint, "éé"))
	assert.NotEqual(t, a.Fingerprint, b.Fingerprint)
	assert.Equal(t, "short", incident(t, c, `{"body":"short"}`).Fingerprint)
}

// Records decoded in part give the answers the whole record gives.
func TestIncidentPartialDecodeAgrees(t *testing.T) {
	recs := []string{
		`{"severityNumber":17,"body":"timeout","resourceAttributes":{"service.name":"checkout"},"attributes":{"x":[1,{"y":"}"}]}}`,
		`{"severityNumber":9,"body":"recovered","resourceAttributes":{"service.name":"checkout"}}`,
		`{"severityNumber":9,"body":"ok","attributes":{"noise":1},"resourceAttributes":{"service.name":"cart"}}`,
		`{"severityNumber":20,"body":"boom","big":12345678901234567890}`,
		`{"severityNumber":17,"resourceAttributes":{"host.name":"h","service.name":"a","service.name":"b"},"resource_attributes":{"service.name":"snake"}}`,
		`{"severityNumber":17,"resourceAttributes":"checkout","attributes":"x"}`,
		`{"severityNumber":9,"resource_attributes":{"service.name":{"nested":["x"]}},"attributes":{"noise":null}}`,
		`{}`,
	}
	for _, p := range []mirror.Pipeline{checkout, {Trigger: `IsMatch(body, "time(d)? ?out")`, Fingerprint: `Concat([body, "/"], "")`}} {
		part := compileIncident(t, p)
		require.NotNil(t, part.IncidentFields)
		whole := *part
		whole.IncidentFields = nil
		for _, r := range recs {
			assert.Equal(t, incident(t, &whole, r), incident(t, part, r), r)
		}
	}
}

// Incident mode reads what legacy mode reads and a little more (resolve_when, the
// fingerprint of the records it keeps): per record it stays close to legacy.
func BenchmarkIncidentVsLegacy(b *testing.B) {
	recs := make([][]byte, 100)
	for i := range recs {
		sev := 9
		if i%20 == 0 {
			sev = 17
		}
		recs[i] = []byte(fmt.Sprintf(`{"resourceAttributes":{"service.name":"svc-%d","host.name":"h"},"scope":{"name":"x"},"severityNumber":%d,"severityText":"INFO","body":"request %d handled in 12ms","attributes":{"http.status_code":200,"http.route":"/api/v1/items"},"traceId":"0123456789abcdef0123456789abcdef","spanId":"0123456789abcdef","timestamp":"2026-01-01T00:00:00Z"}`, i%5, sev, i))
	}
	legacy, err := pipelinecfg.Compile(mirror.Pipeline{Trigger: checkout.Trigger})
	require.NoError(b, err)
	// bench/pipeline's incident pipeline: every record is context, so each needs its
	// fingerprint.
	bench := compileIncident(b, mirror.Pipeline{Trigger: checkout.Trigger, Fingerprint: checkout.Fingerprint})
	full := compileIncident(b, mirror.Pipeline{Trigger: checkout.Trigger, ResolveWhen: checkout.ResolveWhen, Fingerprint: checkout.Fingerprint,
		ContextFilter: `severity_number >= 13`})
	e := pipelineeval.New(pipelineeval.Options{})
	ctx := context.Background()
	b.Run("legacy", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, err := e.Legacy(ctx, "prj", legacy, pipelineeval.Item{Signal: "log", Body: recs[i%len(recs)]}); err != nil {
				b.Fatal(err)
			}
		}
	})
	// ratio: both in alternating chunks of 1000, so that other work on the machine slows
	// both alike.
	b.Run("ratio", func(b *testing.B) {
		var tl, ti time.Duration
		for i := 0; i < b.N; i++ {
			start := time.Now()
			for j := 0; j < 1000; j++ {
				_, _ = e.Legacy(ctx, "prj", legacy, pipelineeval.Item{Signal: "log", Body: recs[j%len(recs)]})
			}
			mid := time.Now()
			for j := 0; j < 1000; j++ {
				_, _ = e.Incident(ctx, "prj", bench, pipelineeval.Item{Signal: "log", Body: recs[j%len(recs)]})
			}
			tl, ti = tl+mid.Sub(start), ti+time.Since(mid)
		}
		b.ReportMetric(float64(ti)/float64(tl), "incident/legacy")
	})
	for name, c := range map[string]*pipelinecfg.Compiled{"incident": bench, "incident_resolve_context": full} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if _, err := e.Incident(ctx, "prj", c, pipelineeval.Item{Signal: "log", Body: recs[i%len(recs)]}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
