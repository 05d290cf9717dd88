package windowprocessor

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/lifecyclehost"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/mirrorcache"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/natsclient"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelinedata"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/principal"
	"github.com/otelcol-svc/otelcol-svc/internal/deliverylog"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/pipelinectx"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
	"github.com/otelcol-svc/otelcol-svc/processor/windowprocessor/internal/metadata"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// redisURL is the machine's Redis, database 13 of these tests (projects are fresh ids).
func redisURL() string {
	if u := os.Getenv("REDIS_URL"); u != "" {
		return u
	}
	return "redis://127.0.0.1:6379/13"
}

// harness is the real collector host (embedded NATS, configmirror and its mirror) and a
// writer for the mirror, as the control plane writes it.
type harness struct {
	host   lifecyclehost.Host
	mirror *mirror.Store
	cache  *mirrorcache.Cache
	js     jetstream.JetStream
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	host := lifecyclehost.New(t)
	m, err := mirrorcache.FromHost(host, mirrorcache.DefaultExtension)
	require.NoError(t, err)
	_, js := testenv.Connect(t, host[natsclient.DefaultExtension].(natsclient.Embedded).ClientURL())
	store, err := mirror.Open(context.Background(), js, 1)
	require.NoError(t, err)
	return &harness{host: host, mirror: store, cache: m, js: js}
}

func (h *harness) put(t *testing.T, p mirror.Project) {
	t.Helper()
	require.NoError(t, h.mirror.PutProject(context.Background(), p))
	require.Eventually(t, func() bool {
		got, ok := h.cache.Project(p.ID)
		return ok && got.Version == p.Version
	}, 10*time.Second, 10*time.Millisecond)
}

// processor starts a window processor on the harness, with the Redis store or in memory.
func (h *harness) processor(t *testing.T, redis bool) *windowProcessor {
	t.Helper()
	cfg := createDefaultConfig().(*Config)
	if redis {
		cfg.RedisURL = redisURL()
	}
	p, err := newProcessor(cfg, processortest.NewNopSettings(metadata.Type))
	require.NoError(t, err)
	require.NoError(t, p.start(context.Background(), h.host))
	t.Cleanup(func() { require.NoError(t, p.shutdown(context.Background())) })
	return p
}

// settled is the project's ledger after settling each batch's outcome, as the JetStream
// receiver does.
func (h *harness) settled(t *testing.T, project string, batches map[*deliverylog.Outcome][]uint64) deliverylog.LedgerView {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, streams.Create(ctx, h.js, streams.RawConfig(project, streams.DefaultLimits())))
	_, err := h.js.CreateOrUpdateConsumer(ctx, streams.RawStream(project), jetstream.ConsumerConfig{Durable: "svc-pipeline", AckPolicy: jetstream.AckExplicitPolicy})
	require.NoError(t, err)
	l, err := deliverylog.OpenLedger(ctx, h.js, time.Hour)
	require.NoError(t, err)
	defer func() { require.NoError(t, l.Close(ctx)) }()
	for o, seqs := range batches {
		require.NoError(t, l.Settle(ctx, project, seqs, o))
	}
	v, err := deliverylog.View(ctx, h.js, project, deliverylog.ViewOptions{PipelineDurable: "svc-pipeline"})
	require.NoError(t, err)
	return v
}

func request(project string, o *deliverylog.Outcome) context.Context {
	ctx := principal.NewContext(context.Background(), principal.Principal{ProjectID: project, Scope: "pipeline"})
	return pipelinectx.WithOutcome(ctx, o)
}

// batch is records of one pod, severity sev, numbered from seq on.
func batch(pod string, sev, n int, seq uint64) plog.Logs {
	ld, lrs := pipelinedata.New()
	for i := 0; i < n; i++ {
		body := fmt.Sprintf(`{"severityNumber":%d,"resourceAttributes":{"k8s.pod.name":%q},"body":"event %d"}`, sev, pod, seq+uint64(i))
		pipelinedata.Append(lrs, pipelinedata.Item{Body: []byte(body), Signal: "log", Seq: seq + uint64(i)})
	}
	return ld
}

type call struct {
	Trigger         json.RawMessage   `json:"trigger"`
	Window          []json.RawMessage `json:"window"`
	WindowTruncated int               `json:"window_truncated"`
	Suppressed      int64             `json:"suppressed"`
}

func calls(t *testing.T, ld plog.Logs) []call {
	t.Helper()
	var out []call
	for lr := range pipelinedata.All(ld) {
		it := pipelinedata.Read(lr)
		require.Equal(t, pipelinedata.KindWindowCall, it.Kind)
		var c call
		require.NoError(t, json.Unmarshal(it.Body, &c), "%s", it.Body)
		out = append(out, c)
	}
	return out
}

func run(t *testing.T, p *windowProcessor, ctx context.Context, ld plog.Logs) []call {
	t.Helper()
	out, err := p.processLogs(ctx, ld)
	if err != nil {
		require.ErrorContains(t, err, "skip", "no call in this batch")
		return nil
	}
	return calls(t, out)
}

func stores() map[string]bool { return map[string]bool{"memory": false, "redis": true} }

// A storm of 1,000 error records for one pod within 10 s is one
// agent call; the next call after the cooldown says 999 were suppressed, and the ledger
// counts them as suppressed (and dropped), never lost.
func TestCooldownStormIsOneCallAndTheNextCarriesTheCount(t *testing.T) {
	h := newHarness(t)
	for name, redis := range stores() {
		t.Run(name, func(t *testing.T) {
			p := h.processor(t, redis)
			project := fmt.Sprintf("prj_storm_%s_%d", name, time.Now().UnixNano())
			h.put(t, mirror.Project{ID: project, Version: 1, Pipeline: mirror.Pipeline{
				WindowEnabled: true, Trigger: `severity_number >= 17`, GroupKey: `resource_attributes["k8s.pod.name"]`,
				// 60 in real use; 3 here, so the test waits seconds, not a minute, while the
				// storm's 10 batches still fit inside it on a loaded CI machine (with 1 they
				// did not always: the cooldown ended mid-storm and a second call went out).
				CooldownSeconds: 3,
			}})
			ledger := map[*deliverylog.Outcome][]uint64{}
			var sent []call
			for b := 0; b < 10; b++ {
				o := deliverylog.NewOutcome()
				seq := uint64(1 + b*100)
				sent = append(sent, run(t, p, request(project, o), batch("pod-a", 17, 100, seq))...)
				for s := seq; s < seq+100; s++ {
					ledger[o] = append(ledger[o], s)
				}
				// The batch that made the call records it as the agent exporter would.
				if b == 0 {
					o.Call([]uint64{1}, false)
				}
			}
			require.Len(t, sent, 1, "one agent call for the storm")
			assert.Zero(t, sent[0].Suppressed, "the first call had nothing held back before it")
			assert.Contains(t, string(sent[0].Trigger), `"event 1"`)

			require.Eventually(t, func() bool {
				cooling, err := p.store.Cooling(context.Background(), project, "pod-a")
				require.NoError(t, err)
				return !cooling
			}, 30*time.Second, 20*time.Millisecond, "the cooldown ends")
			after := run(t, p, request(project, nil), batch("pod-a", 17, 1, 1001))
			require.Len(t, after, 1, "the trigger after the cooldown is sent")
			assert.Equal(t, int64(999), after[0].Suppressed, "and says how many were suppressed")

			other := run(t, p, request(project, nil), batch("pod-b", 17, 1, 1002))
			require.Len(t, other, 1, "another pod has its own cooldown")
			assert.Zero(t, other[0].Suppressed)

			v := h.settled(t, project, ledger)
			assert.EqualValues(t, 999, v.Suppressed, "the ledger counts what the cooldown held back")
			assert.EqualValues(t, 999, v.Dropped)
			assert.EqualValues(t, 1, v.AgentCalls)
		})
	}
}

// A window of 50,000 events is sent cut to window_max_bytes, newest kept, with how many
// were left out.
func TestWindowOf50000EventsIsCutToTheBudget(t *testing.T) {
	h := newHarness(t)
	for name, redis := range stores() {
		t.Run(name, func(t *testing.T) {
			p := h.processor(t, redis)
			project := fmt.Sprintf("prj_budget_%s_%d", name, time.Now().UnixNano())
			h.put(t, mirror.Project{ID: project, Version: 1, Pipeline: mirror.Pipeline{
				WindowEnabled: true, Trigger: `severity_number >= 17`, WindowMaxEvents: 50_000,
			}})
			const n = 50_000
			for seq := uint64(1); seq <= n; seq += 1000 {
				assert.Empty(t, run(t, p, request(project, nil), batch("pod-a", 9, 1000, seq)))
			}
			got := run(t, p, request(project, nil), batch("pod-a", 17, 1, n+1))
			require.Len(t, got, 1)
			c := got[0]
			window, err := json.Marshal(c.Window)
			require.NoError(t, err)
			assert.LessOrEqual(t, len(window), mirror.DefaultWindowMaxBytes, "the window fits the default budget")
			assert.Greater(t, len(window), mirror.DefaultWindowMaxBytes-200, "and uses it")
			assert.Equal(t, n, len(c.Window)+c.WindowTruncated, "every event is sent or counted as left out")
			assert.Positive(t, c.WindowTruncated)
			assert.Contains(t, string(c.Window[len(c.Window)-1]), fmt.Sprintf(`"event %d"`, n), "the newest is kept")
			assert.Contains(t, string(c.Window[0]), fmt.Sprintf(`"event %d"`, n-len(c.Window)+1), "and those just before it")
		})
	}
}
