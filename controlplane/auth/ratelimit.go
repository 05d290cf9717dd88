package auth

import (
	"sync"
	"time"
)

// Limiter counts events per key (failed logins per address and account, signups per
// address) in a sliding window and refuses further attempts past the limit. Keys must
// include the client's address: a limit keyed by something an attacker can name alone
// (an email) lets them lock its owner out.
type Limiter struct {
	mu     sync.Mutex
	limit  int
	window time.Duration
	fails  map[string][]time.Time
	// sweepNext is the size at which the next sweep runs (maybeSweep).
	sweepNext int
}

// NewLimiter allows limit failures per key within window.
func NewLimiter(limit int, window time.Duration) *Limiter {
	return &Limiter{limit: limit, window: window, fails: map[string][]time.Time{}}
}

// Allow reports whether key may try now, and if not, how long until it may.
func (l *Limiter) Allow(key string, now time.Time) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f := l.prune(key, now)
	if len(f) < l.limit {
		return true, 0
	}
	return false, f[0].Add(l.window).Sub(now)
}

// Fail records a failed attempt.
func (l *Limiter) Fail(key string, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.maybeSweep(now)
	l.fails[key] = append(l.prune(key, now), now)
}

// Take is Allow, counting the attempt when it is allowed (for limits on attempts rather
// than on failures, such as signups).
func (l *Limiter) Take(key string, now time.Time) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f := l.prune(key, now)
	if len(f) >= l.limit {
		return false, f[0].Add(l.window).Sub(now)
	}
	l.maybeSweep(now)
	l.fails[key] = append(f, now)
	return true, 0
}

// sweepAt bounds the memory of keys never seen again (one address trying many
// accounts): past it, Fail first drops every key whose window has passed. The next sweep
// waits until the map has doubled, so many live keys do not make every call a sweep.
const sweepAt = 100_000

func (l *Limiter) maybeSweep(now time.Time) {
	if len(l.fails) < max(l.sweepNext, sweepAt) {
		return
	}
	for k := range l.fails {
		l.prune(k, now)
	}
	l.sweepNext = 2 * len(l.fails)
}

// Reset forgets a key's failures (after a successful login).
func (l *Limiter) Reset(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.fails, key)
}

func (l *Limiter) prune(key string, now time.Time) []time.Time {
	f := l.fails[key]
	i := 0
	for i < len(f) && now.Sub(f[i]) >= l.window {
		i++
	}
	f = f[i:]
	if len(f) == 0 {
		delete(l.fails, key)
		return nil
	}
	l.fails[key] = f
	return f
}
