package usage

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// A request id takes a few distinct results, an agent's retry of one of them is free, and
// unmatched results share a per-project hourly allowance whose refusal says when it
// resets; a failed store gives an unmatched charge back. Two limiters (two receivers)
// share the counts.
func TestResultAllowances(t *testing.T) {
	n := testenv.StartNATS(t)
	_, js := testenv.Connect(t, n.URL())
	ctx := context.Background()
	limits := ResultLimits{PerRequestID: 2, UnmatchedPerHour: 3}
	a, err := OpenResultLimiter(ctx, js, limits, time.Hour, 1)
	require.NoError(t, err)
	b, err := OpenResultLimiter(ctx, js, limits, time.Hour, 1)
	require.NoError(t, err)
	at := time.Date(2026, 11, 26, 15, 40, 0, 0, time.UTC)
	a.now, b.now = func() time.Time { return at }, func() time.Time { return at }

	_, err = a.Admit(ctx, "p1", "req_1", true, []byte(`"first"`))
	require.NoError(t, err)
	_, err = b.Admit(ctx, "p1", "req_1", true, []byte(`"first"`))
	require.NoError(t, err, "the same result again is a retry, not another result")
	_, err = b.Admit(ctx, "p1", "req_1", true, []byte(`"second"`))
	require.NoError(t, err)
	_, err = a.Admit(ctx, "p1", "req_1", true, []byte(`"third"`))
	var le *ResultLimitError
	require.ErrorAs(t, err, &le)
	assert.Equal(t, LimitPerRequestID, le.Limit)
	assert.Zero(t, le.RetryAfter, "more results for this call can never pass")
	assert.Contains(t, err.Error(), "per_request_id, 2")
	_, err = a.Admit(ctx, "p2", "req_1", true, []byte(`"third"`))
	assert.NoError(t, err, "per project")

	var releases []func()
	for i := 0; i < 3; i++ {
		l := []*ResultLimiter{a, b}[i%2]
		release, err := l.Admit(ctx, "p1", "made-up", false, []byte(`1`))
		require.NoError(t, err, i)
		releases = append(releases, release)
	}
	_, err = b.Admit(ctx, "p1", "made-up", false, []byte(`1`))
	require.ErrorAs(t, err, &le)
	assert.Equal(t, LimitUnmatched, le.Limit)
	assert.Equal(t, 20*time.Minute, le.RetryAfter, "until the next hour")
	assert.Contains(t, err.Error(), "unmatched_per_hour, 3")

	releases[0]() // that result was not stored after all
	_, err = a.Admit(ctx, "p1", "made-up", false, []byte(`1`))
	assert.NoError(t, err, "a refunded charge is free again")

	at = at.Add(time.Hour)
	_, err = a.Admit(ctx, "p1", "made-up", false, []byte(`1`))
	assert.NoError(t, err, "a new hour")
	assert.False(t, errors.As(err, &le))
}

// The counts expire in every case: with results kept without an age limit the bucket
// used to have no TTL, so every request id ever answered stayed a key for good. A bucket
// made so before is given the TTL when a receiver opens it.
func TestResultsBucketAlwaysExpires(t *testing.T) {
	n := testenv.StartNATS(t)
	_, js := testenv.Connect(t, n.URL())
	ctx := context.Background()
	_, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: ResultsBucket, History: 1})
	require.NoError(t, err)

	_, err = OpenResultLimiter(ctx, js, ResultLimits{PerRequestID: 3}, 0, 1)
	require.NoError(t, err)
	kv, err := js.KeyValue(ctx, ResultsBucket)
	require.NoError(t, err)
	st, err := kv.Status(ctx)
	require.NoError(t, err)
	assert.Equal(t, 8*24*time.Hour, st.TTL(), "results kept for ever: counts kept 8 days")

	_, err = OpenResultLimiter(ctx, js, ResultLimits{PerRequestID: 3}, 72*time.Hour, 1)
	require.NoError(t, err)
	st, err = kv.Status(ctx)
	require.NoError(t, err)
	assert.Equal(t, 72*time.Hour, st.TTL(), "counts live as long as results")
}
