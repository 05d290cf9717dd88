package jetstreamexporter

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/otelcol-svc/otelcol-svc/exporter/jetstreamexporter/internal/metadata"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/natsclient"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/principal"
	"github.com/otelcol-svc/otelcol-svc/internal/pipelinectx"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

func fbStored(t *testing.T, js jetstream.JetStream, stream string) []string {
	t.Helper()
	s, err := js.Stream(context.Background(), stream)
	require.NoError(t, err)
	info, err := s.Info(context.Background())
	require.NoError(t, err)
	var out []string
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := s.GetMsg(context.Background(), seq)
		require.NoError(t, err)
		out = append(out, string(m.Data))
	}
	return out
}

func TestExporterFastBatchMode(t *testing.T) {
	srv := testenv.StartNATS(t)
	_, js := testenv.Connect(t, srv.URL())
	ctx := context.Background()
	old := streams.RawConfig("fbx", streams.DefaultLimits())
	_, err := js.CreateStream(ctx, old) // created earlier by an async-mode exporter
	require.NoError(t, err)

	cfg := createDefaultConfig().(*Config)
	cfg.NATS = natsclient.Config{URL: srv.URL(), ConnectTimeout: 2 * time.Second}
	cfg.Publish = PublishFastBatch
	cfg.Usage.Enabled = false // storage alone: no mirror, no meter (usage_test.go)
	require.NoError(t, cfg.Validate())
	e := newExporter(cfg, exportertest.NewNopSettings(metadata.Type))
	require.NoError(t, e.Start(ctx, nil))
	t.Cleanup(func() { _ = e.Shutdown(ctx) })
	require.Eventually(t, e.nc.IsConnected, 5*time.Second, 10*time.Millisecond)

	rctx := principal.NewContext(ctx, principal.Principal{ProjectID: "fbx"})
	logs := func(n int, tag string) plog.Logs {
		ld := plog.NewLogs()
		lrs := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords()
		for i := 0; i < n; i++ {
			lrs.AppendEmpty().Body().SetStr(tag + strconv.Itoa(i))
		}
		return ld
	}
	require.NoError(t, e.pushLogs(rctx, logs(120, "a")))
	s, err := js.Stream(ctx, old.Name)
	require.NoError(t, err)
	assert.True(t, s.CachedInfo().Config.AllowBatchPublish, "the existing stream was updated")
	assert.Len(t, fbStored(t, js, old.Name), 120)

	// An exporter in async mode updates the stream without the flag.
	_, err = js.UpdateStream(ctx, old)
	require.NoError(t, err)
	require.NoError(t, e.pushLogs(rctx, logs(30, "b")))
	require.NoError(t, e.pushLogs(rctx, logs(30, "c")))
	assert.Len(t, fbStored(t, js, old.Name), 180)
	s, err = js.Stream(ctx, old.Name)
	require.NoError(t, err)
	assert.True(t, s.CachedInfo().Config.AllowBatchPublish, "the flag is set again")

	// Idempotency-Key: a retried request is stored once.
	ictx := pipelinectx.WithIngest(rctx, pipelinectx.Ingest{IdempotencyKey: "k1"})
	require.NoError(t, e.pushLogs(ictx, logs(25, "d")))
	require.NoError(t, e.pushLogs(ictx, logs(25, "d")))
	got := fbStored(t, js, old.Name)
	assert.Len(t, got, 205)
	m, err := s.GetMsg(ctx, 205)
	require.NoError(t, err)
	assert.Equal(t, "k1:24", m.Header.Get(streams.HeaderMsgID))

	// The stream deleted behind the exporter's back: 503 once, then it is created again.
	require.NoError(t, js.DeleteStream(ctx, old.Name))
	err = e.pushLogs(rctx, logs(10, "e"))
	require.Error(t, err)
	assert.True(t, errors.Is(err, errNotConnected), "%v", err)
	require.NoError(t, e.pushLogs(rctx, logs(10, "f")))
	assert.Len(t, fbStored(t, js, old.Name), 10)
}
