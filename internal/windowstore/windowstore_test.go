package windowstore

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// redisURL is the machine's Redis (started by .ci/run), database 13 of these tests; each
// test uses a fresh project id.
func redisURL() string {
	if u := os.Getenv("REDIS_URL"); u != "" {
		return u
	}
	return "redis://127.0.0.1:6379/13"
}

func stores(t *testing.T) map[string]Store {
	t.Helper()
	r, err := NewRedis(redisURL())
	require.NoError(t, err)
	require.NoError(t, r.Ping(context.Background()), "Redis must run for this test (.ci/run starts it)")
	m := NewMemory(time.Minute)
	t.Cleanup(func() { _ = r.Close(); _ = m.Close() })
	return map[string]Store{"redis": r, "memory": m}
}

func strs(b [][]byte) []string {
	out := make([]string, len(b))
	for i, x := range b {
		out[i] = string(x)
	}
	return out
}

func TestWindowKeepsOnlyItsGroupWithinTheDuration(t *testing.T) {
	for name, s := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			p := fmt.Sprintf("p-%s-%d", name, time.Now().UnixNano())
			t0 := time.Now()
			ttl := 10 * time.Second
			require.NoError(t, s.Add(ctx, p, "trace-a", 1, []byte(`{"n":1}`), t0, ttl))
			require.NoError(t, s.Add(ctx, p, "trace-b", 2, []byte(`{"n":2}`), t0.Add(time.Millisecond), ttl))
			require.NoError(t, s.Add(ctx, p, "trace-a", 3, []byte(`{"n":3}`), t0.Add(2*time.Millisecond), ttl))
			require.NoError(t, s.Add(ctx, p, "trace-a", 3, []byte(`{"n":3}`), t0.Add(3*time.Millisecond), ttl)) // redelivery

			got, total, err := s.Window(ctx, p, "trace-a", t0.Add(-ttl), 100)
			require.NoError(t, err)
			assert.Equal(t, []string{`{"n":1}`, `{"n":3}`}, strs(got), "oldest first, its group only, once")
			assert.Equal(t, 2, total)

			got, _, err = s.Window(ctx, p, "trace-a", t0.Add(time.Millisecond), 100)
			require.NoError(t, err)
			assert.Equal(t, []string{`{"n":3}`}, strs(got), "entries older than the window are not returned")

			got, total, err = s.Window(ctx, p, "trace-a", t0.Add(-ttl), 1)
			require.NoError(t, err)
			assert.Equal(t, []string{`{"n":3}`}, strs(got), "a smaller max keeps the newest")
			assert.Equal(t, 2, total, "and says how many there were")

			got, _, err = s.Window(ctx, p, "nobody", t0.Add(-ttl), 100)
			require.NoError(t, err)
			assert.Empty(t, got)
			got, _, err = s.Window(ctx, "other-"+p, "trace-a", t0.Add(-ttl), 100)
			require.NoError(t, err)
			assert.Empty(t, got, "projects never see each other's windows")
		})
	}
}

func TestWindowTrimsExpiredAndCaps(t *testing.T) {
	for name, s := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			p := fmt.Sprintf("cap-%s-%d", name, time.Now().UnixNano())
			t0 := time.Now()
			ttl := time.Second
			require.NoError(t, s.Add(ctx, p, "g", 1, []byte(`old`), t0, ttl))
			require.NoError(t, s.Add(ctx, p, "g", 2, []byte(`new`), t0.Add(2*time.Second), ttl))
			got, _, err := s.Window(ctx, p, "g", t0.Add(-time.Hour), 100)
			require.NoError(t, err)
			assert.Equal(t, []string{"new"}, strs(got), "adding trims what expired")

			long := strings.Repeat("k", 500)
			for i := 0; i < MaxPerGroup+5; i++ {
				require.NoError(t, s.Add(ctx, p, long, uint64(10+i), []byte(fmt.Sprint(i)), t0.Add(time.Duration(i)*time.Microsecond), time.Hour))
			}
			got, total, err := s.Window(ctx, p, long, t0.Add(-time.Hour), MaxPerGroup)
			require.NoError(t, err)
			require.Len(t, got, MaxPerGroup)
			assert.Equal(t, MaxPerGroup, total)
			assert.Equal(t, "5", string(got[0]), "the oldest go first")
		})
	}
}

// An incident call takes the events stored from its since up to its claim; the next call
// takes them from there: each event goes in one call.
func TestWindowBeforeEndsWhereTheNextBegins(t *testing.T) {
	for name, s := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			p := fmt.Sprintf("pb-%s-%d", name, time.Now().UnixNano())
			t0 := time.Now().Truncate(time.Millisecond)
			ttl := time.Minute
			for i := range 6 {
				require.NoError(t, s.Add(ctx, p, "inc", uint64(i+1), fmt.Appendf(nil, `{"n":%d}`, i+1), t0.Add(time.Duration(i)*10*time.Millisecond), ttl))
			}
			claim := t0.Add(30 * time.Millisecond)
			first, total, err := s.WindowBefore(ctx, p, "inc", t0, claim, 100)
			require.NoError(t, err)
			assert.Equal(t, []string{`{"n":1}`, `{"n":2}`, `{"n":3}`}, strs(first))
			assert.Equal(t, 3, total)
			next, _, err := s.WindowBefore(ctx, p, "inc", claim, time.Time{}, 100)
			require.NoError(t, err)
			assert.Equal(t, []string{`{"n":4}`, `{"n":5}`, `{"n":6}`}, strs(next), "the next call starts at the claim, inclusive")
			got, total, err := s.WindowBefore(ctx, p, "inc", t0, claim, 2)
			require.NoError(t, err)
			assert.Equal(t, []string{`{"n":2}`, `{"n":3}`}, strs(got), "the newest before the bound")
			assert.Equal(t, 3, total)
		})
	}
}
