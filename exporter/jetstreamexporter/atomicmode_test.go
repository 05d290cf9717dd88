package jetstreamexporter

import (
	"context"
	"encoding/json"
	"strconv"
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

// atomic_batch mode: requests over the server's batch size go as whole chunks, in order;
// a keyed request some of whose records are already stored (a retry after a chunk went
// through) is completed record by record, each record once.
func TestExporterAtomicBatchMode(t *testing.T) {
	srv := testenv.StartNATS(t)
	_, js := testenv.Connect(t, srv.URL())
	ctx := context.Background()
	cfg := createDefaultConfig().(*Config)
	cfg.NATS = natsclient.Config{URL: srv.URL(), ConnectTimeout: 2 * time.Second}
	cfg.Publish = PublishAtomicBatch
	cfg.Usage.Enabled = false
	require.NoError(t, cfg.Validate())
	e := newExporter(cfg, exportertest.NewNopSettings(metadata.Type))
	require.NoError(t, e.Start(ctx, nil))
	t.Cleanup(func() { _ = e.Shutdown(ctx) })
	require.Eventually(t, e.nc.IsConnected, 5*time.Second, 10*time.Millisecond)

	rctx := principal.NewContext(ctx, principal.Principal{ProjectID: "abx"})
	logs := func(from, n int) plog.Logs {
		ld := plog.NewLogs()
		lrs := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords()
		for i := from; i < from+n; i++ {
			lrs.AppendEmpty().Body().SetStr(strconv.Itoa(i))
		}
		return ld
	}
	bodies := func() []string {
		var out []string
		for _, m := range fbStored(t, js, streams.RawStream("abx")) {
			var rec struct{ Body string }
			require.NoError(t, json.Unmarshal([]byte(m), &rec))
			out = append(out, rec.Body)
		}
		return out
	}

	require.NoError(t, e.pushLogs(rctx, logs(0, 2500)))
	s, err := js.Stream(ctx, streams.RawStream("abx"))
	require.NoError(t, err)
	assert.True(t, s.CachedInfo().Config.AllowAtomicPublish, "the stream takes atomic batches")
	got := bodies()
	require.Len(t, got, 2500, "three chunks of at most 1000, all stored")
	assert.Equal(t, "0", got[0])
	assert.Equal(t, "2499", got[2499])

	// The first 2 records of a keyed request stored, then the whole request again: the
	// batch is refused for its duplicate ids and the missing record is stored alone.
	keyed := pipelinectx.WithIngest(rctx, pipelinectx.Ingest{IdempotencyKey: "k"})
	require.NoError(t, e.pushLogs(keyed, logs(10_000, 2)))
	added, err := e.publishTo(keyed, "abx", streams.RawConfig("abx", cfg.Stream), true, 3,
		pipelinectx.IngestFrom(keyed), func(emit emitFunc) error {
			return records.FlattenLogs(logs(10_000, 3), time.Now(), func(rec []byte) error { return emit(records.SignalLog, rec) })
		})
	require.NoError(t, err)
	assert.Equal(t, 1, added, "only the missing record counts")
	got = bodies()
	assert.Equal(t, []string{"10000", "10001", "10002"}, got[2500:])
}
