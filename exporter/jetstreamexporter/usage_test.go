package jetstreamexporter

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"

	"github.com/otelcol-svc/otelcol-svc/exporter/jetstreamexporter/internal/metadatatest"
	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/lifecyclehost"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/natsclient"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/principal"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/pipelinectx"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
	"github.com/otelcol-svc/otelcol-svc/internal/usage"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

type metered struct {
	e  *jsExporter
	js jetstream.JetStream
	m  *mirror.Store
	tt *componenttest.Telemetry
}

// startMetered runs the exporter with metering on a real embedded NATS and configmirror
// extension (the configuration mirror), as in a collector.
func startMetered(t *testing.T, mutate func(*Config)) metered {
	t.Helper()
	host := lifecyclehost.New(t)
	url, err := natsclient.DefaultConfig().Resolve(host)
	require.NoError(t, err)
	_, js := testenv.Connect(t, url)
	m, err := mirror.Open(context.Background(), js, 1)
	require.NoError(t, err)
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { _ = tt.Shutdown(context.Background()) })
	cfg := createDefaultConfig().(*Config)
	if mutate != nil {
		mutate(cfg)
	}
	require.NoError(t, cfg.Validate())
	e := newExporter(cfg, metadatatest.NewSettings(tt))
	require.NoError(t, e.Start(context.Background(), host))
	t.Cleanup(func() { _ = e.Shutdown(context.Background()) })
	require.NotNil(t, e.usage.meter.Load(), "NATS was there: the meter opened during Start")
	return metered{e: e, js: js, m: m, tt: tt}
}

func asProject(account, project string) context.Context {
	return principal.NewContext(context.Background(), principal.Principal{ProjectID: project, AccountID: account, Scope: mirror.ScopeProject})
}

func streamCount(t *testing.T, js jetstream.JetStream, name string) int {
	t.Helper()
	s, err := js.Stream(context.Background(), name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return 0
	}
	require.NoError(t, err)
	info, err := s.Info(context.Background())
	require.NoError(t, err)
	return int(info.State.Msgs)
}

// settled is the account's month once this process's lease is settled.
func settled(t *testing.T, js jetstream.JetStream, account string) usage.AccountUsage {
	t.Helper()
	rd, err := usage.OpenReader(context.Background(), js, 10_000, 1)
	require.NoError(t, err)
	var u usage.AccountUsage
	require.Eventually(t, func() bool {
		u, err = rd.Account(context.Background(), account, time.Now())
		require.NoError(t, err)
		return u.Pending == 0
	}, 5*time.Second, 20*time.Millisecond)
	return u
}

func throttledPoint(reason string, n int64) metricdata.DataPoint[int64] {
	return metricdata.DataPoint[int64]{Attributes: attribute.NewSet(attribute.String("reason", reason)), Value: n}
}

// Past the account's limit a request is refused whole with what the receivers answer
// (429 quota_exceeded, Retry-After to the reset; on gRPC RESOURCE_EXHAUSTED with a
// RetryInfo), nothing of it is stored, and its records are counted as throttled. Agent
// results are neither counted nor refused.
func TestQuotaRefusesWholeRequests(t *testing.T) {
	x := startMetered(t, func(c *Config) { c.Usage.FreeTierEvents = 100 })
	ctx := asProject("acct", "shop")

	quota := new(pipelinectx.Quota)
	require.NoError(t, x.e.pushLogs(pipelinectx.WithIngest(ctx, pipelinectx.Ingest{Quota: quota}), logsOf(60, "a")))
	assert.Equal(t, int64(100), quota.Limit, "the receiver gets the quota for its headers")
	assert.Equal(t, int64(40), quota.Remaining)
	assert.Equal(t, usage.ResetAt(time.Now()), quota.Reset)

	err := x.e.pushLogs(ctx, logsOf(60, "b"))
	var th *pipelinectx.Throttled
	require.ErrorAs(t, err, &th)
	assert.Equal(t, http.StatusTooManyRequests, th.Status)
	assert.Equal(t, apierror.QuotaExceeded, th.Code)
	assert.InDelta(t, float64(usage.RetryAfter(time.Now())), th.RetryAfter.Seconds(), 5)
	var qe *usage.QuotaError
	require.ErrorAs(t, err, &qe, "the cause stays visible")
	assert.Contains(t, err.Error(), "past its 100 events")
	assert.Contains(t, err.Error(), "nothing was stored")
	st := th.GRPCStatus()
	assert.Equal(t, codes.ResourceExhausted, st.Code())
	require.Len(t, st.Details(), 1)
	assert.Equal(t, th.RetryAfter, st.Details()[0].(*errdetails.RetryInfo).RetryDelay.AsDuration())
	assert.Equal(t, 60, streamCount(t, x.js, streams.RawStream("shop")))

	require.NoError(t, x.e.pushLogs(ctx, logsOf(40, "c")), "what is left still fits")
	out := pipelinectx.WithIngest(ctx, pipelinectx.Ingest{Prebuilt: "agent_output", Output: true, RequestID: "req_1"})
	ld := logsOf(0, "")
	ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().AppendEmpty().Body().SetEmptyBytes().FromRaw([]byte(`{"text":"done"}`))
	require.NoError(t, x.e.pushLogs(out, ld), "agent results are not usage")
	assert.Equal(t, 1, streamCount(t, x.js, streams.OutputStream("shop")))

	u := settled(t, x.js, "acct")
	assert.Equal(t, int64(100), u.Events, "what is stored, no more")
	metadatatest.AssertEqualJetstreamExporterRecordsThrottled(t, x.tt, []metricdata.DataPoint[int64]{throttledPoint("quota", 60)}, metricdatatest.IgnoreTimestamp())
}

// The project's rate is checked before the quota: over it 429 rate_limited with the
// limiter's Retry-After, and a request larger than the burst can never pass (413).
func TestRateLimitRefusesWholeRequests(t *testing.T) {
	x := startMetered(t, func(c *Config) { c.Usage.RateLimit = RateLimitConfig{PerSecond: 0.01, Burst: 100} })
	ctx := asProject("acct", "shop")
	require.NoError(t, x.e.pushLogs(ctx, logsOf(60, "a")))
	var th *pipelinectx.Throttled
	require.ErrorAs(t, x.e.pushLogs(ctx, logsOf(60, "b")), &th)
	assert.Equal(t, http.StatusTooManyRequests, th.Status)
	assert.Equal(t, apierror.RateLimited, th.Code)
	assert.InDelta(t, 2000, th.RetryAfter.Seconds(), 5, "20 records short at 0.01/s")
	require.ErrorAs(t, x.e.pushLogs(ctx, logsOf(101, "c")), &th)
	assert.Equal(t, http.StatusRequestEntityTooLarge, th.Status)
	assert.Equal(t, codes.InvalidArgument, th.GRPCStatus().Code(), "not retried by OTLP clients")
	require.NoError(t, x.e.pushLogs(asProject("acct", "other"), logsOf(60, "d")), "another project has its own bucket")
	assert.Equal(t, 60, streamCount(t, x.js, streams.RawStream("shop")))
	assert.Equal(t, int64(120), settled(t, x.js, "acct").Events, "refused records are not counted")
	metadatatest.AssertEqualJetstreamExporterRecordsThrottled(t, x.tt, []metricdata.DataPoint[int64]{throttledPoint("rate", 161)}, metricdatatest.IgnoreTimestamp())

	// A project's own rate from the mirror replaces the default, on the running exporter.
	require.NoError(t, x.m.PutProject(context.Background(), mirror.Project{ID: "other", Version: 1, IngestRate: &mirror.IngestRate{PerSecond: 1000, Burst: 1000}}))
	require.Eventually(t, func() bool { return x.e.pushLogs(asProject("acct", "other"), logsOf(500, "e")) == nil },
		5*time.Second, 20*time.Millisecond)
}

// A key without an account (an older control plane's entry) is metered under the
// project's account from the mirror; with neither, the records are not metered.
func TestAccountFromTheMirrorOrNone(t *testing.T) {
	x := startMetered(t, func(c *Config) { c.Usage.FreeTierEvents = 10 })
	require.NoError(t, x.e.pushLogs(asProject("", "orphan"), logsOf(20, "a")), "no account anywhere: not metered")
	require.NoError(t, x.m.PutProject(context.Background(), mirror.Project{ID: "owned", AccountID: "acct_m", Version: 1}))
	var th *pipelinectx.Throttled
	require.Eventually(t, func() bool {
		return errors.As(x.e.pushLogs(asProject("", "owned"), logsOf(20, "b")), &th)
	}, 5*time.Second, 20*time.Millisecond, "the project's account is metered once the mirror names it")
	assert.Equal(t, apierror.QuotaExceeded, th.Code)
}

// When storing fails the records are given back: a failed request does not stay counted.
func TestFailedStoreIsRefunded(t *testing.T) {
	x := startMetered(t, nil)
	ctx := asProject("acct", "gone")
	require.NoError(t, x.e.pushLogs(ctx, logsOf(50, "a")))
	// The stream deleted behind the exporter's back: the next publish finds no stream.
	require.NoError(t, x.js.DeleteStream(context.Background(), streams.RawStream("gone")))
	require.ErrorIs(t, x.e.pushLogs(ctx, logsOf(30, "b")), errNotConnected)
	assert.Equal(t, int64(50), settled(t, x.js, "acct").Events, "only the stored request counts")
}
