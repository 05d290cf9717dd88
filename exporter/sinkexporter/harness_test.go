package sinkexporter

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-svc/otelcol-svc/exporter/sinkexporter/internal/metadata"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/mirrorcache"
	"github.com/otelcol-svc/otelcol-svc/internal/delivery"
	"github.com/otelcol-svc/otelcol-svc/internal/deliverylog"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
	"github.com/otelcol-svc/otelcol-svc/internal/webhooksig"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// ---- environment: a real NATS, the mirror cache behind a test host, local destinations ----

type env struct {
	nats  *testenv.NATS
	js    jetstream.JetStream
	store *mirror.Store
	host  component.Host
	cache *mirrorcache.Cache
	// slackAPIURL, when set, is every exporter's slack_api_url (a Slack stand-in).
	slackAPIURL string
}

// mirrorExtension stands in for the configmirror extension: it owns the cache.
type mirrorExtension struct {
	component.StartFunc
	component.ShutdownFunc
	cache *mirrorcache.Cache
}

func (m mirrorExtension) MirrorCache() *mirrorcache.Cache { return m.cache }

type testHost map[component.ID]component.Component

func (h testHost) GetExtensions() map[component.ID]component.Component { return h }

func newEnv(t testing.TB) *env {
	t.Helper()
	n := testenv.StartNATS(t)
	_, js := testenv.Connect(t, n.URL())
	store, err := mirror.Open(context.Background(), js, 1)
	require.NoError(t, err)
	cache := mirrorcache.NewCache(zap.NewNop())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); cache.Run(ctx, js) }()
	t.Cleanup(func() { cancel(); <-done })
	require.Eventually(t, cache.Ready, 5*time.Second, 5*time.Millisecond)
	host := testHost{component.MustNewID("configmirror"): mirrorExtension{cache: cache}}
	return &env{nats: n, js: js, store: store, host: host, cache: cache}
}

// putProject publishes a project and waits until the cache has it.
func (e *env) putProject(t testing.TB, p mirror.Project) mirror.Project {
	t.Helper()
	p.Version = time.Now().UnixNano()
	require.NoError(t, e.store.PutProject(context.Background(), p))
	require.Eventually(t, func() bool {
		got, ok := e.cache.Project(p.ID)
		return ok && got.Version == p.Version
	}, 5*time.Second, 5*time.Millisecond)
	return p
}

type running struct {
	exp    exporter.Logs
	logs   *observer.ObservedLogs
	reader *sdkmetric.ManualReader
}

// start runs an exporter tuned for fast tests: short backoff, the local destinations allowed.
func (e *env) start(t testing.TB, mutate func(*Config)) *running {
	t.Helper()
	cfg := defaultConfig()
	cfg.NATS.URL = e.nats.URL()
	cfg.AllowCIDRs = "127.0.0.0/8"
	cfg.Timeout = 2 * time.Second
	cfg.Retry = delivery.RetryConfig{InitialInterval: 10 * time.Millisecond, MaxInterval: 50 * time.Millisecond, MaxElapsedTime: 5 * time.Second}
	if e.slackAPIURL != "" {
		cfg.SlackAPIURL = e.slackAPIURL
	}
	if mutate != nil {
		mutate(cfg)
	}
	require.NoError(t, cfg.Validate())
	core, logs := observer.New(zapcore.DebugLevel)
	reader := sdkmetric.NewManualReader()
	set := exportertest.NewNopSettings(metadata.Type)
	set.Logger = zap.New(core)
	set.MeterProvider = sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	set.BuildInfo.Version = "1.2.3"
	exp, err := NewFactory().CreateLogs(context.Background(), set, cfg)
	require.NoError(t, err)
	require.NoError(t, exp.Start(context.Background(), e.host))
	t.Cleanup(func() { _ = exp.Shutdown(context.Background()) })
	if cfg.DeliveryLog.Enabled && cfg.DeliveryLog.Replay.Enabled {
		// The log is set up in the background; a test that stops NATS must not do it
		// while the server is still creating the log's streams.
		require.Eventually(t, func() bool {
			_, err := e.js.Consumer(context.Background(), deliverylog.ReplayStream, deliverylog.ReplayDurable)
			return err == nil
		}, 10*time.Second, 5*time.Millisecond)
	}
	return &running{exp: exp, logs: logs, reader: reader}
}

// agent is a destination (the name is the agent exporter tests' own): it records what
// it gets and answers with respond.
type agent struct {
	srv     *httptest.Server
	mu      sync.Mutex
	got     []received
	respond func(n int, w http.ResponseWriter, r *http.Request)
}

type received struct {
	header http.Header
	body   []byte
	at     time.Time
}

func newAgent(t testing.TB, respond func(n int, w http.ResponseWriter, r *http.Request)) *agent {
	t.Helper()
	a := &agent{respond: respond}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		a.mu.Lock()
		a.got = append(a.got, received{header: r.Header.Clone(), body: body, at: time.Now()})
		n := len(a.got)
		a.mu.Unlock()
		if a.respond == nil {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"status": "accepted"}`)
			return
		}
		a.respond(n, w, r)
	}))
	t.Cleanup(a.srv.Close)
	return a
}

func (a *agent) requests() []received {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]received(nil), a.got...)
}

func statusThen(codes ...int) func(int, http.ResponseWriter, *http.Request) {
	return func(n int, w http.ResponseWriter, _ *http.Request) {
		if n <= len(codes) {
			w.WriteHeader(codes[n-1])
			return
		}
		_, _ = io.WriteString(w, `{"status": "accepted"}`)
	}
}

func (e *env) deadLetters(t *testing.T, projectID string) []*jetstream.RawStreamMsg {
	t.Helper()
	ctx := context.Background()
	s, err := e.js.Stream(ctx, streams.DeadLetterStream(projectID))
	if err != nil {
		return nil
	}
	info, err := s.Info(ctx)
	require.NoError(t, err)
	var out []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; seq > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		require.NoError(t, err)
		out = append(out, m)
	}
	return out
}

// sum reads a counter (or a histogram's count) with the given outcome ("" for none).
func (r *running) sum(t *testing.T, name, outcome string) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, r.reader.Collect(context.Background(), &rm))
	var total int64
	match := func(set attribute.Set) bool {
		v, ok := set.Value("outcome")
		return outcome == "" || ok && v.AsString() == outcome
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					if match(p.Attributes) {
						total += p.Value
					}
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					if match(p.Attributes) {
						total += int64(p.Count)
					}
				}
			}
		}
	}
	return total
}

func project(id, url string) mirror.Project {
	return mirror.Project{ID: id, Pipeline: mirror.Pipeline{AgentEndpointURL: url}, SigningSecret: webhooksig.NewSecret()}
}

// delivery waits until the log holds delivery id of project in a state ok accepts.
func (e *env) delivery(t *testing.T, project, id string, ok func(deliverylog.Delivery) bool) deliverylog.Delivery {
	t.Helper()
	ctx := context.Background()
	var d deliverylog.Delivery
	require.Eventually(t, func() bool {
		s, err := e.js.Stream(ctx, deliverylog.StreamName)
		if err != nil {
			return false
		}
		d, err = deliverylog.NewReader(s).Get(ctx, project, id)
		return err == nil && ok(d)
	}, 10*time.Second, 10*time.Millisecond, "delivery %s: last seen %+v", id, d)
	return d
}

func inState(state string) func(deliverylog.Delivery) bool {
	return func(d deliverylog.Delivery) bool { return d.State == state }
}

// ledger reads a project's ledger counters as stored.
func (e *env) ledger(t *testing.T, project string) deliverylog.Counters {
	t.Helper()
	ctx := context.Background()
	kv, err := e.js.KeyValue(ctx, deliverylog.LedgerBucket)
	if err != nil {
		return deliverylog.Counters{}
	}
	entry, err := kv.Get(ctx, project)
	if err != nil {
		return deliverylog.Counters{}
	}
	var c deliverylog.Counters
	require.NoError(t, json.Unmarshal(entry.Value(), &c))
	return c
}
