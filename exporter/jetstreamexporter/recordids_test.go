package jetstreamexporter

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/otelcol-svc/otelcol-svc/exporter/jetstreamexporter/internal/metadata"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/natsclient"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/principal"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/records"
	"github.com/otelcol-svc/otelcol-svc/internal/pipelinectx"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// A preset's per-record delivery ids are the records' message ids: a provider's retry of
// the same deliveries is stored once, even when it comes in another request with other
// deliveries, and a record without an id falls back to the Idempotency-Key's.
func TestExporterRecordIDs(t *testing.T) {
	for _, mode := range []string{PublishAsync, PublishFastBatch, PublishAtomicBatch} {
		t.Run(mode, func(t *testing.T) {
			srv := testenv.StartNATS(t)
			_, js := testenv.Connect(t, srv.URL())
			ctx := context.Background()
			cfg := createDefaultConfig().(*Config)
			cfg.NATS = natsclient.Config{URL: srv.URL(), ConnectTimeout: 2 * time.Second}
			cfg.Publish = mode
			cfg.Usage.Enabled = false
			require.NoError(t, cfg.Validate())
			e := newExporter(cfg, exportertest.NewNopSettings(metadata.Type))
			require.NoError(t, e.Start(ctx, nil))
			t.Cleanup(func() { _ = e.Shutdown(ctx) })
			require.Eventually(t, e.nc.IsConnected, 5*time.Second, 10*time.Millisecond)

			rctx := principal.NewContext(ctx, principal.Principal{ProjectID: "rid"})
			push := func(info pipelinectx.Ingest, recs ...string) {
				t.Helper()
				ld := plog.NewLogs()
				sl := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty()
				for _, r := range recs {
					sl.LogRecords().AppendEmpty().Body().SetEmptyBytes().FromRaw([]byte(r))
				}
				info.Prebuilt = records.SignalSource
				info.SourceID = "src_1"
				require.NoError(t, e.pushLogs(pipelinectx.WithIngest(rctx, info), ld))
			}
			push(pipelinectx.Ingest{RecordIDs: []string{"src:src_1:a", "src:src_1:b"}}, `{"n":1}`, `{"n":2}`)
			// The same two deliveries again, with a new one: only the new one is stored.
			push(pipelinectx.Ingest{RecordIDs: []string{"src:src_1:b", "src:src_1:c", "src:src_1:a"}}, `{"n":2}`, `{"n":3}`, `{"n":1}`)
			// A record without a delivery id takes the Idempotency-Key's id.
			push(pipelinectx.Ingest{IdempotencyKey: "src:src_1:k", RecordIDs: []string{"", "src:src_1:d"}}, `{"n":4}`, `{"n":5}`)

			name := streams.RawConfig("rid", streams.DefaultLimits()).Name
			assert.Equal(t, []string{`{"n":1}`, `{"n":2}`, `{"n":3}`, `{"n":4}`, `{"n":5}`}, fbStored(t, js, name))
			s, err := js.Stream(ctx, name)
			require.NoError(t, err)
			var ids []string
			for seq := uint64(1); seq <= 5; seq++ {
				m, err := s.GetMsg(ctx, seq)
				require.NoError(t, err)
				ids = append(ids, m.Header.Get(streams.HeaderMsgID))
				assert.Equal(t, "src_1", m.Header.Get(streams.HeaderSourceID))
			}
			assert.Equal(t, []string{"src:src_1:a", "src:src_1:b", "src:src_1:c", "src:src_1:k:0", "src:src_1:d"}, ids)
		})
	}
}
