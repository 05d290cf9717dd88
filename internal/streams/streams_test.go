package streams

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// EnsureInfo creates a missing stream, leaves a current one alone (a read, no update: an
// update costs nats-server a subject check against every stream) and brings changed
// limits up to date.
func TestEnsureInfoUpdatesOnlyWhatChanged(t *testing.T) {
	srv := testenv.StartNATS(t)
	_, js := testenv.Connect(t, srv.URL())
	ctx := context.Background()
	cfg := RawConfig("p1", DefaultLimits())

	info, err := EnsureInfo(ctx, js, cfg)
	require.NoError(t, err)
	assert.True(t, Current(info.Config, cfg))
	assert.Equal(t, int64(-1), info.Config.MaxBytes, "nothing reserved")

	apiCalls := func() uint64 {
		ai, err := js.AccountInfo(ctx)
		require.NoError(t, err)
		return ai.API.Total
	}
	before := apiCalls()
	_, err = EnsureInfo(ctx, js, cfg)
	require.NoError(t, err)
	// One read, plus the AccountInfo call itself: no update.
	assert.Equal(t, before+2, apiCalls())

	longer := DefaultLimits()
	longer.MaxAge = 14 * 24 * time.Hour
	info, err = EnsureInfo(ctx, js, RawConfig("p1", longer))
	require.NoError(t, err)
	assert.Equal(t, 14*24*time.Hour, info.Config.MaxAge, "a changed limit is applied")

	require.NoError(t, Create(ctx, js, RawConfig("p1", DefaultLimits())), "an existing stream is left as it is")
	s, err := js.Stream(ctx, RawStream("p1"))
	require.NoError(t, err)
	assert.Equal(t, 14*24*time.Hour, s.CachedInfo().Config.MaxAge)
}

// Processes that create the same stream at once, with settings that differ (a receiver's
// first write in fast-batch mode and a pipeline process's check) all succeed: the losers
// of the race ("stream name already in use") use the winner's stream.
func TestEnsureInfoConcurrentCreates(t *testing.T) {
	srv := testenv.StartNATS(t)
	_, js := testenv.Connect(t, srv.URL())
	ctx := context.Background()
	const rounds, creators = 40, 16
	for round := 0; round < rounds; round++ {
		cfg := RawConfig(fmt.Sprintf("race%d", round), DefaultLimits())
		start := make(chan struct{})
		errs := make(chan error, creators)
		for i := 0; i < creators; i++ {
			go func(i int) {
				<-start
				if i%4 == 3 {
					errs <- Create(ctx, js, cfg) // a reader's: without the writer's flag
					return
				}
				writer := cfg
				writer.AllowBatchPublish = i%2 == 0 // a fast-batch exporter's
				_, err := EnsureInfo(ctx, js, writer)
				errs <- err
			}(i)
		}
		close(start)
		for i := 0; i < creators; i++ {
			require.NoError(t, <-errs, "round %d", round)
		}
	}
	// A writer that lost the race still gets its settings.
	cfg := RawConfig("race0", DefaultLimits())
	cfg.AllowBatchPublish = true
	info, err := EnsureInfo(ctx, js, cfg)
	require.NoError(t, err)
	assert.True(t, info.Config.AllowBatchPublish)
}

// Receivers in different publish modes share a project's streams: one that does not
// batch leaves the batch flags as they are, so it never drops another's open batches
// (nats-server deletes a stream's in-progress batches when its flag is switched off).
func TestEnsureInfoNeverSwitchesBatchPublishingOff(t *testing.T) {
	srv := testenv.StartNATS(t)
	_, js := testenv.Connect(t, srv.URL())
	ctx := context.Background()
	batching := RawConfig("flags", DefaultLimits())
	batching.AllowAtomicPublish, batching.AllowBatchPublish = true, true
	_, err := EnsureInfo(ctx, js, batching)
	require.NoError(t, err)

	longer := DefaultLimits()
	longer.MaxAge = 14 * 24 * time.Hour
	info, err := EnsureInfo(ctx, js, RawConfig("flags", longer)) // an async-mode receiver, new limits
	require.NoError(t, err)
	assert.Equal(t, 14*24*time.Hour, info.Config.MaxAge)
	assert.True(t, info.Config.AllowAtomicPublish, "atomic publishing kept")
	assert.True(t, info.Config.AllowBatchPublish, "fast batch publishing kept")
}
