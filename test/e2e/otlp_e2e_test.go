package e2e

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/otelcol-svc/otelcol-svc/internal/streams"
)

func TestOTLPLogsJSONLandAsFlatRecords(t *testing.T) {
	e := startReceiver(t, nil)
	key := e.project(t, "shop")
	body, err := os.ReadFile("testdata/spec_logs.json")
	require.NoError(t, err)

	r := post(t, e.col.HTTP+"/v1/logs", key, "application/json", body, nil)
	require.Equal(t, http.StatusOK, r.StatusCode, "%s", r.Body)
	assert.Equal(t, "application/json", r.Header.Get("Content-Type"))
	resp := plogotlp.NewExportResponse()
	require.NoError(t, resp.UnmarshalJSON(r.Body))
	assert.Zero(t, resp.PartialSuccess().RejectedLogRecords())

	msgs := stored(t, e.js, "shop")
	require.Len(t, msgs, 3)
	resource := map[string]any{"service.name": "checkout", "k8s.pod.name": "checkout-7f9c", "k8s.namespace.name": "shop"}
	want := []map[string]any{
		{
			"resourceAttributes": resource, "scope": map[string]any{"name": "app.logger"},
			"severityNumber": json.Number("17"), "severityText": "ERROR", "body": "payment failed",
			"attributes": map[string]any{"http.status_code": json.Number("502"), "retryable": true},
			"traceId":    "5b8efff798038103d269b633813fc60c", "spanId": "eee19b7ec3c1b174",
			"timestamp": "2024-05-01T12:00:00.123456789Z", "eventName": "",
		},
		{
			"resourceAttributes": resource, "scope": map[string]any{"name": "app.logger"},
			"severityNumber": json.Number("9"), "severityText": "INFO", "body": "retrying",
			"attributes": map[string]any{}, "traceId": "", "spanId": "",
			"timestamp": "2024-05-01T12:00:01.000000000Z", "eventName": "",
		},
		{ // no timeUnixNano: the observed time is used
			"resourceAttributes": resource, "scope": map[string]any{"name": "app.logger"},
			"severityNumber": json.Number("13"), "severityText": "WARN", "body": "slow response",
			"attributes": map[string]any{}, "traceId": "", "spanId": "",
			"timestamp": "2024-05-01T12:00:02.000000001Z", "eventName": "",
		},
	}
	for i, m := range msgs {
		assert.Equal(t, want[i], decodeRecord(t, m.Data), "record %d", i)
		assert.Equal(t, "log", m.Header.Get(streams.HeaderSignal))
		assert.Equal(t, streams.RawSubject("shop"), m.Subject)
	}
}

// The same request as gzip-compressed protobuf, and over gRPC, gives byte-identical records.
func TestOTLPLogsProtobufGzipAndGRPCMatchJSON(t *testing.T) {
	e := startReceiver(t, nil)
	keyJSON := e.project(t, "viajson")
	keyPB := e.project(t, "viaproto")
	keyGRPC := e.project(t, "viagrpc")
	body, err := os.ReadFile("testdata/spec_logs.json")
	require.NoError(t, err)
	req := plogotlp.NewExportRequest()
	require.NoError(t, req.UnmarshalJSON(body))
	pb, err := req.MarshalProto()
	require.NoError(t, err)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(pb)
	require.NoError(t, zw.Close())

	require.Equal(t, http.StatusOK, post(t, e.col.HTTP+"/v1/logs", keyJSON, "application/json", body, nil).StatusCode)
	r := post(t, e.col.HTTP+"/v1/logs", keyPB, "application/x-protobuf", gz.Bytes(), map[string]string{"Content-Encoding": "gzip"})
	require.Equal(t, http.StatusOK, r.StatusCode, "%s", r.Body)
	assert.Equal(t, "application/x-protobuf", r.Header.Get("Content-Type"))
	var resp = plogotlp.NewExportResponse()
	require.NoError(t, resp.UnmarshalProto(r.Body))

	conn, err := grpc.NewClient(e.col.GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	client := plogotlp.NewGRPCClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = client.Export(metadata.AppendToOutgoingContext(ctx, "x-api-key", keyGRPC), req)
	require.NoError(t, err)

	// Without a key, or with a wrong one, gRPC refuses as Unauthenticated.
	_, err = client.Export(ctx, req)
	assert.Equal(t, codes.Unauthenticated, status.Code(err))
	_, err = client.Export(metadata.AppendToOutgoingContext(ctx, "x-api-key", "osk_wrong"), req)
	assert.Equal(t, codes.Unauthenticated, status.Code(err))

	viaJSON := stored(t, e.js, "viajson")
	require.Len(t, viaJSON, 3)
	for _, other := range []string{"viaproto", "viagrpc"} {
		msgs := stored(t, e.js, other)
		require.Len(t, msgs, 3, other)
		for i := range msgs {
			assert.Equal(t, string(viaJSON[i].Data), string(msgs[i].Data), "%s record %d", other, i)
		}
	}
}

func TestOTLPTracesAndMetricsOneRecordPerSpanAndPoint(t *testing.T) {
	e := startReceiver(t, nil)
	key := e.project(t, "tm")

	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "api")
	ss := rs.ScopeSpans().AppendEmpty()
	for i, name := range []string{"GET /cart", "SELECT cart", "POST /pay"} {
		s := ss.Spans().AppendEmpty()
		s.SetName(name)
		s.SetTraceID([16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
		s.SetSpanID([8]byte{1, 1, 1, 1, 1, 1, 1, byte(i + 1)})
		s.SetKind(ptrace.SpanKindServer)
		start := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
		s.SetStartTimestamp(pcommonTime(start))
		s.SetEndTimestamp(pcommonTime(start.Add(1500 * time.Microsecond)))
		if name == "POST /pay" {
			s.Status().SetCode(ptrace.StatusCodeError)
			s.Status().SetMessage("card declined")
		}
	}
	tb, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	require.NoError(t, err)
	r := post(t, e.col.HTTP+"/v1/traces", key, "application/x-protobuf", tb, nil)
	require.Equal(t, http.StatusOK, r.StatusCode, "%s", r.Body)

	md := pmetric.NewMetrics()
	sm := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty()
	g := sm.Metrics().AppendEmpty()
	g.SetName("queue.depth")
	g.SetEmptyGauge()
	g.Gauge().DataPoints().AppendEmpty().SetIntValue(3)
	g.Gauge().DataPoints().AppendEmpty().SetIntValue(7)
	h := sm.Metrics().AppendEmpty()
	h.SetName("latency")
	hp := h.SetEmptyHistogram().DataPoints().AppendEmpty()
	hp.SetCount(4)
	hp.SetSum(10.5)
	hp.BucketCounts().FromRaw([]uint64{1, 3})
	hp.ExplicitBounds().FromRaw([]float64{5})
	mj, err := pmetricotlp.NewExportRequestFromMetrics(md).MarshalJSON()
	require.NoError(t, err)
	r = post(t, e.col.HTTP+"/v1/metrics", key, "application/json", mj, nil)
	require.Equal(t, http.StatusOK, r.StatusCode, "%s", r.Body)

	msgs := stored(t, e.js, "tm")
	require.Len(t, msgs, 6)
	for i := 0; i < 3; i++ {
		assert.Equal(t, "span", msgs[i].Header.Get(streams.HeaderSignal))
	}
	pay := decodeRecord(t, msgs[2].Data)
	assert.Equal(t, "POST /pay", pay["name"])
	assert.Equal(t, "server", pay["kind"])
	assert.Equal(t, map[string]any{"code": "error", "message": "card declined"}, pay["status"])
	assert.Equal(t, "0102030405060708090a0b0c0d0e0f10", pay["traceId"])
	assert.Equal(t, json.Number("1.5"), pay["durationMs"])
	assert.Equal(t, map[string]any{"service.name": "api"}, pay["resourceAttributes"])

	var values []any
	for i := 3; i < 6; i++ {
		assert.Equal(t, "metric", msgs[i].Header.Get(streams.HeaderSignal))
		values = append(values, decodeRecord(t, msgs[i].Data))
	}
	assert.Equal(t, "gauge", values[0].(map[string]any)["type"])
	assert.Equal(t, json.Number("3"), values[0].(map[string]any)["value"])
	assert.Equal(t, json.Number("7"), values[1].(map[string]any)["value"])
	hist := values[2].(map[string]any)
	assert.Equal(t, "histogram", hist["type"])
	assert.Equal(t, "latency", hist["name"])
	assert.Equal(t, json.Number("4"), hist["count"])
	assert.Equal(t, json.Number("10.5"), hist["sum"])
}

// A span link, a span's trace state and a log's event name reach the raw stream,
// over both OTLP/gRPC (what telemetrygen uses) and OTLP/HTTP JSON.
func TestOTLPSpanLinksAndLogEventNameLand(t *testing.T) {
	e := startReceiver(t, nil)
	key := e.project(t, "links")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, "x-api-key", key)
	conn, err := grpc.NewClient(e.col.GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()

	td := ptrace.NewTraces()
	s := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	s.SetName("consume order")
	s.SetTraceID([16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
	s.SetSpanID([8]byte{1, 1, 1, 1, 1, 1, 1, 1})
	s.TraceState().FromRaw("vendor=a1")
	start := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	s.SetStartTimestamp(pcommonTime(start))
	s.SetEndTimestamp(pcommonTime(start.Add(time.Millisecond)))
	link := s.Links().AppendEmpty()
	link.SetTraceID([16]byte{16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1})
	link.SetSpanID([8]byte{2, 2, 2, 2, 2, 2, 2, 2})
	link.Attributes().PutStr("messaging.operation", "publish")
	_, err = ptraceotlp.NewGRPCClient(conn).Export(ctx, ptraceotlp.NewExportRequestFromTraces(td))
	require.NoError(t, err)

	body := []byte(`{"resourceLogs":[{"scopeLogs":[{"logRecords":[
		{"timeUnixNano":"1714564800000000000","eventName":"app.login","body":{"stringValue":"ok"}}]}]}]}`)
	r := post(t, e.col.HTTP+"/v1/logs", key, "application/json", body, nil)
	require.Equal(t, http.StatusOK, r.StatusCode, "%s", r.Body)

	msgs := stored(t, e.js, "links")
	require.Len(t, msgs, 2)
	span := decodeRecord(t, msgs[0].Data)
	assert.Equal(t, "vendor=a1", span["traceState"])
	assert.Equal(t, []any{map[string]any{
		"traceId": "100f0e0d0c0b0a090807060504030201", "spanId": "0202020202020202", "traceState": "",
		"attributes": map[string]any{"messaging.operation": "publish"},
	}}, span["links"])
	assert.Equal(t, "2024-05-01T12:00:00.000000000Z", span["timestamp"])
	log := decodeRecord(t, msgs[1].Data)
	assert.Equal(t, "log", msgs[1].Header.Get(streams.HeaderSignal))
	assert.Equal(t, "app.login", log["eventName"])
}
