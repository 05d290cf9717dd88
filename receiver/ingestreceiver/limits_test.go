package ingestreceiver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-svc/otelcol-svc/exporter/jetstreamexporter"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/lifecyclehost"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/natsclient"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/principal"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// exporterEnv is the receiver in front of the real JetStream exporter (exporterhelper and
// all), on an embedded NATS with the configmirror extension's configuration mirror, with
// the exporter's log and metrics observed.
type exporterEnv struct {
	tr   *testReceiver
	js   jetstream.JetStream
	url  string
	logs *observer.ObservedLogs
	tel  *componenttest.Telemetry
}

// accountAuth is fakeAuth whose keys belong to one account, so that the meter counts them.
type accountAuth struct{ *fakeAuth }

func (a accountAuth) Authenticate(ctx context.Context, headers map[string][]string) (context.Context, error) {
	ctx, err := a.fakeAuth.Authenticate(ctx, headers)
	if p, ok := principal.FromContext(ctx); ok && err == nil {
		p.AccountID = "acct"
		ctx = principal.NewContext(ctx, p)
	}
	return ctx, err
}

func startWithExporter(t *testing.T, mutate func(*jetstreamexporter.Config)) exporterEnv {
	t.Helper()
	host := lifecyclehost.New(t)
	url, err := natsclient.DefaultConfig().Resolve(host)
	require.NoError(t, err)
	_, js := testenv.Connect(t, url)
	tr := startTestReceiver(t, nil, nil)
	auth := accountAuth{&fakeAuth{js: js}}
	tr.auth, tr.dp = auth, auth

	f := jetstreamexporter.NewFactory()
	cfg := f.CreateDefaultConfig().(*jetstreamexporter.Config)
	if mutate != nil {
		mutate(cfg)
	}
	core, logs := observer.New(zapcore.DebugLevel)
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	set := exportertest.NewNopSettings(f.Type())
	set.TelemetrySettings = tel.NewTelemetrySettings()
	set.Logger = zap.New(core)
	exp, err := f.CreateLogs(context.Background(), set, cfg)
	require.NoError(t, err)
	require.NoError(t, exp.Start(context.Background(), host))
	t.Cleanup(func() { _ = exp.Shutdown(context.Background()) })
	tr.logs = exp
	return exporterEnv{tr: tr, js: js, url: url, logs: logs, tel: tel}
}

func msgCount(t *testing.T, js jetstream.JetStream, stream string) int {
	t.Helper()
	s, err := js.Stream(context.Background(), stream)
	require.NoError(t, err)
	info, err := s.Info(context.Background())
	require.NoError(t, err)
	return int(info.State.Msgs)
}

func postPayload(t *testing.T, tr *testReceiver, project, id string, payload any) answer {
	t.Helper()
	body, err := json.Marshal(map[string]any{"request_id": id, "payload": payload})
	require.NoError(t, err)
	return do(t, http.MethodPost, tr.url+"/internal/agent-output", body, map[string]string{"X-API-Key": "key-" + project})
}

func refusedWith(t *testing.T, a answer, limit string) {
	t.Helper()
	require.Equal(t, http.StatusTooManyRequests, a.status, "%s", a.body)
	assert.Equal(t, "results_limit_exceeded", a.code(t))
	assert.Contains(t, string(a.body), limit, "the refusal names the limit")
}

// Agent results do not count against the month, so they have allowances of their own: a
// few distinct results per request id the service issued (an agent's retry of the same
// result is free), and a per-project hourly allowance for results under any other id. Past
// either, 429 results_limit_exceeded naming it, with Retry-After only when waiting helps,
// and nothing stored. Made-up ids no longer store without bound.
func TestResultsPastTheirAllowancesAreRefused(t *testing.T) {
	x := startWithExporter(t, func(c *jetstreamexporter.Config) {
		c.Usage.Enabled = false
		c.Results.PerRequestID, c.Results.UnmatchedPerHour = 2, 3
	})
	issued := exporterIssuer(t, x.url).New("p1")

	for _, payload := range []string{"first", "second", "first"} {
		a := postPayload(t, x.tr, "p1", issued, payload)
		require.Equal(t, http.StatusAccepted, a.status, "%s: %s", payload, a.body)
	}
	a := postPayload(t, x.tr, "p1", issued, "third")
	refusedWith(t, a, "per_request_id, 2")
	assert.Empty(t, a.header.Get("Retry-After"), "no wait makes a third result for this call pass")

	for i := range 3 {
		a := postPayload(t, x.tr, "p1", fmt.Sprintf("made-up-%d", i), "x")
		require.Equal(t, http.StatusAccepted, a.status, "%s", a.body)
	}
	for i := range 20 {
		a := postPayload(t, x.tr, "p1", fmt.Sprintf("more-%d", i), "x")
		refusedWith(t, a, "unmatched_per_hour, 3")
		assert.NotEmpty(t, a.header.Get("Retry-After"), "the allowance resets at the next hour")
	}
	assert.Equal(t, 2+3, msgCount(t, x.js, streams.OutputStream("p1")), "only the accepted results are stored")
	a = postPayload(t, x.tr, "p2", "made-up-0", "x")
	assert.Equal(t, http.StatusAccepted, a.status, "another project has its own allowance: %s", a.body)
}

// A project's stored results are held to results.max_bytes: past it a result is refused
// 429 results_limit_exceeded naming the limit (not a 503 that promises a retry will pass
// soon), with Retry-After when the oldest results expire.
func TestResultsStorageIsHeldToItsBudget(t *testing.T) {
	x := startWithExporter(t, func(c *jetstreamexporter.Config) {
		c.Usage.Enabled = false
		c.Results.MaxBytes, c.Results.PerRequestID = 256<<10, 0
	})
	iss := exporterIssuer(t, x.url)
	big := strings.Repeat("r", 50_000)
	var accepted int
	var a answer
	for range 40 { // 2 MB offered against a 256 KiB budget
		if a = postPayload(t, x.tr, "p1", iss.New("p1"), big); a.status != http.StatusAccepted {
			break
		}
		accepted++
	}
	refusedWith(t, a, "results max_bytes")
	assert.NotEmpty(t, a.header.Get("Retry-After"), "results expire after the stream's max age")
	s, err := x.js.Stream(context.Background(), streams.OutputStream("p1"))
	require.NoError(t, err)
	info, err := s.Info(context.Background())
	require.NoError(t, err)
	assert.LessOrEqual(t, info.State.Bytes, uint64(256<<10+60_000), "the budget, plus at most the result that reached it")
	assert.Equal(t, accepted, int(info.State.Msgs))
}

// Refusals of the client's making (over the month, a record too large) are answered and
// counted, not logged as the operator's errors: exporterhelper's ERROR line with its advice
// to enable retry_on_failure and sending_queue is gone for them.
func TestClientRefusalsAreNotLoggedAsErrors(t *testing.T) {
	x := startWithExporter(t, func(c *jetstreamexporter.Config) {
		c.Usage.FreeTierEvents = 5
		c.MaxRecordBytes = 1000
	})
	key := map[string]string{"X-API-Key": "key-p1"}
	a := do(t, http.MethodPost, x.tr.url+"/v1/events/batch", []byte(`[{},{},{},{},{}]`), key)
	require.Equal(t, http.StatusAccepted, a.status, "%s", a.body)
	for range 30 {
		a := do(t, http.MethodPost, x.tr.url+"/v1/events", []byte(`{"n":1}`), key)
		require.Equal(t, http.StatusTooManyRequests, a.status, "%s", a.body)
	}
	for range 4 {
		a := do(t, http.MethodPost, x.tr.url+"/v1/events", []byte(`{"b":"`+strings.Repeat("x", 2000)+`"}`), key)
		require.Equal(t, http.StatusRequestEntityTooLarge, a.status, "%s", a.body)
	}

	for _, e := range x.logs.FilterLevelExact(zapcore.ErrorLevel).All() {
		t.Errorf("ERROR line for a refusal of the client's making: %s %v", e.Message, e.ContextMap())
	}
	assert.Empty(t, x.logs.FilterMessageSnippet("retry_on_failure").All(), "no advice that would break 2xx-after-storage")
	got := map[string]int64{}
	m, err := x.tel.GetMetric("otelcol_jetstream_exporter_requests_refused")
	require.NoError(t, err)
	for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
		reason, _ := dp.Attributes.Value("reason")
		got[reason.AsString()] = dp.Value
	}
	assert.Equal(t, map[string]int64{"quota_exceeded": 30, "payload_too_large": 4}, got)
}
