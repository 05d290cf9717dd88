package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
)

// A request whose second record is 2 MiB (over NATS's 1 MiB max_payload) is refused whole
// with 413 naming the per-record limit, on every surface and in both publish modes, and
// nothing of it is stored however often it is retried.
func TestOversizedRecordIsRefusedWholeOnEverySurface(t *testing.T) {
	for _, mode := range []string{"async", "fast_batch"} {
		t.Run(mode, func(t *testing.T) {
			e := startReceiver(t, map[string]string{"SVC_PUBLISH_MODE": mode})
			project := "big" + strings.ReplaceAll(mode, "_", "")
			key := e.project(t, project)
			src := e.source(t, mirror.Source{ID: "src_" + project, ProjectID: project, Name: "big", Connector: "webhook"}, nil)

			huge := strings.Repeat("x", 2<<20)
			bigObject := `{"b":"` + huge + `"}`
			logs := plogotlp.NewExportRequestFromLogs(func() plog.Logs {
				ld := plog.NewLogs()
				lrs := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords()
				lrs.AppendEmpty().Body().SetStr("small")
				lrs.AppendEmpty().Body().SetStr(huge)
				return ld
			}())
			otlpJSON, err := logs.MarshalJSON()
			require.NoError(t, err)
			otlpPB, err := logs.MarshalProto()
			require.NoError(t, err)

			type surface struct {
				url, contentType string
				body             []byte
				headers          map[string]string
				otlp             bool
			}
			apiKey := map[string]string{"X-API-Key": key}
			surfaces := map[string]surface{
				"events":       {"/v1/events", "application/json", []byte(bigObject), apiKey, false},
				"events/batch": {"/v1/events/batch", "application/json", []byte(`[{"a":1},` + bigObject + `]`), apiKey, false},
				"ndjson":       {"/v1/events/batch", "application/x-ndjson", []byte("{\"a\":1}\n" + bigObject + "\n"), apiKey, false},
				"agent-output": {"/internal/agent-output", "application/json", []byte(`{"request_id":"req_1","payload":` + bigObject + `}`), apiKey, false},
				"ingest":       {"/ingest/" + src.IngestKey, "application/json", []byte(`[{"a":1},` + bigObject + `]`), bearer(src.APIKey), false},
				"otlp/json":    {"/v1/logs", "application/json", otlpJSON, apiKey, true},
				"otlp/proto":   {"/v1/logs", "application/x-protobuf", otlpPB, apiKey, true},
			}
			for name, s := range surfaces {
				for attempt := 0; attempt < 3; attempt++ {
					r := post(t, e.col.HTTP+s.url, "", s.contentType, s.body, s.headers)
					require.Equal(t, http.StatusRequestEntityTooLarge, r.StatusCode, "%s: %.300s", name, r.Body)
					assert.Empty(t, r.Header.Get("Retry-After"), name)
					var msg string
					switch {
					case s.otlp && s.contentType == "application/json":
						var st spb.Status
						require.NoError(t, protojson.Unmarshal(r.Body, &st), name)
						assert.Equal(t, int32(codes.InvalidArgument), st.Code, name)
						msg = st.Message
					case s.otlp:
						assert.Equal(t, "application/x-protobuf", r.Header.Get("Content-Type"), name)
						continue
					default:
						assert.Equal(t, "payload_too_large", errorCode(t, r), name)
						msg = string(r.Body)
					}
					assert.Contains(t, msg, "over the limit of 1000000 bytes per record", name)
				}
			}

			conn, err := grpc.NewClient(e.col.GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
			require.NoError(t, err)
			defer conn.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			for attempt := 0; attempt < 3; attempt++ {
				_, err = plogotlp.NewGRPCClient(conn).Export(metadata.AppendToOutgoingContext(ctx, "x-api-key", key), logs)
				assert.Equal(t, codes.InvalidArgument, status.Code(err), "gRPC: %v", err)
				assert.Contains(t, status.Convert(err).Message(), "over the limit of 1000000 bytes per record")
			}

			assert.Empty(t, stored(t, e.js, project), "nothing stored on the raw stream")
			assert.Empty(t, outputs(t, e.js, project), "nothing stored on the output stream")
			assert.NotContains(t, e.col.Log(), "unreachable", "the log must not blame NATS")

			// Within the limit, the same surfaces store.
			r := post(t, e.col.HTTP+"/v1/events/batch", key, "application/json", []byte(`[{"a":1},{"b":"`+strings.Repeat("y", 900_000)+`"}]`), nil)
			require.Equal(t, http.StatusAccepted, r.StatusCode, "%.300s", r.Body)
			var got map[string]int
			require.NoError(t, json.Unmarshal(r.Body, &got))
			assert.Len(t, stored(t, e.js, project), 2)
		})
	}
}

// A client that trickles its headers is cut off after read_header_timeout instead of
// holding a connection for as long as it likes.
func TestSlowHeadersAreCutOff(t *testing.T) {
	e := startReceiver(t, map[string]string{"SVC_READ_HEADER_TIMEOUT": "1s"})
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.col.HTTP, "http://"))
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.Write([]byte("POST /v1/events HTTP/1.1\r\nHost: receiver\r\n"))
	require.NoError(t, err)
	closed := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, conn) // returns when the server closes the connection
		close(closed)
	}()
	// One header line every 100 ms, for up to 30 s: far longer than the timeout.
	for i := 0; i < 300; i++ {
		select {
		case <-closed:
			return
		case <-time.After(100 * time.Millisecond):
		}
		if _, err := conn.Write([]byte("X-Slow: " + strconv.Itoa(i) + "\r\n")); err != nil {
			return // the server closed the connection
		}
	}
	t.Fatal("the server kept a connection whose headers took 30 s")
}

// rssBound is the receiver's documented memory bound (README, "Limits and memory").
const rssBound = 512 << 20

// Many concurrent requests at the body limit (10 MiB, 10,000 records: OTLP/JSON,
// OTLP/protobuf and event batches) keep the receiver's peak RSS under the documented
// bound; what it cannot take at once is answered 503 with Retry-After (it can succeed
// later), and nothing else fails. All are of one key: the account's share counts bodies,
// so three at the body limit are in flight at once (two decoding, within
// max_inflight_bytes); counted by the decoding estimate, the share let one through at a
// time, and 35 of 36 were refused (now about 30: these clients do not retry).
func TestConcurrentLargeRequestsStayUnderTheMemoryBound(t *testing.T) {
	e := startReceiver(t, nil)
	key := e.project(t, "memory")

	record := strings.Repeat("y", 980)
	ld := plog.NewLogs()
	lrs := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords()
	for i := 0; i < 10000; i++ {
		lrs.AppendEmpty().Body().SetStr(record)
	}
	otlpJSON, err := plogotlp.NewExportRequestFromLogs(ld).MarshalJSON()
	require.NoError(t, err)
	otlpPB, err := plogotlp.NewExportRequestFromLogs(ld).MarshalProto()
	require.NoError(t, err)
	events := []byte("[" + strings.TrimSuffix(strings.Repeat(`{"r":"`+record+`"},`, 10000), ",") + "]")
	bodies := []struct {
		path, contentType string
		body              []byte
	}{
		{"/v1/logs", "application/json", otlpJSON},
		{"/v1/logs", "application/x-protobuf", otlpPB},
		{"/v1/events/batch", "application/json", events},
	}
	for _, b := range bodies {
		require.Less(t, len(b.body), 10<<20, "within the body limit")
		require.Greater(t, len(b.body), 9<<20, "near the body limit")
	}

	const clients, rounds = 12, 3
	var mu sync.Mutex
	statuses := map[int]int{}
	var forShare int // 503s for the account's share rather than the whole budget
	var wg sync.WaitGroup
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				b := bodies[(c+r)%len(bodies)]
				resp := post(t, e.col.HTTP+b.path, key, b.contentType, b.body, nil)
				mu.Lock()
				statuses[resp.StatusCode]++
				mu.Unlock()
				switch resp.StatusCode {
				case http.StatusOK, http.StatusAccepted:
				case http.StatusServiceUnavailable:
					assert.NotEmpty(t, resp.Header.Get("Retry-After"), "503 without Retry-After: %.300s", resp.Body)
					if strings.Contains(string(resp.Body), "max_inflight_bytes_per_account") {
						mu.Lock()
						forShare++
						mu.Unlock()
					}
				default:
					t.Errorf("%s %s: %d %.300s", b.path, b.contentType, resp.StatusCode, resp.Body)
				}
			}
		}(c)
	}
	wg.Wait()
	hwm := peakRSS(t, e.col.Pid())
	t.Logf("statuses %v (503 for the account's share: %d); peak RSS %d MiB (bound %d MiB)", statuses, forShare, hwm>>20, rssBound>>20)
	assert.Less(t, hwm, int64(rssBound), "peak RSS")
	assert.Positive(t, statuses[http.StatusServiceUnavailable], "the excess is refused with 503")
	assert.Positive(t, statuses[http.StatusOK]+statuses[http.StatusAccepted], "requests are still stored")
}

// peakRSS is the process's peak resident set (VmHWM).
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "VmHWM:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			require.NoError(t, err)
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc/<pid>/status")
	return 0
}
