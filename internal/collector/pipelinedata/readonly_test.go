package pipelinedata_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/otelcol-svc/otelcol-svc/internal/agentbody"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/lifecyclehost"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/mirrorcache"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/natsclient"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelinecfg"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelinedata"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelineeval"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/principal"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/windowstore"
	"github.com/otelcol-svc/otelcol-svc/processor/triggerprocessor"
	"github.com/otelcol-svc/otelcol-svc/processor/windowprocessor"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// A batch's bodies are the NATS messages' own bytes, shared (as a string) all the way to
// the agent call; when a body was a string literal they are read-only memory. So no
// stage may write into them: the trigger with transforms, window mode, incident mode,
// the window store and the agent exporter's call building all run here over bodies cut
// from one buffer, which must come out unchanged. An in-place edit (append(x[:0], ...)
// on a pooled struct, a transform writing through) shows here.
func TestNoStageWritesIntoTheRecordsBytes(t *testing.T) {
	host := lifecyclehost.New(t)
	cache, err := mirrorcache.FromHost(host, mirrorcache.DefaultExtension)
	require.NoError(t, err)
	_, js := testenv.Connect(t, host[natsclient.DefaultExtension].(natsclient.Embedded).ClientURL())
	store, err := mirror.Open(context.Background(), js, 1)
	require.NoError(t, err)

	transforms := []string{
		`set(event["seen"], true)`,
		`replace_pattern(event["body"], "event", "EVENT")`,
		`delete_key(event, "noise")`,
	}
	pipelines := map[string]mirror.Pipeline{
		"legacy": {Trigger: `severity_number >= 17`, Transforms: transforms, BatchSize: 3},
		"window": {WindowEnabled: true, Trigger: `severity_number >= 17`, Transforms: transforms,
			ContextFilter: `event["skip"] == nil`, GroupKey: `resource_attributes["k8s.pod.name"]`,
			WindowDurationSeconds: 3600, WindowMaxEvents: 4},
	}

	// The bodies as a message buffer holds them: one after another, headers before.
	var buf []byte
	var spans [][2]int
	buf = append(buf, "NATS/1.0\r\nSvc-Signal: log\r\n\r\n"...)
	for i := 1; i <= 30; i++ {
		body := fmt.Sprintf(`{"n":%d,"severityNumber":%d,"resourceAttributes":{"k8s.pod.name":"pod-%d","service.name":"svc-%d"},"body":"event %d","noise":%d}`,
			i, 9+8*(i%3/2), i%2, i%3, i, i)
		if i == 11 {
			body = `not json`
		}
		spans = append(spans, [2]int{len(buf), len(buf) + len(body)})
		buf = append(buf, body...)
	}
	before := bytes.Clone(buf)
	items := func() []pipelinedata.Item {
		var out []pipelinedata.Item
		for i, s := range spans {
			out = append(out, pipelinedata.Item{Body: buf[s[0]:s[1]:s[1]], Signal: "log", Seq: uint64(i + 1)})
		}
		return out
	}

	var calls int
	for mode, pl := range pipelines {
		project := fmt.Sprintf("prj_readonly_%s_%d", mode, time.Now().UnixNano())
		require.NoError(t, store.PutProject(context.Background(), mirror.Project{ID: project, Version: 1, Pipeline: pl}))
		require.Eventually(t, func() bool { _, ok := cache.Project(project); return ok }, 10*time.Second, 10*time.Millisecond)

		ctx := context.Background()
		sink := new(consumertest.LogsSink)
		wf := windowprocessor.NewFactory()
		w, err := wf.CreateLogs(ctx, processortest.NewNopSettings(wf.Type()), wf.CreateDefaultConfig(), sink)
		require.NoError(t, err)
		tf := triggerprocessor.NewFactory()
		tp, err := tf.CreateLogs(ctx, processortest.NewNopSettings(tf.Type()), tf.CreateDefaultConfig(), w)
		require.NoError(t, err)
		require.NoError(t, w.Start(ctx, host))
		require.NoError(t, tp.Start(ctx, host))

		pctx := principal.NewContext(ctx, principal.Principal{ProjectID: project, Scope: "pipeline"})
		all := items()
		for start := 0; start < len(all); start += 7 {
			ld, lrs := pipelinedata.New()
			for _, it := range all[start:min(start+7, len(all))] {
				pipelinedata.Append(lrs, it)
			}
			require.NoError(t, tp.ConsumeLogs(pctx, ld))
		}
		for _, out := range sink.AllLogs() {
			calls += len(agentCalls(out))
		}
		require.NoError(t, tp.Shutdown(ctx))
		require.NoError(t, w.Shutdown(ctx))
	}
	require.NotZero(t, calls, "the trial made agent calls")

	// Incident mode: evaluated, and its context records kept in the window store as the
	// incident processor keeps them.
	c, err := pipelinecfg.Compile(mirror.Pipeline{Mode: mirror.ModeIncident, Trigger: `severity_number >= 17`,
		Transforms: transforms[:1], Fingerprint: `resource_attributes["service.name"]`, ContextFilter: `event["skip"] == nil`})
	require.NoError(t, err)
	cPartial, err := pipelinecfg.Compile(mirror.Pipeline{Mode: mirror.ModeIncident, Trigger: `severity_number >= 17`,
		Fingerprint: `resource_attributes["service.name"]`})
	require.NoError(t, err)
	ws := windowstore.NewMemory(time.Minute)
	t.Cleanup(func() { _ = ws.Close() })
	ev := pipelineeval.New(pipelineeval.Options{})
	var adds []windowstore.Entry
	for _, cc := range []*pipelinecfg.Compiled{c, cPartial} {
		for _, it := range items() {
			res, err := ev.Incident(context.Background(), "prj", cc, pipelineeval.Item{Seq: it.Seq, Signal: it.Signal, Body: it.Body, Time: time.Now()})
			require.NoError(t, err)
			if res.InContext && len(res.Body) > 0 {
				adds = append(adds, windowstore.Entry{Group: res.Fingerprint, Seq: it.Seq, Rec: res.Body})
				agentbody.Marker(res.Body)
			}
		}
	}
	require.NotEmpty(t, adds)
	require.NoError(t, ws.AddBatch(context.Background(), "prj", time.Now(), time.Minute, adds))

	require.True(t, bytes.Equal(before, buf), "a stage wrote into the records' bytes:\nbefore %s\nafter  %s",
		strings.ToValidUTF8(string(before), "?"), strings.ToValidUTF8(string(buf), "?"))
}

// agentCalls builds the calls the agent exporter would: arrays of records, a window
// call alone, a failed record as its marker.
func agentCalls(ld plog.Logs) [][]byte {
	var calls, batch [][]byte
	for lr := range pipelinedata.All(ld) {
		it := pipelinedata.Read(lr)
		switch it.Kind {
		case pipelinedata.KindFailed:
			calls = append(calls, agentbody.Marker(it.Body))
		case pipelinedata.KindWindowCall:
			calls = append(calls, it.Body)
		default:
			batch = append(batch, it.Body)
		}
	}
	if len(batch) > 0 {
		calls = append(calls, agentbody.Array(batch))
	}
	return calls
}
