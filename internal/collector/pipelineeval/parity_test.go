package pipelineeval_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/otelcol-svc/otelcol-svc/internal/agentbody"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/dryrun"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/lifecyclehost"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/mirrorcache"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/natsclient"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelinecfg"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelinedata"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/principal"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/processor/triggerprocessor"
	"github.com/otelcol-svc/otelcol-svc/processor/windowprocessor"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// The dry run announces the calls the pipeline makes: the same records through the dry
// run and through the real processors (built from their factories, the mirror on
// in-process NATS, windows in a real window store) make the same agent calls, in the
// same order, with the same windows, in both modes.

// redisURL is the machine's Redis, database 13 of the processors' tests.
func redisURL() string {
	if u := os.Getenv("REDIS_URL"); u != "" {
		return u
	}
	return "redis://127.0.0.1:6379/13"
}

type env struct {
	host   component.Host
	mirror *mirror.Store
	cache  *mirrorcache.Cache
}

func newEnv(t *testing.T) *env {
	t.Helper()
	host := lifecyclehost.New(t)
	cache, err := mirrorcache.FromHost(host, mirrorcache.DefaultExtension)
	require.NoError(t, err)
	_, js := testenv.Connect(t, host[natsclient.DefaultExtension].(natsclient.Embedded).ClientURL())
	store, err := mirror.Open(context.Background(), js, 1)
	require.NoError(t, err)
	return &env{host: host, mirror: store, cache: cache}
}

func (e *env) put(t *testing.T, p mirror.Project) {
	t.Helper()
	require.NoError(t, e.mirror.PutProject(context.Background(), p))
	require.Eventually(t, func() bool {
		got, ok := e.cache.Project(p.ID)
		return ok && got.Version == p.Version
	}, 10*time.Second, 10*time.Millisecond)
}

// pipelineProcessors are the pipeline's two processors as the collector chains them:
// trigger, then window, then sink (where the agent exporter would be).
func (e *env) pipelineProcessors(t *testing.T, redis string) (processor.Logs, *consumertest.LogsSink) {
	t.Helper()
	ctx := context.Background()
	sink := new(consumertest.LogsSink)
	wf := windowprocessor.NewFactory()
	wcfg := wf.CreateDefaultConfig().(*windowprocessor.Config)
	wcfg.RedisURL = redis
	w, err := wf.CreateLogs(ctx, processortest.NewNopSettings(wf.Type()), wcfg, sink)
	require.NoError(t, err)
	tf := triggerprocessor.NewFactory()
	tcfg := tf.CreateDefaultConfig().(*triggerprocessor.Config)
	tcfg.RedisURL = redis
	tp, err := tf.CreateLogs(ctx, processortest.NewNopSettings(tf.Type()), tcfg, w)
	require.NoError(t, err)
	require.NoError(t, w.Start(ctx, e.host))
	require.NoError(t, tp.Start(ctx, e.host))
	t.Cleanup(func() {
		require.NoError(t, tp.Shutdown(ctx))
		require.NoError(t, w.Shutdown(ctx))
	})
	return tp, sink
}

// records are the trial's records: matches and misses, records the transforms change,
// one a transform grows past the record limit, one that is not JSON, several groups
// whose windows hold records that did not trigger.
func records(now time.Time) []dryrun.Record {
	var out []dryrun.Record
	big := strings.Repeat("x", 600)
	for i := 1; i <= 40; i++ {
		body := fmt.Sprintf(`{"n":%d,"severityNumber":%d,"resourceAttributes":{"k8s.pod.name":"pod-%d"},"body":"event %d"}`, i, 9+8*(i%3/2), i%2, i)
		switch {
		case i == 7:
			body = `{"n":7,"severityNumber":17,"grow":"` + big + `"}`
		case i == 13:
			body = `not json at all`
		case i%5 == 0:
			body = fmt.Sprintf(`{"n":%d,"severityNumber":17,"noise":true}`, i)
		}
		out = append(out, dryrun.Record{Seq: uint64(i), Time: now, Signal: "log", Data: []byte(body)})
	}
	return out
}

// grow doubles "grow" until the record passes the record limit (max_record_bytes,
// 1,000,000 by default): statement 12 of 14 fails.
func grow() []string {
	stmts := []string{`set(event["seen"], true)`}
	for range 13 {
		stmts = append(stmts, `set(event["grow"], Concat([event["grow"], event["grow"]], "")) where event["grow"] != nil`)
	}
	return stmts
}

// viaProcessors sends recs in batches of batchRecords through the processors and
// returns the agent calls their output makes, as the agent exporter builds them
// without a call-bytes limit: records in arrays of batch_size within a batch, a window
// call alone, a dead-lettered record a barrier.
func viaProcessors(t *testing.T, p processor.Logs, sink *consumertest.LogsSink, project string, c *pipelinecfg.Compiled, recs []dryrun.Record, batchRecords int) []string {
	t.Helper()
	ctx := principal.NewContext(context.Background(), principal.Principal{ProjectID: project, Scope: "pipeline"})
	sink.Reset()
	var calls []string
	for start := 0; start < len(recs); start += batchRecords {
		ld, lrs := pipelinedata.New()
		for _, r := range recs[start:min(start+batchRecords, len(recs))] {
			pipelinedata.Append(lrs, pipelinedata.Item{Body: r.Data, Signal: r.Signal, Seq: r.Seq})
		}
		require.NoError(t, p.ConsumeLogs(ctx, ld))
		// A batch whose records all dropped reaches no exporter.
		for _, out := range sink.AllLogs() {
			calls = append(calls, agentCalls(out, c.BatchSize)...)
		}
		sink.Reset()
	}
	return calls
}

func agentCalls(ld plog.Logs, size int) []string {
	var calls []string
	var batch [][]byte
	flush := func() {
		if len(batch) > 0 {
			calls = append(calls, string(agentbody.Array(batch)))
			batch = nil
		}
	}
	for lr := range pipelinedata.All(ld) {
		it := pipelinedata.Read(lr)
		switch it.Kind {
		case pipelinedata.KindFailed:
			flush()
		case pipelinedata.KindWindowCall:
			flush()
			calls = append(calls, string(it.Body))
		default:
			batch = append(batch, it.Body)
			if len(batch) >= size {
				flush()
			}
		}
	}
	flush()
	return calls
}

// viaDryRun evaluates recs in the same batches.
func viaDryRun(t *testing.T, c *pipelinecfg.Compiled, recs []dryrun.Record, batchRecords int) []string {
	t.Helper()
	ev := dryrun.New(context.Background(), c, dryrun.Limits{EvalTime: time.Minute, CallBytes: 64 << 20, RecordBytes: 64 << 20, Errors: 100})
	for i, r := range recs {
		if i > 0 && i%batchRecords == 0 {
			ev.Flush()
		}
		require.True(t, ev.Add(r))
	}
	a := ev.Answer()
	require.False(t, a.TimedOut)
	require.Zero(t, a.CallsLeftOut)
	calls := make([]string, len(a.Calls))
	for i, c := range a.Calls {
		calls[i] = string(c)
	}
	return calls
}

func TestDryRunMakesThePipelinesCalls(t *testing.T) {
	e := newEnv(t)
	pipelines := map[string]mirror.Pipeline{
		"batch": {Trigger: `severity_number >= 17`, Transforms: grow(), BatchSize: 3},
		"window": {WindowEnabled: true, Trigger: `severity_number >= 17`, Transforms: grow(),
			ContextFilter: `event["noise"] == nil`, GroupKey: `resource_attributes["k8s.pod.name"]`,
			WindowDurationSeconds: 3600, WindowMaxEvents: 4},
	}
	for _, store := range []string{"memory", "redis"} {
		for mode, pl := range pipelines {
			t.Run(store+"/"+mode, func(t *testing.T) {
				redis := ""
				if store == "redis" {
					redis = redisURL()
				}
				p, sink := e.pipelineProcessors(t, redis)
				project := fmt.Sprintf("prj_parity_%s_%s_%d", store, mode, time.Now().UnixNano())
				e.put(t, mirror.Project{ID: project, Version: 1, Pipeline: pl})
				c, err := pipelinecfg.Compile(pl)
				require.NoError(t, err)
				recs := records(time.Now())

				want := viaProcessors(t, p, sink, project, c, recs, 7)
				got := viaDryRun(t, c, recs, 7)
				require.NotEmpty(t, want)
				assert.Equal(t, want, got)

				// The trial is not trivially agreeing: it has calls of several records
				// (batch) or windows of earlier records (window), transformed.
				joined := strings.Join(got, "\n")
				assert.Contains(t, joined, `"seen":true`)
				if mode == "window" {
					assert.Contains(t, joined, `"window":[{`)
					assert.Contains(t, joined, `"window_truncated"`)
				} else {
					assert.Contains(t, joined, `},{`)
				}
			})
		}
	}
}
