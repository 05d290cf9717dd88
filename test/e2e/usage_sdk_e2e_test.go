package e2e

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/usage"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// rpcLog records the export calls an OTel SDK exporter makes on the wire, retries
// included, with what the receiver answered.
type rpcLog struct {
	mu    sync.Mutex
	calls []rpcCall
}

type rpcCall struct {
	at    time.Time
	code  codes.Code
	delay time.Duration // the RetryInfo's, if any
}

func (l *rpcLog) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	c := rpcCall{at: time.Now(), code: status.Code(err)}
	for _, d := range status.Convert(err).Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			c.delay = ri.RetryDelay.AsDuration()
		}
	}
	l.mu.Lock()
	l.calls = append(l.calls, c)
	l.mu.Unlock()
	return err
}

func (l *rpcLog) snapshot() []rpcCall {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]rpcCall(nil), l.calls...)
}

// sdkExporter is the OTel Go SDK's OTLP/gRPC trace exporter with its retry on (as by
// default), a fast backoff of its own, and a minute's retry budget (its default).
func sdkExporter(t *testing.T, endpoint, key string, log *rpcLog) *otlptrace.Exporter {
	t.Helper()
	exp, err := otlptracegrpc.New(context.Background(),
		otlptracegrpc.WithEndpoint(endpoint), otlptracegrpc.WithInsecure(),
		otlptracegrpc.WithHeaders(map[string]string{"x-api-key": key}),
		otlptracegrpc.WithDialOption(grpc.WithUnaryInterceptor(log.intercept)),
		otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: true, InitialInterval: 10 * time.Millisecond, MaxInterval: 100 * time.Millisecond, MaxElapsedTime: time.Minute}),
	)
	require.NoError(t, err)
	t.Cleanup(func() { _ = exp.Shutdown(context.Background()) })
	return exp
}

func spans(n int) []sdktrace.ReadOnlySpan {
	stubs := make(tracetest.SpanStubs, n)
	for i := range stubs {
		stubs[i] = tracetest.SpanStub{
			Name: "op", StartTime: time.Now(), EndTime: time.Now(),
			SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1, byte(i)}, SpanID: trace.SpanID{2, byte(i)}, TraceFlags: trace.FlagsSampled}),
		}
	}
	return stubs.Snapshots()
}

// An OTel SDK client past its account's quota gets RESOURCE_EXHAUSTED with a RetryInfo of
// the time to the month's reset, and does not hammer: each export is one call, which the
// SDK gives up on at once because the delay is longer than its retry budget. Throttled by
// the project's rate instead, with a delay of a second, it waits that long and then
// succeeds.
func TestOTelSDKBacksOffWhenThrottled(t *testing.T) {
	n := testenv.StartNATS(t)
	js, m := connectMirror(t, n.URL())
	quotaKey := meteredProject(t, m, "", "acct_sdk_quota", "sdk-quota", nil)
	rateKey := meteredProject(t, m, "", "acct_sdk_rate", "sdk-rate", func(p *mirror.Project) {
		p.IngestRate = &mirror.IngestRate{PerSecond: 10, Burst: 10}
	})
	limits, err := usage.OpenLimits(context.Background(), js, 1)
	require.NoError(t, err)
	require.NoError(t, limits.Set(context.Background(), "acct_sdk_quota", 10))
	col := testenv.StartCollector(t, testenv.CollectorOptions{Config: "configs/receiver.yaml", Env: map[string]string{"NATS_URL": n.URL(), "SVC_STREAM_REPLICAS": "1"}})
	waitAccepted(t, col.HTTP, quotaKey)
	waitAccepted(t, col.HTTP, rateKey)

	// Quota: 10 spans fit, then every export for 5 s is refused.
	var qlog rpcLog
	exp := sdkExporter(t, col.GRPC, quotaKey, &qlog)
	require.NoError(t, exp.ExportSpans(context.Background(), spans(10)))
	exports, start := 0, time.Now()
	var lastErr error
	for time.Since(start) < 5*time.Second {
		lastErr = exp.ExportSpans(context.Background(), spans(10))
		require.Error(t, lastErr, "past the quota")
		exports++
		time.Sleep(100 * time.Millisecond) // an application's batch interval, shortened
	}
	calls := qlog.snapshot()
	t.Logf("quota: %d exports in 5 s made %d calls; the SDK said: %v", exports, len(calls)-1, lastErr)
	require.Len(t, calls, exports+1, "one call per export: the SDK never retried a throttled export")
	for _, c := range calls[1:] {
		assert.Equal(t, codes.ResourceExhausted, c.code)
		assert.InDelta(t, float64(usage.RetryAfter(time.Now())), c.delay.Seconds(), 60, "RetryInfo: the time to the month's reset")
	}
	assert.Contains(t, lastErr.Error(), "max retry time would elapse", "the SDK gave up because of the delay")
	assert.Equal(t, 10, rawCount(t, js, "sdk-quota"))

	// Rate: a second export of 10 right after the first finds the bucket empty; the SDK
	// waits the second the RetryInfo asks for, and its retry is stored.
	var rlog rpcLog
	exp = sdkExporter(t, col.GRPC, rateKey, &rlog)
	require.NoError(t, exp.ExportSpans(context.Background(), spans(10)))
	require.NoError(t, exp.ExportSpans(context.Background(), spans(10)), "stored after the SDK's retry")
	calls = rlog.snapshot()
	require.GreaterOrEqual(t, len(calls), 3)
	for i, c := range calls {
		t.Logf("rate: call %d: %v (RetryInfo %v), %v after the first", i, c.code, c.delay, c.at.Sub(calls[0].at).Round(time.Millisecond))
	}
	assert.Equal(t, codes.ResourceExhausted, calls[1].code)
	assert.Equal(t, time.Second, calls[1].delay)
	assert.Len(t, calls, 3, "one refused call, then the retry after the delay")
	assert.GreaterOrEqual(t, calls[2].at.Sub(calls[1].at), 900*time.Millisecond, "the retry waited for the RetryInfo's delay, not the SDK's 10 ms backoff")
	assert.Equal(t, 20, rawCount(t, js, "sdk-rate"))
}
