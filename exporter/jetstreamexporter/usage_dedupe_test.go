package jetstreamexporter

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/pipelinectx"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
)

func keyed(ctx context.Context, key string) context.Context {
	return pipelinectx.WithIngest(ctx, pipelinectx.Ingest{IdempotencyKey: key})
}

// A retried request with an Idempotency-Key is stored once and counted once, in both
// publish modes; a retry that adds records to the first attempt's (same key, more
// records) counts only the new ones. Without a key a request sent twice is stored twice
// and counted twice.
func TestRetriedRequestIsMeteredOnce(t *testing.T) {
	for _, mode := range []string{PublishAsync, PublishFastBatch} {
		t.Run(mode, func(t *testing.T) {
			x := startMetered(t, func(c *Config) { c.Publish = mode })
			ctx := asProject("acct-"+mode, "shop-"+mode)
			raw := streams.RawStream("shop-" + mode)

			require.NoError(t, x.e.pushLogs(keyed(ctx, "k1"), logsOf(40, "a")))
			require.NoError(t, x.e.pushLogs(keyed(ctx, "k1"), logsOf(40, "a")), "the retry succeeds")
			assert.Equal(t, 40, streamCount(t, x.js, raw))
			assert.Equal(t, int64(40), settled(t, x.js, "acct-"+mode).Events, "the retry's duplicates are not counted")

			// The same key with more records: the first 40 are duplicates of k1's.
			require.NoError(t, x.e.pushLogs(keyed(ctx, "k1"), logsOf(60, "a")))
			assert.Equal(t, 60, streamCount(t, x.js, raw))
			assert.Equal(t, int64(60), settled(t, x.js, "acct-"+mode).Events)

			require.NoError(t, x.e.pushLogs(keyed(ctx, "k2"), logsOf(1, "b")))
			require.NoError(t, x.e.pushLogs(keyed(ctx, "k2"), logsOf(1, "b")))
			require.NoError(t, x.e.pushLogs(ctx, logsOf(25, "c")))
			require.NoError(t, x.e.pushLogs(ctx, logsOf(25, "c")))
			assert.Equal(t, 111, streamCount(t, x.js, raw), "without a key both copies are stored")
			assert.Equal(t, int64(111), settled(t, x.js, "acct-"+mode).Events, "and both counted")
		})
	}
}

// A keyed request that fails part way keeps counted what it stored, since its retry
// finds those records duplicates; the retry counts the rest. The account is charged
// exactly what the stream holds. Without a key the failed request counts nothing (the
// retry stores and counts every record again).
func TestPartlyStoredKeyedRequestIsMeteredOnce(t *testing.T) {
	x := startMetered(t, nil)
	ctx := asProject("acct-part", "part")
	// The project's stream as the exporter makes it, but taking only 30 messages.
	cfg := streams.RawConfig("part", x.e.cfg.Stream)
	cfg.MaxMsgs = 30
	_, err := x.js.CreateStream(context.Background(), cfg)
	require.NoError(t, err)

	require.ErrorIs(t, x.e.pushLogs(keyed(ctx, "kp"), logsOf(50, "a")), errStreamFull)
	assert.Equal(t, 30, streamCount(t, x.js, cfg.Name))
	assert.Equal(t, int64(30), settled(t, x.js, "acct-part").Events, "what the failed attempt stored")

	cfg.MaxMsgs = -1
	_, err = x.js.UpdateStream(context.Background(), cfg)
	require.NoError(t, err)
	require.NoError(t, x.e.pushLogs(keyed(ctx, "kp"), logsOf(50, "a")), "the retry stores the rest")
	assert.Equal(t, 50, streamCount(t, x.js, cfg.Name))
	assert.Equal(t, int64(50), settled(t, x.js, "acct-part").Events)

	cfg.MaxMsgs = 60
	_, err = x.js.UpdateStream(context.Background(), cfg)
	require.NoError(t, err)
	require.ErrorIs(t, x.e.pushLogs(ctx, logsOf(20, "b")), errStreamFull)
	assert.Equal(t, 60, streamCount(t, x.js, cfg.Name))
	assert.Equal(t, int64(50), settled(t, x.js, "acct-part").Events, "a failed request without a key is refunded whole")
}
