package projectauthextension

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/extension/extensiontest"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/otelcol-svc/otelcol-svc/extension/projectauthextension/internal/metadata"
)

type logsSink struct {
	plogotlp.UnimplementedGRPCServer
	got   chan int
	block chan struct{} // when set, each request waits for a value here before answering
}

func (s *logsSink) Export(_ context.Context, req plogotlp.ExportRequest) (plogotlp.ExportResponse, error) {
	s.got <- req.Logs().LogRecordCount()
	if s.block != nil {
		<-s.block
	}
	return plogotlp.NewExportResponse(), nil
}

type tracesSink struct {
	ptraceotlp.UnimplementedGRPCServer
	got chan int
}

func (s *tracesSink) Export(_ context.Context, req ptraceotlp.ExportRequest) (ptraceotlp.ExportResponse, error) {
	s.got <- req.Traces().SpanCount()
	return ptraceotlp.NewExportResponse(), nil
}

// A gRPC server with projectauth as middleware refuses an OTLP request holding more
// records than grpc.max_records_per_request, with a message naming the limit and a
// status clients do not retry, and hands on requests within it whole.
func TestGRPCRequestsOverTheRecordLimitAreRefused(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.GRPC.MaxRecordsPerRequest = 3
	logs, traces := &logsSink{got: make(chan int, 1)}, &tracesSink{got: make(chan int, 1)}
	conn := serveGRPC(t, cfg, logs, traces)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	logsOf := func(n int) plogotlp.ExportRequest {
		ld := plog.NewLogs()
		// Records spread over resources and scopes count all the same.
		for i := 0; i < n; i++ {
			ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords().AppendEmpty()
		}
		return plogotlp.NewExportRequestFromLogs(ld)
	}
	_, err := plogotlp.NewGRPCClient(conn).Export(ctx, logsOf(3))
	require.NoError(t, err)
	assert.Equal(t, 3, <-logs.got)

	_, err = plogotlp.NewGRPCClient(conn).Export(ctx, logsOf(4))
	st := status.Convert(err)
	assert.Equal(t, codes.Internal, st.Code(), "not a code OTLP clients retry: %v", err)
	assert.Contains(t, st.Message(), "the request holds 4 log records, over the limit of 3 records per request")
	assert.Empty(t, logs.got, "the refused request reached the service")

	td := ptrace.NewTraces()
	spans := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans()
	for i := 0; i < 5; i++ {
		spans.AppendEmpty()
	}
	_, err = ptraceotlp.NewGRPCClient(conn).Export(ctx, ptraceotlp.NewExportRequestFromTraces(td))
	assert.Contains(t, status.Convert(err).Message(), "the request holds 5 spans, over the limit of 3 records per request")
	assert.Empty(t, traces.got)

	// Malformed protobuf is refused as the decoder would refuse it.
	var resp []byte
	err = conn.Invoke(ctx, "/opentelemetry.proto.collector.logs.v1.LogsService/Export", []byte{0x0a, 0x05, 0x12}, &resp, grpc.ForceCodec(rawCodec{}))
	assert.Equal(t, codes.Internal, status.Code(err), "%v", err)
	assert.Empty(t, logs.got)
}

// serveGRPC serves logs and traces with projectauth's gRPC options for cfg.
func serveGRPC(t *testing.T, cfg *Config, logs *logsSink, traces *tracesSink) *grpc.ClientConn {
	t.Helper()
	ext, err := NewFactory().Create(context.Background(), extensiontest.NewNopSettings(metadata.Type), cfg)
	require.NoError(t, err)
	opts, err := ext.(*authenticator).GetGRPCServerOptions(context.Background())
	require.NoError(t, err)
	srv := grpc.NewServer(opts...)
	plogotlp.RegisterGRPCServer(srv, logs)
	ptraceotlp.RegisterGRPCServer(srv, traces)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// Requests being decoded and stored hold at most grpc.max_inflight_bytes (estimated) at
// once: a small request gives back the worst-case reservation it made before its size
// was known, so several run side by side, while a large one keeps others out until it is
// done; those are answered UNAVAILABLE with retry info (OTLP clients retry it).
func TestGRPCRequestsPastTheInflightBudgetAreToldToRetry(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.GRPC.MaxInflightBytes = 30 << 20 // one worst-case reservation (26 MiB) fits
	logs := &logsSink{got: make(chan int, 3), block: make(chan struct{})}
	conn := serveGRPC(t, cfg, logs, &tracesSink{got: make(chan int, 1)})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	small := plog.NewLogs()
	small.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords().AppendEmpty().Body().SetStr("small")
	big := plog.NewLogs()
	big.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords().AppendEmpty().Body().SetStr(strings.Repeat("b", 3<<20))
	export := func(ld plog.Logs) chan error {
		done := make(chan error, 1)
		go func() {
			_, err := plogotlp.NewGRPCClient(conn).Export(ctx, plogotlp.NewExportRequestFromLogs(ld))
			done <- err
		}()
		return done
	}

	// Two small requests held in the service at once.
	first := export(small)
	<-logs.got
	second := export(small)
	select {
	case <-logs.got:
	case err := <-second:
		t.Fatalf("a small request was refused while another small one was held: %v", err)
	}
	logs.block <- struct{}{}
	logs.block <- struct{}{}
	require.NoError(t, <-first)
	require.NoError(t, <-second)

	// A 3 MiB request held in the service (about 22 MiB estimated) leaves no room for
	// the next request's reservation.
	large := export(big)
	<-logs.got
	_, err := plogotlp.NewGRPCClient(conn).Export(ctx, plogotlp.NewExportRequestFromLogs(small))
	st := status.Convert(err)
	require.Equal(t, codes.Unavailable, st.Code(), "%v", err)
	assert.Contains(t, st.Message(), "busy")
	require.Len(t, st.Details(), 1)
	assert.IsType(t, &errdetails.RetryInfo{}, st.Details()[0])
	assert.Empty(t, logs.got, "the refused request reached the service")

	// Once it is done, the budget is back. The server releases it when it finishes the
	// RPC, which can be just after the client has read its answer, so a request right
	// then may still be told to retry (as OTLP clients do): within a few tries it is taken.
	logs.block <- struct{}{}
	require.NoError(t, <-large)
	for try := 0; ; try++ {
		require.Less(t, try, 100, "the budget never came back")
		retried := export(small)
		select {
		case <-logs.got:
			logs.block <- struct{}{}
			require.NoError(t, <-retried)
			return
		case err := <-retried:
			require.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
			time.Sleep(10 * time.Millisecond) // the client's retry delay
		}
	}
}

// rawCodec sends bytes as they are, to send malformed messages.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return v.([]byte), nil }
func (rawCodec) Unmarshal(b []byte, v any) error {
	*v.(*[]byte) = append([]byte(nil), b...)
	return nil
}
func (rawCodec) Name() string { return "proto" }
