package windowstore

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func waitCooled(t *testing.T, s Cooldowns, project, key string) {
	t.Helper()
	require.Eventually(t, func() bool {
		cooling, err := s.Cooling(context.Background(), project, key)
		require.NoError(t, err)
		return !cooling
	}, 10*time.Second, 20*time.Millisecond, "the cooldown ends")
}

func TestCooldownPassesOncePerKeyAndCarriesTheCount(t *testing.T) {
	for name, s := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			p := fmt.Sprintf("cd-%s-%d", name, time.Now().UnixNano())
			const cd = 500 * time.Millisecond
			pass := func(project, key string, seq uint64) (bool, int64) {
				ok, n, err := s.Pass(ctx, project, key, seq, cd)
				require.NoError(t, err)
				return ok, n
			}
			ok, n := pass(p, "pod-a", 1)
			assert.True(t, ok, "the first trigger of a key is sent")
			assert.Zero(t, n)
			for seq := uint64(2); seq <= 4; seq++ {
				ok, _ = pass(p, "pod-a", seq)
				assert.False(t, ok, "held back within the cooldown")
			}
			ok, n = pass(p, "pod-a", 1)
			assert.True(t, ok, "the call's trigger delivered again is still the call")
			assert.Zero(t, n)
			ok, _ = pass(p, "pod-b", 5)
			assert.True(t, ok, "keys cool down separately")
			ok, _ = pass("other-"+p, "pod-a", 6)
			assert.True(t, ok, "projects never share a cooldown")
			cooling, err := s.Cooling(ctx, p, "pod-a")
			require.NoError(t, err)
			assert.True(t, cooling)

			waitCooled(t, s, p, "pod-a")
			ok, n = pass(p, "pod-a", 7)
			assert.True(t, ok)
			assert.Equal(t, int64(3), n, "the next call says how many were held back")
			ok, n = pass(p, "pod-a", 7)
			assert.True(t, ok)
			assert.Equal(t, int64(3), n, "and says it again when delivered again")
			ok, _ = pass(p, "pod-a", 8)
			assert.False(t, ok, "a new cooldown started")

			waitCooled(t, s, p, "pod-a")
			ok, n = pass(p, "pod-a", 9)
			assert.True(t, ok)
			assert.Equal(t, int64(1), n, "the count was taken: it starts again")
		})
	}
}

// Many goroutines (as many pipeline processes would) racing on a few keys: exactly one
// trigger per key passes per cooldown, and every other one is counted exactly once.
func TestCooldownExactUnderConcurrency(t *testing.T) {
	for name, s := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			p := fmt.Sprintf("race-%s-%d", name, time.Now().UnixNano())
			keys := []string{"a", "b", "c"}
			const workers, each = 32, 30
			var passed [3]atomic.Int64
			var seq atomic.Uint64
			var wg sync.WaitGroup
			for w := 0; w < workers; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < each; i++ {
						k := (w + i) % len(keys)
						ok, _, err := s.Pass(ctx, p, keys[k], seq.Add(1), time.Minute)
						if !assert.NoError(t, err) {
							return
						}
						if ok {
							passed[k].Add(1)
						}
					}
				}()
			}
			wg.Wait()
			total := int64(0)
			for k := range keys {
				assert.Equal(t, int64(1), passed[k].Load(), "key %s: one call per cooldown", keys[k])
				total += passed[k].Load()
			}
			require.Equal(t, int64(3), total)
		})
	}
}

func TestCooldownCountIsTakenOnceUnderConcurrency(t *testing.T) {
	for name, s := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			p := fmt.Sprintf("take-%s-%d", name, time.Now().UnixNano())
			const cd = 300 * time.Millisecond
			ok, _, err := s.Pass(ctx, p, "k", 1, cd)
			require.NoError(t, err)
			require.True(t, ok)
			var held atomic.Int64
			var wg sync.WaitGroup
			for w := 0; w < 20; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < 10; i++ {
						ok, _, err := s.Pass(ctx, p, "k", uint64(1000+w*10+i), time.Hour)
						assert.NoError(t, err)
						if !ok {
							held.Add(1)
						}
					}
				}()
			}
			wg.Wait()
			require.Equal(t, int64(200), held.Load())
			waitCooled(t, s, p, "k")
			// Racing passers after the cooldown: one takes the whole count.
			var takers, got atomic.Int64
			for w := 0; w < 20; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ok, n, err := s.Pass(ctx, p, "k", uint64(5000+w), time.Hour)
					assert.NoError(t, err)
					if ok {
						takers.Add(1)
						got.Add(n)
					}
				}()
			}
			wg.Wait()
			assert.Equal(t, int64(1), takers.Load())
			assert.Equal(t, int64(200), got.Load(), "no held-back trigger lost or counted twice")
		})
	}
}

func TestRedisCooldownKeysExpire(t *testing.T) {
	r, err := NewRedis(redisURL())
	require.NoError(t, err)
	defer r.Close()
	ctx := context.Background()
	p := fmt.Sprintf("ttl-%d", time.Now().UnixNano())
	for seq := uint64(1); seq <= 2; seq++ {
		_, _, err := r.Pass(ctx, p, "pod-a", seq, time.Minute)
		require.NoError(t, err)
	}
	slot, sup := cooldownKeys(p, "pod-a")
	for _, k := range []string{slot, sup} {
		ttl, err := r.c.PTTL(ctx, k).Result()
		require.NoError(t, err)
		assert.Positive(t, ttl, "%s lingers no longer than it is useful", k)
	}
	assert.NotContains(t, slot, "pod-a", "dedup keys are user data: hashed")
	assert.Contains(t, slot, "{"+p+"}", "namespaced by project")
}

// A call its call budget refused gives its cooldown back: the key is not cooling, and the
// next call carries what was held back, the refused trigger included, exactly once.
func TestReleasedCooldownPassesTheNextTriggerWithTheCount(t *testing.T) {
	for name, s := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			p := fmt.Sprintf("rel-%s-%d", name, time.Now().UnixNano())
			const cd = time.Minute
			pass := func(seq uint64) (bool, int64) {
				ok, n, err := s.Pass(ctx, p, "pod-a", seq, cd)
				require.NoError(t, err)
				return ok, n
			}
			ok, n := pass(1)
			require.True(t, ok)
			assert.Zero(t, n)
			for seq := uint64(2); seq <= 3; seq++ {
				ok, _ = pass(seq)
				require.False(t, ok)
			}
			require.NoError(t, s.Release(ctx, p, "pod-a", 2), "a trigger that holds no cooldown releases nothing")
			cooling, err := s.Cooling(ctx, p, "pod-a")
			require.NoError(t, err)
			require.True(t, cooling)

			require.NoError(t, s.Release(ctx, p, "pod-a", 1))
			require.NoError(t, s.Release(ctx, p, "pod-a", 1), "released twice counts once")
			cooling, err = s.Cooling(ctx, p, "pod-a")
			require.NoError(t, err)
			assert.False(t, cooling, "no call was made: the key does not cool")

			ok, n = pass(4)
			require.True(t, ok, "the next trigger is sent at once")
			assert.Equal(t, int64(3), n, "two held back by the cooldown and the refused one")
			require.NoError(t, s.Release(ctx, p, "pod-a", 4))
			ok, n = pass(5)
			require.True(t, ok)
			assert.Equal(t, int64(4), n, "a count given back twice is carried whole")
			ok, n = pass(5)
			assert.True(t, ok, "its redelivery is the same call")
			assert.Equal(t, int64(4), n)
			ok, _ = pass(6)
			assert.False(t, ok, "and it holds the cooldown")
		})
	}
}
