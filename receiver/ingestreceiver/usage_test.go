package ingestreceiver

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
	"github.com/otelcol-svc/otelcol-svc/internal/pipelinectx"
)

// meteredPipeline stands in for the JetStream exporter's metering: it refuses with err,
// or accepts and hands back quota through the request's pipelinectx.Ingest.
func meteredPipeline(t *testing.T, tr *testReceiver, err error, quota pipelinectx.Quota) {
	t.Helper()
	var e error
	tr.logs, e = consumer.NewLogs(func(ctx context.Context, _ plog.Logs) error {
		if err != nil {
			return err
		}
		if q := pipelinectx.IngestFrom(ctx).Quota; q != nil {
			*q = quota
		}
		return nil
	})
	require.NoError(t, e)
}

// The exporter's throttling refusal reaches the client as the contract's 429 with
// Retry-After on every surface; OTLP/HTTP as the throttling google.rpc.Status.
func TestThrottledAnswers(t *testing.T) {
	tr := startTestReceiver(t, nil, &fakeAuth{sources: githubSources()})
	quota := &pipelinectx.Throttled{Status: http.StatusTooManyRequests, Code: apierror.QuotaExceeded, RetryAfter: 90*time.Second + time.Millisecond,
		Err: errors.New("this account has used its 10,000 events for November 2026; the count resets at 2026-12-01T00:00:00Z; nothing was stored")}
	meteredPipeline(t, tr, quota, pipelinectx.Quota{})
	for _, path := range []string{"/v1/events", "/v1/events/batch", "/ingest/in_a"} {
		a := do(t, http.MethodPost, tr.url+path, []byte(`{"a":1}`), map[string]string{"X-API-Key": "key-p1"})
		require.Equal(t, http.StatusTooManyRequests, a.status, "%s: %s", path, a.body)
		assert.Equal(t, apierror.QuotaExceeded, a.code(t), path)
		assert.Equal(t, "91", a.header.Get("Retry-After"), "%s: whole seconds, rounded up", path)
		assert.Contains(t, string(a.body), "10,000 events", path)
		assert.Empty(t, a.header.Get("RateLimit-Remaining"), path)
	}
	a := do(t, http.MethodPost, tr.url+"/v1/logs", []byte(`{"resourceLogs":[{"scopeLogs":[{"logRecords":[{}]}]}]}`), map[string]string{"X-API-Key": "key-p1"})
	require.Equal(t, http.StatusTooManyRequests, a.status, "%s", a.body)
	assert.Equal(t, "91", a.header.Get("Retry-After"))
	assert.Equal(t, "application/json", a.header.Get("Content-Type"))

	rate := &pipelinectx.Throttled{Status: http.StatusTooManyRequests, Code: apierror.RateLimited, RetryAfter: 2 * time.Second, Err: errors.New("over the rate")}
	meteredPipeline(t, tr, rate, pipelinectx.Quota{})
	a = do(t, http.MethodPost, tr.url+"/v1/events", []byte(`{"a":1}`), map[string]string{"X-API-Key": "key-p1"})
	require.Equal(t, http.StatusTooManyRequests, a.status)
	assert.Equal(t, apierror.RateLimited, a.code(t))
	assert.Equal(t, "2", a.header.Get("Retry-After"))

	body, err := plogRequestProto()
	require.NoError(t, err)
	a = do(t, http.MethodPost, tr.url+"/v1/logs", body, map[string]string{"X-API-Key": "key-p1", "Content-Type": "application/x-protobuf"})
	require.Equal(t, http.StatusTooManyRequests, a.status)
	var st spb.Status
	require.NoError(t, proto.Unmarshal(a.body, &st))
	assert.Equal(t, int32(codes.ResourceExhausted), st.Code, "the OTLP/HTTP throttling answer")
	assert.Equal(t, "over the rate", st.Message)
}

func plogRequestProto() ([]byte, error) {
	ld := plog.NewLogs()
	ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords().AppendEmpty().Body().SetStr("x")
	return plogotlp.NewExportRequestFromLogs(ld).MarshalProto()
}

// Accepted answers of a metered account carry its remaining quota; an unlimited one's
// carry none.
func TestAcceptedAnswersCarryTheQuota(t *testing.T) {
	tr := startTestReceiver(t, nil, &fakeAuth{sources: githubSources()})
	reset := time.Now().Add(time.Hour)
	meteredPipeline(t, tr, nil, pipelinectx.Quota{Limit: 10000, Remaining: 9950, Reset: reset})
	for _, c := range []struct{ path, body string }{
		{"/v1/events", `{"a":1}`}, {"/v1/events/batch", `[{"a":1}]`}, {"/ingest/in_a", `{"a":1}`},
		{"/v1/logs", `{"resourceLogs":[{"scopeLogs":[{"logRecords":[{}]}]}]}`},
	} {
		a := do(t, http.MethodPost, tr.url+c.path, []byte(c.body), map[string]string{"X-API-Key": "key-p1"})
		require.Less(t, a.status, 300, "%s: %s", c.path, a.body)
		assert.Equal(t, "10000", a.header.Get("RateLimit-Limit"), c.path)
		assert.Equal(t, "9950", a.header.Get("RateLimit-Remaining"), c.path)
		assert.Equal(t, "3600", a.header.Get("RateLimit-Reset"), c.path)
	}
	meteredPipeline(t, tr, nil, pipelinectx.Quota{})
	a := do(t, http.MethodPost, tr.url+"/v1/events", []byte(`{"a":1}`), map[string]string{"X-API-Key": "key-p1"})
	require.Equal(t, http.StatusAccepted, a.status)
	assert.Empty(t, a.header.Get("RateLimit-Limit"), "unlimited: no quota headers")
}
