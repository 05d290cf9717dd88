package incidentprocessor

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelinedata"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/principal"
	"github.com/otelcol-svc/otelcol-svc/internal/deliverylog"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/pipelinectx"
	"github.com/otelcol-svc/otelcol-svc/processor/incidentprocessor/internal/metadata"
	"github.com/otelcol-svc/otelcol-svc/processor/triggerprocessor"
)

// benchRecords are bench/pipeline's records in shape: flat logs of 8 services, 1% of
// them errors.
func benchRecords(n int) [][]byte {
	services := []string{"checkout", "payments", "cart", "frontend", "inventory", "shipping", "auth", "search"}
	out := make([][]byte, n)
	for i := range out {
		sev := 9
		if i%100 == 0 {
			sev = 17
		}
		out[i] = fmt.Appendf(nil, `{"timestamp":"2026-01-01T00:00:00Z","severity_number":%d,"severity_text":"INFO","body":"upstream responded slowly, retrying with exponential backoff",`+
			`"resource_attributes":{"service.name":%q,"k8s.pod.name":"pod-1234","k8s.namespace.name":"shop-production","host.name":"ip-10-0-1-2","deployment.environment":"production"},`+
			`"attributes":{"http.route":"/api/v1/orders","http.method":"GET","http.status_code":200,"user.id":"u-1","region":"eu-west-1","retry":0},`+
			`"traceId":"0af7651916cd43dd8448eb211c80319c","spanId":"b7ad6b7169203331"}`, sev, services[(i/100+i)%len(services)])
	}
	return out
}

// drive sends batches of 500 of recs to c for project, numbering them on.
func drive(b *testing.B, c consumer.Logs, project string, recs [][]byte) {
	b.ResetTimer()
	seq := uint64(1)
	for range b.N {
		ld, lrs := pipelinedata.New()
		for i := range 500 {
			pipelinedata.Append(lrs, pipelinedata.Item{Body: recs[(int(seq)+i)%len(recs)], Signal: "log", Seq: seq + uint64(i)})
		}
		seq += 500
		ctx := pipelinectx.WithOutcome(principal.NewContext(context.Background(), principal.Principal{ProjectID: project}), deliverylog.NewOutcome())
		if err := c.ConsumeLogs(ctx, ld); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*500), "ns/record")
}

// BenchmarkBatch is incident mode's per-record path as bench/pipeline drives it (the
// events' incidents in a real NATS, context in memory), beside legacy mode's trigger
// processor on the same records: the pipeline's records/s in incident mode are to be at
// least 0.9 of legacy's.
func BenchmarkBatch(b *testing.B) {
	e := newEnv(b)
	recs := benchRecords(10_000)
	for _, redis := range []string{"", redisURL()} {
		name := "incident"
		if redis != "" {
			name = "incident_redis"
		}
		b.Run(name, func(b *testing.B) { benchIncident(b, e, recs, redis) })
	}
	b.Run("legacy", func(b *testing.B) {
		project := projectID("benchlegacy")
		e.put(b, mirror.Project{ID: project, Pipeline: mirror.Pipeline{AgentEndpointURL: "http://127.0.0.1:1", Trigger: "severity_number >= 17"}})
		f := triggerprocessor.NewFactory()
		proc, err := f.CreateLogs(context.Background(), processortest.NewNopSettings(f.Type()), f.CreateDefaultConfig(), consumertest.NewNop())
		require.NoError(b, err)
		require.NoError(b, proc.Start(context.Background(), e.host))
		defer func() { require.NoError(b, proc.Shutdown(context.Background())) }()
		drive(b, proc, project, recs)
	})
}

func benchIncident(b *testing.B, e *env, recs [][]byte, redis string) {
	project := projectID("bench")
	e.put(b, mirror.Project{ID: project, Pipeline: mirror.Pipeline{AgentEndpointURL: "http://127.0.0.1:1", Mode: mirror.ModeIncident,
		Trigger: "severity_number >= 17", Fingerprint: `resource_attributes["service.name"]`, GroupWait: "1h", GroupInterval: "1h"}})
	cfg := createDefaultConfig().(*Config)
	cfg.NATS.URL = e.nats.URL()
	cfg.RedisURL = redis
	proc, err := NewFactory().CreateLogs(context.Background(), processortest.NewNopSettings(metadata.Type), cfg, consumertest.NewNop())
	require.NoError(b, err)
	require.NoError(b, proc.Start(context.Background(), e.host))
	defer func() { require.NoError(b, proc.Shutdown(context.Background())) }()
	drive(b, proc, project, recs)
}
