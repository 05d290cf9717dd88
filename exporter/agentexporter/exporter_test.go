package agentexporter

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-svc/otelcol-svc/exporter/agentexporter/internal/metadata"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/mirrorcache"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelinedata"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/principal"
	"github.com/otelcol-svc/otelcol-svc/internal/delivery"
	"github.com/otelcol-svc/otelcol-svc/internal/deliverylog"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
	"github.com/otelcol-svc/otelcol-svc/internal/webhooksig"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// ---- environment: a real NATS, the mirror cache behind a test host, local agents ----

type env struct {
	nats  *testenv.NATS
	js    jetstream.JetStream
	store *mirror.Store
	host  component.Host
	cache *mirrorcache.Cache
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

// start runs an exporter tuned for fast tests: short backoff, the local agent allowed.
func (e *env) start(t testing.TB, mutate func(*Config)) *running {
	t.Helper()
	cfg := defaultConfig()
	cfg.NATS.URL = e.nats.URL()
	cfg.AllowCIDRs = "127.0.0.0/8"
	cfg.Timeout = 2 * time.Second
	cfg.Retry = delivery.RetryConfig{InitialInterval: 10 * time.Millisecond, MaxInterval: 50 * time.Millisecond, MaxElapsedTime: 5 * time.Second}
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

type item struct {
	body string
	kind string
}

func records(n int) []item {
	out := make([]item, n)
	for i := range out {
		// Spacing and escapes no encoder would produce: they must arrive as they are.
		out[i] = item{body: fmt.Sprintf(`{ "n":%d,  "msg" : "caf\u00e9 é", "nested": {"a" :[1, 2.50]} }`, i)}
	}
	return out
}

func bodies(items []item) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.body
	}
	return out
}

func consumeCtx(ctx context.Context, r *running, projectID string, items []item) error {
	ld, lrs := pipelinedata.New()
	for i, it := range items {
		pipelinedata.Append(lrs, pipelinedata.Item{Body: []byte(it.body), Signal: "event", Kind: it.kind, Seq: uint64(i + 1)})
	}
	return r.exp.ConsumeLogs(principal.NewContext(ctx, principal.Principal{ProjectID: projectID}), ld)
}

func consume(r *running, projectID string, items []item) error {
	return consumeCtx(context.Background(), r, projectID, items)
}

// agent is the customer's endpoint: it records what it gets and answers with respond.
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

// ---- the calls ----

func TestBatchesRecordsSignedAndVerbatim(t *testing.T) {
	e := newEnv(t)
	a := newAgent(t, nil)
	p := project("p1", a.srv.URL+"/hook")
	p.Pipeline.BatchSize = 10
	p = e.putProject(t, p)
	r := e.start(t, nil)

	in := records(25)
	require.NoError(t, consume(r, "p1", in))

	got := a.requests()
	require.Len(t, got, 3)
	ids := map[string]bool{}
	for i, want := range [][]item{in[:10], in[10:20], in[20:]} {
		req := got[i]
		assert.Equal(t, "["+strings.Join(bodies(want), ",")+"]", string(req.body), "call %d", i)
		assert.Equal(t, "application/json", req.header.Get("Content-Type"))
		assert.Equal(t, "otelcol-svc/1.2.3", req.header.Get("User-Agent"))
		id := req.header.Get("X-Request-Id")
		assert.Regexp(t, `^req_[0-9a-f]{32}$`, id)
		assert.Equal(t, id, req.header.Get("webhook-id"))
		ids[id] = true
		assert.NoError(t, webhooksig.Verify(p.SigningSecret, req.header, req.body, time.Now(), time.Minute), "call %d", i)
	}
	assert.Len(t, ids, 3, "every call has its own request id")

	assert.Equal(t, int64(3), r.sum(t, "otelcol_agent_calls", delivery.OutcomeDelivered))
	assert.Equal(t, int64(25), r.sum(t, "otelcol_agent_records", ""))
	assert.Equal(t, int64(3), r.sum(t, "otelcol_agent_call_attempts", delivery.AttemptOK))
	assert.Equal(t, int64(3), r.sum(t, "otelcol_agent_call_duration", delivery.OutcomeDelivered))
	assert.Empty(t, e.deadLetters(t, "p1"))
}

func TestWindowCallSentAloneInOrder(t *testing.T) {
	e := newEnv(t)
	a := newAgent(t, nil)
	e.putProject(t, project("p1", a.srv.URL)) // batch_size 0: the default of 10
	r := e.start(t, nil)

	recs := records(14)
	window := item{body: `{"trigger": {"n": 99}, "window": [ {"n":1}, {"n":2} ]}`, kind: pipelinedata.KindWindowCall}
	in := append(append(append([]item{}, recs[:3]...), window), recs[3:]...)
	require.NoError(t, consume(r, "p1", in))

	got := a.requests()
	require.Len(t, got, 4)
	assert.Equal(t, "["+strings.Join(bodies(recs[:3]), ",")+"]", string(got[0].body))
	assert.Equal(t, window.body, string(got[1].body), "a window call goes alone, as it is")
	assert.Equal(t, "["+strings.Join(bodies(recs[3:13]), ",")+"]", string(got[2].body))
	assert.Equal(t, "["+recs[13].body+"]", string(got[3].body))
	assert.Equal(t, int64(15), r.sum(t, "otelcol_agent_records", ""))
}

func TestRetriesKeepTheRequestID(t *testing.T) {
	e := newEnv(t)
	a := newAgent(t, statusThen(503, 503))
	p := e.putProject(t, project("p1", a.srv.URL))
	r := e.start(t, nil)

	require.NoError(t, consume(r, "p1", records(2)))
	got := a.requests()
	require.Len(t, got, 3)
	id := got[0].header.Get("X-Request-Id")
	for _, req := range got {
		assert.Equal(t, id, req.header.Get("X-Request-Id"))
		assert.Equal(t, id, req.header.Get("webhook-id"))
		assert.NoError(t, webhooksig.Verify(p.SigningSecret, req.header, req.body, time.Now(), time.Minute))
	}
	assert.Equal(t, int64(1), r.sum(t, "otelcol_agent_calls", delivery.OutcomeDelivered))
	assert.Equal(t, int64(2), r.sum(t, "otelcol_agent_call_attempts", delivery.AttemptRetryable))
	assert.Equal(t, int64(1), r.sum(t, "otelcol_agent_call_attempts", delivery.AttemptOK))

	require.NoError(t, consume(r, "p1", records(1)))
	assert.NotEqual(t, id, a.requests()[3].header.Get("X-Request-Id"), "a new call, a new id")
	assert.Empty(t, e.deadLetters(t, "p1"))
}

func TestHonoursRetryAfter(t *testing.T) {
	e := newEnv(t)
	a := newAgent(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n == 1 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		_, _ = io.WriteString(w, `{"status": "accepted"}`)
	})
	e.putProject(t, project("p1", a.srv.URL))
	r := e.start(t, nil)

	require.NoError(t, consume(r, "p1", records(1)))
	got := a.requests()
	require.Len(t, got, 2)
	assert.GreaterOrEqual(t, got[1].at.Sub(got[0].at), 900*time.Millisecond)
}

func TestRetryAfterBeyondBudgetEndsRetries(t *testing.T) {
	e := newEnv(t)
	a := newAgent(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", "120")
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	e.putProject(t, project("p1", a.srv.URL))
	r := e.start(t, nil)

	start := time.Now()
	require.NoError(t, consume(r, "p1", records(1)))
	assert.Less(t, time.Since(start), 2*time.Second, "no waiting for a retry that cannot happen")
	require.Len(t, a.requests(), 1)
	dl := e.deadLetters(t, "p1")
	require.Len(t, dl, 1)
	reason := dl[0].Header.Get(streams.HeaderDLQReason)
	assert.Contains(t, reason, "retry budget of 5s exhausted after 1 attempt; last: 503")
	assert.Contains(t, reason, "the agent asked to retry after 2m0s")
}

func TestFinal4xxIsDeadLettered(t *testing.T) {
	e := newEnv(t)
	long := `{"error": "` + strings.Repeat("x", 300) + `"}`
	a := newAgent(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, long)
	})
	e.putProject(t, project("p1", a.srv.URL+"/hook?token=s3cret#frag"))
	r := e.start(t, nil)

	in := records(3)
	require.NoError(t, consume(r, "p1", in), "a dead-lettered call is handled")
	got := a.requests()
	require.Len(t, got, 1, "a 400 is final")

	dl := e.deadLetters(t, "p1")
	require.Len(t, dl, 1)
	m := dl[0]
	assert.Equal(t, streams.DeadLetterSubject("p1", "agent"), m.Subject)
	assert.Equal(t, "["+strings.Join(bodies(in), ",")+"]", string(m.Data))
	assert.Equal(t, got[0].header.Get("X-Request-Id"), m.Header.Get(streams.HeaderRequestID))
	assert.Equal(t, "agent answered 400: "+long[:200], m.Header.Get(streams.HeaderDLQReason))
	assert.Equal(t, "400", m.Header.Get(streams.HeaderDLQStatus))
	assert.Equal(t, "1", m.Header.Get(streams.HeaderDLQAttempts))
	assert.Equal(t, a.srv.URL+"/hook", m.Header.Get(streams.HeaderDLQTarget), "no query or fragment")

	assert.Equal(t, int64(1), r.sum(t, "otelcol_agent_calls", delivery.OutcomeDeadLettered))
	assert.Equal(t, int64(1), r.sum(t, "otelcol_agent_call_attempts", delivery.AttemptFinal))
	assert.Equal(t, int64(0), r.sum(t, "otelcol_agent_records", ""))

	warns := r.logs.FilterMessage("agent call dead-lettered").All()
	require.Len(t, warns, 1)
	assert.Equal(t, zapcore.WarnLevel, warns[0].Level)
	fields := warns[0].ContextMap()
	assert.Equal(t, "p1", fields["project"])
	assert.Equal(t, m.Header.Get(streams.HeaderRequestID), fields["request_id"])
	assertNoLeak(t, r.logs, "caf", "s3cret")
}

func TestTimeoutsAreRetried(t *testing.T) {
	e := newEnv(t)
	a := newAgent(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n <= 2 {
			select { // hang past the exporter's timeout
			case <-r.Context().Done():
			case <-time.After(3 * time.Second):
			}
			return
		}
		_, _ = io.WriteString(w, `{"status": "accepted"}`)
	})
	e.putProject(t, project("p1", a.srv.URL))
	r := e.start(t, func(c *Config) { c.Timeout = 200 * time.Millisecond })

	require.NoError(t, consume(r, "p1", records(1)))
	got := a.requests()
	require.Len(t, got, 3)
	assert.Equal(t, got[0].header.Get("X-Request-Id"), got[2].header.Get("X-Request-Id"))
	assert.Equal(t, int64(1), r.sum(t, "otelcol_agent_calls", delivery.OutcomeDelivered))
	assert.Empty(t, e.deadLetters(t, "p1"))
}

func TestBudgetExhaustedIsDeadLettered(t *testing.T) {
	e := newEnv(t)
	a := newAgent(t, func(_ int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusBadGateway) })
	e.putProject(t, project("p1", a.srv.URL))
	r := e.start(t, func(c *Config) {
		c.Retry = delivery.RetryConfig{InitialInterval: 20 * time.Millisecond, MaxInterval: 50 * time.Millisecond, MaxElapsedTime: 300 * time.Millisecond}
	})

	require.NoError(t, consume(r, "p1", records(2)))
	attempts := len(a.requests())
	assert.GreaterOrEqual(t, attempts, 2)
	dl := e.deadLetters(t, "p1")
	require.Len(t, dl, 1)
	want := fmt.Sprintf("retry budget of 300ms exhausted after %d attempts; last: 502", attempts)
	assert.Equal(t, want, dl[0].Header.Get(streams.HeaderDLQReason))
	assert.Equal(t, "502", dl[0].Header.Get(streams.HeaderDLQStatus))
	assert.Equal(t, strconv.Itoa(attempts), dl[0].Header.Get(streams.HeaderDLQAttempts))
}

func TestLoopbackRefusedWithoutAllowList(t *testing.T) {
	e := newEnv(t)
	a := newAgent(t, nil)
	e.putProject(t, project("p1", a.srv.URL))
	r := e.start(t, func(c *Config) { c.AllowCIDRs = "" })

	require.NoError(t, consume(r, "p1", records(1)))
	assert.Empty(t, a.requests())
	dl := e.deadLetters(t, "p1")
	require.Len(t, dl, 1)
	assert.Equal(t, "destination refused: 127.0.0.1 is a loopback address; allow it with SVC_OUTBOUND_ALLOW",
		dl[0].Header.Get(streams.HeaderDLQReason))
	assert.Equal(t, "0", dl[0].Header.Get(streams.HeaderDLQStatus))
	assert.Equal(t, "1", dl[0].Header.Get(streams.HeaderDLQAttempts))
}

func TestInvalidURLAndRedirectAreFinal(t *testing.T) {
	e := newEnv(t)
	a := newAgent(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://169.254.169.254/", http.StatusFound)
	})
	e.putProject(t, project("bad", "ftp://agent.example.com/"))
	e.putProject(t, project("moved", a.srv.URL))
	r := e.start(t, nil)

	require.NoError(t, consume(r, "bad", records(1)))
	require.NoError(t, consume(r, "moved", records(1)))

	dl := e.deadLetters(t, "bad")
	require.Len(t, dl, 1)
	assert.Equal(t, `agent_endpoint_url is not valid: the URL scheme "ftp" is not allowed: use https:// or http://`, dl[0].Header.Get(streams.HeaderDLQReason))
	assert.Equal(t, "0", dl[0].Header.Get(streams.HeaderDLQAttempts))

	dl = e.deadLetters(t, "moved")
	require.Len(t, dl, 1)
	assert.Contains(t, dl[0].Header.Get(streams.HeaderDLQReason), "agent answered 302: redirects are not followed")
	assert.Len(t, a.requests(), 1)
}

func TestDeadLetterUnavailableIsRetryable(t *testing.T) {
	e := newEnv(t)
	a := newAgent(t, func(_ int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusBadRequest) })
	e.putProject(t, project("p1", a.srv.URL))
	r := e.start(t, nil)
	require.NoError(t, consume(r, "p1", records(1)))
	require.Len(t, e.deadLetters(t, "p1"), 1)

	e.nats.Stop()
	// Back up before the cleanups, which stop the mirror cache faster when it can reach NATS.
	defer e.nats.Start(t)
	err := consume(r, "p1", records(1))
	require.Error(t, err)
	assert.False(t, consumererror.IsPermanent(err), "the records must be redelivered: %v", err)
	assert.Contains(t, err.Error(), "could not be dead-lettered")
	assert.Equal(t, int64(1), r.sum(t, "otelcol_agent_calls", ""), "only the first call ended")
}

func TestShutdownDuringRetriesIsRetryable(t *testing.T) {
	e := newEnv(t)
	a := newAgent(t, func(_ int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) })
	e.putProject(t, project("p1", a.srv.URL))
	r := e.start(t, func(c *Config) { c.Retry.MaxElapsedTime = time.Minute })

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err := consumeCtx(ctx, r, "p1", records(1))
	require.Error(t, err)
	assert.False(t, consumererror.IsPermanent(err))
	assert.Contains(t, err.Error(), "interrupted")
	assert.NotEmpty(t, a.requests())
	assert.Empty(t, e.deadLetters(t, "p1"), "an interrupted call is redelivered, not dead-lettered")
}

func TestProjectsThatCannotBeCalled(t *testing.T) {
	e := newEnv(t)
	e.putProject(t, mirror.Project{ID: "noagent"})
	e.putProject(t, mirror.Project{ID: "badsecret", Pipeline: mirror.Pipeline{AgentEndpointURL: "https://agent.example.com"}, SigningSecret: "whsec_***"})
	r := e.start(t, nil)

	err := consume(r, "noagent", records(1))
	require.Error(t, err)
	assert.False(t, consumererror.IsPermanent(err))
	assert.Contains(t, err.Error(), "no agent_endpoint_url")

	err = consume(r, "unknown", records(1))
	require.Error(t, err)
	assert.False(t, consumererror.IsPermanent(err))

	err = consume(r, "badsecret", records(1))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "signing secret")

	ld, lrs := pipelinedata.New()
	pipelinedata.Append(lrs, pipelinedata.Item{Body: []byte(`{}`)})
	err = r.exp.ConsumeLogs(context.Background(), ld)
	require.Error(t, err)
	assert.True(t, consumererror.IsPermanent(err), "no project in the context: %v", err)
}

func TestUnsignedProjectWarnsOnce(t *testing.T) {
	e := newEnv(t)
	a := newAgent(t, nil)
	e.putProject(t, mirror.Project{ID: "p1", Pipeline: mirror.Pipeline{AgentEndpointURL: a.srv.URL}})
	r := e.start(t, nil)

	require.NoError(t, consume(r, "p1", records(1)))
	require.NoError(t, consume(r, "p1", records(1)))
	got := a.requests()
	require.Len(t, got, 2)
	assert.Empty(t, got[0].header.Get("webhook-signature"))
	assert.NotEmpty(t, got[0].header.Get("X-Request-Id"))
	warns := r.logs.FilterMessageSnippet("no signing secret").All()
	require.Len(t, warns, 1)
	assert.Equal(t, zapcore.WarnLevel, warns[0].Level)
}

func assertNoLeak(t *testing.T, logs *observer.ObservedLogs, secrets ...string) {
	t.Helper()
	for _, entry := range logs.All() {
		line := entry.Message + fmt.Sprint(entry.ContextMap())
		for _, s := range secrets {
			assert.NotContains(t, line, s, "log %q", entry.Message)
		}
	}
}
