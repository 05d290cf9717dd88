package auth

import (
	"sync"
	"time"
)

// Limiter counts failed logins per key (an email, an address) in a sliding window and
// refuses further attempts past the limit, which slows password guessing to a crawl
// without locking a user out for long.
type Limiter struct {
	mu     sync.Mutex
	limit  int
	window time.Duration
	fails  map[string][]time.Time
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
	l.fails[key] = append(l.prune(key, now), now)
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
