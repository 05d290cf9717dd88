package e2e

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
)

// rawCodec sends bytes as they are: pdata's marshaller does not write the smallest wire
// form of an empty log record (2 bytes), and the test needs the most records a message
// of the gRPC size limit can hold.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return v.([]byte), nil }
func (rawCodec) Unmarshal(b []byte, v any) error {
	*v.(*[]byte) = append([]byte(nil), b...)
	return nil
}
func (rawCodec) Name() string { return "proto" }

// smallestRecords is an OTLP logs export request of size bytes made of empty log records
// (2 bytes each on the wire, about 170 bytes each once decoded).
func smallestRecords(size int) []byte {
	records := make([]byte, 0, size)
	n := (size - 16) / 2
	for i := 0; i < n; i++ {
		records = protowire.AppendTag(records, 2, protowire.BytesType) // ScopeLogs.log_records
		records = protowire.AppendVarint(records, 0)
	}
	scope := protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), records)  // ResourceLogs.scope_logs
	resource := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), scope) // request.resource_logs
	return resource
}

// Concurrent OTLP/gRPC log exports at the gRPC message limit (4 MiB) keep the receiver's
// peak RSS under the documented bound, whether a message holds the most records it can
// (about 2 million empty ones, refused as one request can never be stored) or 10,000
// records of 400 bytes (stored, or refused with a retryable status while the receiver
// is busy).
func TestConcurrentLargeGRPCExportsStayUnderTheMemoryBound(t *testing.T) {
	e := startReceiver(t, nil)
	key := e.project(t, "grpcmemory")

	const msgLimit = 4 << 20
	tiny := smallestRecords(msgLimit - 64)
	ld := plog.NewLogs()
	lrs := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords()
	for i := 0; i < 10000; i++ {
		lrs.AppendEmpty().Body().SetStr(strings.Repeat("y", 400))
	}
	normal, err := plogotlp.NewExportRequestFromLogs(ld).MarshalProto()
	require.NoError(t, err)
	require.Less(t, len(normal), msgLimit)
	require.Greater(t, len(normal), msgLimit*9/10, "near the message limit")
	bodies := [][]byte{tiny, normal}

	conn, err := grpc.NewClient(e.col.GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{}), grpc.MaxCallSendMsgSize(msgLimit)))
	require.NoError(t, err)
	defer conn.Close()

	const clients, rounds = 12, 3
	var mu sync.Mutex
	codesSeen := map[string]int{}
	var wg sync.WaitGroup
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				which := (c + r) % len(bodies)
				ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "x-api-key", key), 60*time.Second)
				var resp []byte
				err := conn.Invoke(ctx, "/opentelemetry.proto.collector.logs.v1.LogsService/Export", bodies[which], &resp)
				cancel()
				st := status.Convert(err)
				mu.Lock()
				codesSeen[[]string{"tiny", "normal"}[which]+"/"+st.Code().String()]++
				mu.Unlock()
				switch {
				case st.Code() == codes.OK:
					assert.Equal(t, 1, which, "the 2-million-record message was stored")
				case st.Code() == codes.Unavailable:
				case st.Code() == codes.ResourceExhausted && retryInfo(st):
				case which == 0 && (st.Code() == codes.InvalidArgument || st.Code() == codes.Internal || st.Code() == codes.ResourceExhausted):
					// Not retryable per the OTLP spec (ResourceExhausted without retry
					// info): the request can never be stored, and the answer says why.
					assert.Contains(t, st.Message(), "10000 records per request")
				default:
					t.Errorf("%s: %v", []string{"tiny", "normal"}[which], err)
				}
			}
		}(c)
	}
	wg.Wait()
	hwm := peakRSS(t, e.col.Pid())
	t.Logf("codes %v; peak RSS %d MiB (bound %d MiB)", codesSeen, hwm>>20, rssBound>>20)
	assert.Less(t, hwm, int64(rssBound), "peak RSS")
	assert.Positive(t, codesSeen["normal/OK"], "requests within the limits are still stored")
}

func retryInfo(st *status.Status) bool {
	for _, d := range st.Details() {
		if _, ok := d.(*errdetails.RetryInfo); ok {
			return true
		}
	}
	return false
}
