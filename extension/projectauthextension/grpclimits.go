package projectauthextension

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/collector/extension/extensionmiddleware"
	"golang.org/x/sync/semaphore"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/records"
)

// OTLP/gRPC requests are decoded by grpc-go before any interceptor, authenticator or
// pipeline component sees them, and decoding costs about 170 bytes per log record: a
// 4 MiB message of empty records (2 bytes each) holds 2 million of them and decodes to
// about 340 MiB. The configgrpc settings bound the message's bytes, not what it holds,
// and an exporter can only refuse what is already decoded. A server codec is the one
// place that sees the message's bytes before they are decoded, so the record count is
// checked there (internal/collector/records counts without decoding, as for OTLP/HTTP).

var _ extensionmiddleware.GRPCServer = (*authenticator)(nil)

// GetGRPCServerOptions makes the gRPC server of a receiver that lists projectauth under
// `middlewares` count each OTLP request's records before decoding it.
func (a *authenticator) GetGRPCServerOptions(context.Context) ([]grpc.ServerOption, error) {
	var opts []grpc.ServerOption
	if a.cfg.GRPC.MaxRecordsPerRequest > 0 {
		base := encoding.GetCodecV2("proto") // pdata's, registered by the otlp packages
		if base == nil {
			return nil, fmt.Errorf("no gRPC proto codec registered")
		}
		opts = append(opts, grpc.ForceServerCodecV2(countingCodec{base: base, max: a.cfg.GRPC.MaxRecordsPerRequest}))
	}
	if a.cfg.GRPC.MaxInflightBytes > 0 {
		adm := newGRPCAdmission(a.cfg.GRPC)
		opts = append(opts, grpc.InTapHandle(adm.tap), grpc.StatsHandler(adm))
	}
	return opts, nil
}

// Memory a request costs while it is decoded and stored: the ingest receiver's measured
// estimate (receiver/ingestreceiver/admission.go), 4x the message and 1 KiB per record.
const (
	costPerBodyByte = 4
	costPerRecord   = 1024
	// defaultMaxRecvMsg is grpc-go's message limit (max_recv_msg_size_mib unset).
	defaultMaxRecvMsg = 4 << 20
)

// grpcAdmission bounds what OTLP/gRPC requests being decoded and stored may cost at once
// (grpc.max_inflight_bytes), as the ingest receiver does for HTTP. The stock receiver
// offers no such bound (max_concurrent_streams is per connection). The only hook before
// grpc-go reads and decodes a message is the tap handle, which sees headers alone, so a
// request reserves the most a message may cost there and gives back the excess once its
// size is known (InPayload); what cannot be reserved is answered UNAVAILABLE with retry
// info, which OTLP clients retry after a back-off. The reservation ends with the stream.
type grpcAdmission struct {
	sem        *semaphore.Weighted
	budget     int64
	guess      int64
	maxRecords int64
}

func newGRPCAdmission(cfg GRPCLimitsConfig) *grpcAdmission {
	maxRecords := int64(cfg.MaxRecordsPerRequest)
	if maxRecords <= 0 {
		maxRecords = defaultMaxRecvMsg / 2 // the most a message can hold, 2 bytes a record
	}
	return &grpcAdmission{
		sem:        semaphore.NewWeighted(cfg.MaxInflightBytes),
		budget:     cfg.MaxInflightBytes,
		guess:      min(costPerBodyByte*defaultMaxRecvMsg+costPerRecord*maxRecords, cfg.MaxInflightBytes),
		maxRecords: maxRecords,
	}
}

type admissionKey struct{}

// reservation is what one stream holds of the budget.
type reservation struct {
	a    *grpcAdmission
	mu   sync.Mutex
	held int64
}

var errBusy = func() error {
	st, err := status.New(codes.Unavailable, "the receiver is busy decoding other requests; retry shortly").
		WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(time.Second)})
	if err != nil {
		panic(err)
	}
	return st.Err()
}()

func (g *grpcAdmission) tap(ctx context.Context, _ *tap.Info) (context.Context, error) {
	if !g.sem.TryAcquire(g.guess) {
		return nil, errBusy
	}
	r := &reservation{a: g, held: g.guess}
	// grpc-go cancels a stream's context once its status is written, on every path.
	context.AfterFunc(ctx, func() { r.resize(0) })
	return context.WithValue(ctx, admissionKey{}, r), nil
}

// resize sets the reservation to n bytes; growing it is best effort (the message is
// already decoded by then).
func (r *reservation) resize(n int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch d := n - r.held; {
	case d < 0:
		r.a.sem.Release(-d)
		r.held = n
	case d > 0 && r.a.sem.TryAcquire(d):
		r.held = n
	}
}

func (g *grpcAdmission) HandleRPC(ctx context.Context, s stats.RPCStats) {
	p, ok := s.(*stats.InPayload)
	if !ok {
		return
	}
	if r, ok := ctx.Value(admissionKey{}).(*reservation); ok {
		n := int64(p.Length)
		r.resize(costPerBodyByte*n + costPerRecord*min(g.maxRecords, n/2))
	}
}

func (*grpcAdmission) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context   { return ctx }
func (*grpcAdmission) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (*grpcAdmission) HandleConn(context.Context, stats.ConnStats)                       {}

// countingCodec refuses an OTLP export request with more than max records before
// decoding it. grpc-go answers a codec's error with INTERNAL (not retryable under the
// OTLP specification, which is right: the request can never succeed) and the message,
// prefixed "grpc: error unmarshalling request: ".
type countingCodec struct {
	base encoding.CodecV2
	max  int
}

func (c countingCodec) Name() string { return c.base.Name() }

func (c countingCodec) Marshal(v any) (mem.BufferSlice, error) { return c.base.Marshal(v) }

func (c countingCodec) Unmarshal(data mem.BufferSlice, v any) error {
	signal, noun := requestSignal(v)
	if signal == "" {
		return c.base.Unmarshal(data, v)
	}
	// One contiguous view for counting, handed on as it is: the base codec would
	// materialize the message the same way, and a one-buffer slice is not copied again.
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	n, err := records.CountOTLP(signal, buf.ReadOnlyData(), false)
	if err != nil {
		return err
	}
	if n > c.max {
		return fmt.Errorf("the request holds %d %s, over the limit of %d records per request; send them in smaller requests", n, noun, c.max)
	}
	return c.base.Unmarshal(mem.BufferSlice{buf}, v)
}

// requestSignal tells an OTLP export request by its type's name (pdata's request types
// are internal): "" for anything else, which is decoded unchecked.
func requestSignal(v any) (signal, noun string) {
	t := reflect.TypeOf(v)
	if t == nil {
		return "", ""
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch name := t.Name(); {
	case !strings.HasPrefix(name, "Export") || !strings.HasSuffix(name, "ServiceRequest"):
		return "", ""
	case strings.Contains(name, "Logs"):
		return records.SignalLog, "log records"
	case strings.Contains(name, "Trace"):
		return records.SignalSpan, "spans"
	case strings.Contains(name, "Metrics"):
		return records.SignalMetric, "metric data points"
	}
	return "", ""
}
