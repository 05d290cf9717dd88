package usage

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRateLimiter(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)}
	l := NewRateLimiter(Rate{}, clock.Now)
	require.True(t, l.Allow("p1", 1_000_000).OK, "off by default")

	l.SetDefault(Rate{PerSecond: 100, Burst: 200})
	require.True(t, l.Allow("p1", 150).OK, "the burst passes")
	d := l.Allow("p1", 100)
	require.False(t, d.OK, "50 left of the burst: 100 more is refused whole")
	require.Equal(t, 500*time.Millisecond, d.RetryAfter)
	require.True(t, l.Allow("p1", 50).OK, "a refused request took nothing")
	require.True(t, l.Allow("p2", 200).OK, "each project has its own bucket")
	require.True(t, l.Allow("p1", 201).TooLarge)

	clock.Set(clock.Now().Add(time.Second))
	require.True(t, l.Allow("p1", 100).OK, "a second refills 100")
	require.False(t, l.Allow("p1", 1).OK)

	l.SetProject("p1", Rate{PerSecond: 10})
	require.True(t, l.Allow("p1", 10).OK, "an override starts its own bucket")
	require.False(t, l.Allow("p1", 1).OK)
	l.SetProject("p3", Rate{})
	require.True(t, l.Allow("p3", 10_000).OK, "a project can be exempt")
	l.ClearProject("p1")
	require.True(t, l.Allow("p1", 200).OK, "back to the default, a fresh bucket")
}
