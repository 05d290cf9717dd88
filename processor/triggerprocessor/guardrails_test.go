package triggerprocessor

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"
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
	"github.com/otelcol-svc/otelcol-svc/processor/triggerprocessor/internal/metadata"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

func TestLoadConfig(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	load := func(id component.ID) (*Config, error) {
		cfg := NewFactory().CreateDefaultConfig()
		sub, err := cm.Sub(id.String())
		require.NoError(t, err)
		require.NoError(t, sub.Unmarshal(cfg))
		return cfg.(*Config), confmap.Validate(cfg)
	}
	cfg, err := load(component.NewID(metadata.Type))
	require.NoError(t, err)
	assert.Empty(t, cfg.RedisURL, "cooldowns are kept in memory unless Redis is configured")
	cfg, err = load(component.NewIDWithName(metadata.Type, "redis"))
	require.NoError(t, err)
	assert.Equal(t, "redis://:secret@redis.internal:6379/2", cfg.RedisURL)
	_, err = load(component.NewIDWithName(metadata.Type, "bad"))
	assert.ErrorContains(t, err, "redis_url must look like")
}

// redisURL is the machine's Redis, database 13 of these tests (projects are fresh ids).
func redisURL() string {
	if u := os.Getenv("REDIS_URL"); u != "" {
		return u
	}
	return "redis://127.0.0.1:6379/13"
}

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

// settled is the project's ledger after settling a batch's outcome, as the JetStream
// receiver does.
func (h *harness) settled(t *testing.T, project string, seqs []uint64, o *deliverylog.Outcome) deliverylog.LedgerView {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, streams.Create(ctx, h.js, streams.RawConfig(project, streams.DefaultLimits())))
	_, err := h.js.CreateOrUpdateConsumer(ctx, streams.RawStream(project), jetstream.ConsumerConfig{Durable: "svc-pipeline", AckPolicy: jetstream.AckExplicitPolicy})
	require.NoError(t, err)
	l, err := deliverylog.OpenLedger(ctx, h.js, time.Hour)
	require.NoError(t, err)
	defer func() { require.NoError(t, l.Close(ctx)) }()
	require.NoError(t, l.Settle(ctx, project, seqs, o))
	v, err := deliverylog.View(ctx, h.js, project, deliverylog.ViewOptions{PipelineDurable: "svc-pipeline"})
	require.NoError(t, err)
	return v
}

func (h *harness) put(t *testing.T, p mirror.Project) {
	t.Helper()
	require.NoError(t, h.mirror.PutProject(context.Background(), p))
	require.Eventually(t, func() bool {
		got, ok := h.cache.Project(p.ID)
		return ok && got.Version == p.Version
	}, 10*time.Second, 10*time.Millisecond)
}

func (h *harness) processor(t *testing.T, redis bool) *triggerProcessor {
	t.Helper()
	p, err := newProcessor(processortest.NewNopSettings(metadata.Type))
	require.NoError(t, err)
	p.mirror = mirrorcache.DefaultExtension
	if redis {
		p.redisURL = redisURL()
	}
	require.NoError(t, p.start(context.Background(), h.host))
	t.Cleanup(func() { require.NoError(t, p.shutdown(context.Background())) })
	return p
}

func request(project string, o *deliverylog.Outcome) context.Context {
	ctx := principal.NewContext(context.Background(), principal.Principal{ProjectID: project, Scope: "pipeline"})
	return pipelinectx.WithOutcome(ctx, o)
}

func batch(pod string, sev, n int, seq uint64) plog.Logs {
	ld, lrs := pipelinedata.New()
	for i := 0; i < n; i++ {
		body := fmt.Sprintf(`{"severityNumber":%d,"resourceAttributes":{"k8s.pod.name":%q},"body":"event %d"}`, sev, pod, seq+uint64(i))
		pipelinedata.Append(lrs, pipelinedata.Item{Body: []byte(body), Signal: "log", Seq: seq + uint64(i)})
	}
	return ld
}

func kept(t *testing.T, p *triggerProcessor, ctx context.Context, ld plog.Logs) []pipelinedata.Item {
	t.Helper()
	out, err := p.processLogs(ctx, ld)
	if err != nil {
		require.ErrorContains(t, err, "skip")
		return nil
	}
	var items []pipelinedata.Item
	for lr := range pipelinedata.All(out) {
		items = append(items, pipelinedata.Read(lr))
	}
	return items
}

func stores() map[string]bool { return map[string]bool{"memory": false, "redis": true} }

func waitCooled(t *testing.T, p *triggerProcessor, project, key string) {
	t.Helper()
	require.Eventually(t, func() bool {
		cooling, err := p.cooldowns.Cooling(context.Background(), project, key)
		require.NoError(t, err)
		return !cooling
	}, 10*time.Second, 20*time.Millisecond, "the cooldown ends")
}

// In legacy mode, a storm of 1,000 error records within 10 s is one
// record sent; the next after the cooldown carries svc.suppressed = 999 (the agent
// exporter's X-Suppressed-Count), and the held-back records are suppressed in the ledger.
func TestLegacyCooldownStormIsOneRecordAndTheNextCarriesTheCount(t *testing.T) {
	h := newHarness(t)
	for name, redis := range stores() {
		t.Run(name, func(t *testing.T) {
			p := h.processor(t, redis)
			project := fmt.Sprintf("prj_legacy_%s_%d", name, time.Now().UnixNano())
			h.put(t, mirror.Project{ID: project, Version: 1, Pipeline: mirror.Pipeline{
				Trigger: `severity_number >= 17`, CooldownSeconds: 1, // 60 in real use; 1 here, so the test waits a second, not a minute
			}})
			var sent []pipelinedata.Item
			o := deliverylog.NewOutcome()
			for b := 0; b < 10; b++ {
				sent = append(sent, kept(t, p, request(project, o), batch("pod-a", 17, 100, uint64(1+b*100)))...)
			}
			require.Len(t, sent, 1, "one record reaches the agent")
			assert.Equal(t, uint64(1), sent[0].Seq)
			assert.Zero(t, sent[0].Suppressed)
			o.Call([]uint64{1}, false) // as the agent exporter records the call
			seqs := make([]uint64, 1000)
			for i := range seqs {
				seqs[i] = uint64(i + 1)
			}
			v := h.settled(t, project, seqs, o)
			assert.EqualValues(t, 999, v.Suppressed, "held back, and counted as such")
			assert.EqualValues(t, 999, v.Dropped)
			assert.EqualValues(t, 1, v.AgentCalls)

			assert.Empty(t, kept(t, p, request(project, nil), batch("pod-a", 9, 5, 1001)), "non-matching records are dropped as before")

			waitCooled(t, p, project, "")
			after := kept(t, p, request(project, nil), batch("pod-b", 17, 1, 2001))
			require.Len(t, after, 1)
			assert.Equal(t, int64(999), after[0].Suppressed, "one key per project by default")
		})
	}
}

func TestLegacyDedupKeySeparatesCooldowns(t *testing.T) {
	h := newHarness(t)
	p := h.processor(t, true)
	project := fmt.Sprintf("prj_dedup_%d", time.Now().UnixNano())
	h.put(t, mirror.Project{ID: project, Version: 1, Pipeline: mirror.Pipeline{
		Trigger: `severity_number >= 17`, CooldownSeconds: 60, DedupKey: `resource_attributes["k8s.pod.name"]`,
		Transforms: []string{`set(event["seen"], true)`},
	}})
	got := kept(t, p, request(project, nil), batch("pod-a", 17, 3, 1))
	got = append(got, kept(t, p, request(project, nil), batch("pod-b", 17, 3, 4))...)
	require.Len(t, got, 2, "one record per pod")
	assert.Equal(t, []uint64{1, 4}, []uint64{got[0].Seq, got[1].Seq})
	assert.Contains(t, string(got[0].Body), `"seen":true`, "transforms still apply")

	// The batch is delivered again (its call failed): the records that passed still pass.
	again := kept(t, p, request(project, nil), batch("pod-a", 17, 3, 1))
	require.Len(t, again, 1)
	assert.Equal(t, uint64(1), again[0].Seq)
}

func TestNoCooldownChangesNothing(t *testing.T) {
	h := newHarness(t)
	p := h.processor(t, false)
	project := fmt.Sprintf("prj_plain_%d", time.Now().UnixNano())
	h.put(t, mirror.Project{ID: project, Version: 1, Pipeline: mirror.Pipeline{Trigger: `severity_number >= 17`}})
	in := batch("pod-a", 17, 50, 1)
	want := make([][]byte, 0, 50)
	for lr := range pipelinedata.All(in) {
		want = append(want, pipelinedata.Read(lr).Body)
	}
	got := kept(t, p, request(project, nil), in)
	require.Len(t, got, 50)
	for i, it := range got {
		assert.Equal(t, want[i], it.Body, "byte for byte")
		assert.Zero(t, it.Suppressed)
	}
}
