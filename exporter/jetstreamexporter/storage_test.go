package jetstreamexporter

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/otelcol-svc/otelcol-svc/exporter/jetstreamexporter/internal/metadata"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/natsclient"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/principal"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// Streams reserve nothing in nats-server's store: with a 64 MiB store, 300 projects with
// the default 1 GiB limit each get their streams (with the limit as the streams' JetStream
// max_bytes, nats-server refused the first one: "insufficient storage resources").
func TestStreamsReserveNothing(t *testing.T) {
	srv := testenv.StartNATSWith(t, func(o *server.Options) { o.JetStreamMaxStore = 64 << 20 })
	_, js := testenv.Connect(t, srv.URL())
	ctx := context.Background()
	for i := 0; i < 300; i++ {
		p := "p" + strconv.Itoa(i)
		require.NoError(t, streams.Ensure(ctx, js, streams.RawConfig(p, streams.DefaultLimits())), "project %d", i)
		require.NoError(t, streams.Ensure(ctx, js, streams.OutputConfig(p, streams.DefaultLimits())), "project %d", i)
	}
	info, err := js.AccountInfo(ctx)
	require.NoError(t, err)
	assert.Equal(t, 600, info.Streams)
}

func startExporter(t *testing.T, url string, limits streams.Limits, mode string) *jsExporter {
	t.Helper()
	cfg := createDefaultConfig().(*Config)
	cfg.NATS = natsclient.Config{URL: url, ConnectTimeout: 2 * time.Second}
	cfg.Stream = limits
	cfg.Publish = mode
	cfg.Usage.Enabled = false // storage alone: no mirror, no meter (usage_test.go)
	require.NoError(t, cfg.Validate())
	e := newExporter(cfg, exportertest.NewNopSettings(metadata.Type))
	ctx := context.Background()
	require.NoError(t, e.Start(ctx, nil))
	t.Cleanup(func() { _ = e.Shutdown(ctx) })
	require.Eventually(t, e.nc.IsConnected, 5*time.Second, 10*time.Millisecond)
	return e
}

func logsOf(n int, body string) plog.Logs {
	ld := plog.NewLogs()
	lrs := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords()
	for i := 0; i < n; i++ {
		lrs.AppendEmpty().Body().SetStr(body)
	}
	return ld
}

// A project at its byte limit is refused with an error that says its storage is full (a
// 503 for the client), holds about its limit, and other projects keep storing.
func TestProjectStorageLimit(t *testing.T) {
	srv := testenv.StartNATS(t)
	_, js := testenv.Connect(t, srv.URL())
	limits := streams.DefaultLimits()
	limits.MaxBytes = 32 << 10
	for _, mode := range []string{PublishAsync, PublishFastBatch} {
		t.Run(mode, func(t *testing.T) {
			e := startExporter(t, srv.URL(), limits, mode)
			require.Equal(t, mode == PublishFastBatch, e.fast != nil)
			full := principal.NewContext(context.Background(), principal.Principal{ProjectID: "full-" + mode})
			body := strings.Repeat("x", 500)
			var err error
			requests := 0
			for ; requests < 200 && err == nil; requests++ {
				err = e.pushLogs(full, logsOf(10, body))
			}
			require.Error(t, err, "the project was never refused")
			assert.Contains(t, err.Error(), "storage is full")
			assert.Contains(t, err.Error(), "32 KiB")
			assert.False(t, errors.Is(err, errNotConnected))
			s, serr := js.Stream(context.Background(), streams.RawStream("full-"+mode))
			require.NoError(t, serr)
			stored := int64(s.CachedInfo().State.Bytes)
			assert.GreaterOrEqual(t, stored, limits.MaxBytes-12<<10, "refused long before the limit")
			assert.Less(t, stored, limits.MaxBytes+12<<10, "a request beyond the limit was stored")
			// Refused again, and nothing of it stored.
			require.Error(t, e.pushLogs(full, logsOf(10, body)))
			s, _ = js.Stream(context.Background(), streams.RawStream("full-"+mode))
			assert.Equal(t, stored, int64(s.CachedInfo().State.Bytes))

			other := principal.NewContext(context.Background(), principal.Principal{ProjectID: "other-" + mode})
			require.NoError(t, e.pushLogs(other, logsOf(10, body)), "another project is not affected")
		})
	}
}
