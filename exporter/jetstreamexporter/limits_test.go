package jetstreamexporter

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.uber.org/zap"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/principal"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/records"
	"github.com/otelcol-svc/otelcol-svc/internal/pipelinectx"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// logsWithBodies is one request whose log records have these bodies.
func logsWithBodies(bodies ...string) plog.Logs {
	ld := plog.NewLogs()
	lrs := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords()
	for _, b := range bodies {
		lrs.AppendEmpty().Body().SetStr(b)
	}
	return ld
}

// A request whose second record is 2 MiB is refused whole, as a permanent error naming the
// record and the limit, and nothing of it is stored however often it is retried: in both
// publish modes, for flattened OTLP records and for prebuilt ones (events, push, results).
func TestOversizedRecordRefusesTheWholeRequest(t *testing.T) {
	srv := testenv.StartNATS(t)
	_, js := testenv.Connect(t, srv.URL())
	huge := strings.Repeat("x", 2<<20)
	for _, mode := range []string{PublishAsync, PublishFastBatch} {
		t.Run(mode, func(t *testing.T) {
			e := startExporter(t, srv.URL(), streams.DefaultLimits(), mode)
			project := "big" + strings.ReplaceAll(mode, "_", "")
			ctx := principal.NewContext(context.Background(), principal.Principal{ProjectID: project})
			requests := map[string]func() error{
				"otlp": func() error { return e.pushLogs(ctx, logsWithBodies("first", huge, "third")) },
				"prebuilt": func() error {
					return e.pushLogs(pipelinectx.WithIngest(ctx, pipelinectx.Ingest{Prebuilt: records.SignalEvent}), prebuilt(`{"a":1}`, `{"b":"`+huge+`"}`))
				},
				"output": func() error {
					return e.pushLogs(pipelinectx.WithIngest(ctx, pipelinectx.Ingest{Prebuilt: "agent_output", Output: true, RequestID: "r1"}), prebuilt(`{"b":"`+huge+`"}`))
				},
			}
			for name, send := range requests {
				for attempt := 0; attempt < 3; attempt++ {
					err := send()
					require.Error(t, err, name)
					assert.True(t, consumererror.IsPermanent(err), "%s: a client must not retry: %v", name, err)
					var tl *records.TooLargeError
					require.ErrorAs(t, err, &tl, name)
					assert.Equal(t, defaultMaxRecordBytes, tl.Limit)
					assert.Contains(t, err.Error(), "over the limit of 1000000 bytes per record")
				}
			}
			assert.Empty(t, storedOrNone(t, js, streams.RawStream(project)), "nothing stored")
			assert.Empty(t, storedOrNone(t, js, streams.OutputStream(project)), "nothing stored")

			// The same exporter stores requests within the limit.
			require.NoError(t, e.pushLogs(ctx, logsWithBodies("first", strings.Repeat("y", 900_000))))
			assert.Len(t, storedOrNone(t, js, streams.RawStream(project)), 2)
		})
	}
}

// A server with a smaller max_payload than max_record_bytes lowers the limit to what it
// takes, and the refusal names that limit.
func TestRecordLimitFollowsTheServersMaxPayload(t *testing.T) {
	srv := testenv.StartNATSWith(t, func(o *server.Options) { o.MaxPayload = 64 << 10 })
	e := startExporter(t, srv.URL(), streams.DefaultLimits(), PublishFastBatch)
	ctx := principal.NewContext(context.Background(), principal.Principal{ProjectID: "small"})
	err := e.pushLogs(ctx, logsWithBodies("a", strings.Repeat("x", 100<<10)))
	var tl *records.TooLargeError
	require.ErrorAs(t, err, &tl)
	assert.Equal(t, 64<<10-maxHeaderBytes, tl.Limit)
	assert.Equal(t, 1, tl.Index)
}

// Publish failures are told apart: a message too large for the server is permanent, and an
// unknown failure does not claim that NATS is unreachable.
func TestClassifyTellsFailuresApart(t *testing.T) {
	e := &jsExporter{cfg: createDefaultConfig().(*Config), logger: zap.NewNop()}
	err := e.classify("p", nats.ErrMaxPayload)
	assert.True(t, consumererror.IsPermanent(err))
	var tl *records.TooLargeError
	assert.ErrorAs(t, err, &tl)

	err = e.classify("p", nats.ErrConnectionClosed)
	assert.ErrorIs(t, err, errNotConnected)

	err = e.classify("p", errors.New("nats: something new"))
	assert.False(t, consumererror.IsPermanent(err))
	assert.NotErrorIs(t, err, errNotConnected)
	assert.Contains(t, err.Error(), "something new")
	assert.NotContains(t, err.Error(), "unreachable")
}

func prebuilt(recs ...string) plog.Logs {
	ld := plog.NewLogs()
	lrs := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords()
	for _, r := range recs {
		lrs.AppendEmpty().Body().SetEmptyBytes().FromRaw([]byte(r))
	}
	return ld
}

// storedOrNone is fbStored for a stream that may not exist (nothing was ever stored).
func storedOrNone(t *testing.T, js jetstream.JetStream, stream string) []string {
	t.Helper()
	if _, err := js.Stream(context.Background(), stream); errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	return fbStored(t, js, stream)
}

// A stream JetStream refuses to create (here: another stream already takes its subject)
// is reported as what it is, not as NATS being unreachable.
func TestStreamRefusalIsNotCalledUnreachable(t *testing.T) {
	srv := testenv.StartNATS(t)
	_, js := testenv.Connect(t, srv.URL())
	_, err := js.CreateStream(context.Background(), jetstream.StreamConfig{Name: "squatter", Subjects: []string{streams.RawStream("ovl") + ".x", "svc-ai-raw.ovl.in"}})
	require.NoError(t, err)
	e := startExporter(t, srv.URL(), streams.DefaultLimits(), PublishAsync)
	err = e.pushLogs(principal.NewContext(context.Background(), principal.Principal{ProjectID: "ovl"}), logsWithBodies("a"))
	require.Error(t, err)
	assert.NotErrorIs(t, err, errNotConnected)
	assert.NotContains(t, err.Error(), "unreachable")
	assert.Contains(t, err.Error(), "refused to prepare the project's stream")
}
