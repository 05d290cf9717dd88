package usage

import (
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Rate is an ingest rate limit: records per second with a burst. PerSecond 0 is off.
type Rate struct {
	PerSecond float64 `json:"per_second"`
	Burst     int     `json:"burst"`
}

func (r Rate) off() bool { return r.PerSecond <= 0 }

func (r Rate) burst() int {
	if r.Burst > 0 {
		return r.Burst
	}
	return max(int(math.Ceil(r.PerSecond)), 1)
}

// RateLimiter limits each project's ingest, per process, with a token bucket per project
// (x/time/rate). The deployment sets a default; a project may have its own rate.
type RateLimiter struct {
	clock func() time.Time

	mu        sync.Mutex
	def       Rate
	overrides map[string]Rate
	buckets   map[string]*bucketOf
	swept     time.Time
}

type bucketOf struct {
	rate Rate
	lim  *rate.Limiter
	used time.Time
}

// RateDecision is RateLimiter.Allow's answer.
type RateDecision struct {
	OK bool
	// RetryAfter is when the same request would pass (for Retry-After).
	RetryAfter time.Duration
	// TooLarge: the request has more records than the burst and can never pass as one;
	// the client must send smaller requests.
	TooLarge bool
}

// NewRateLimiter limits every project to def (off when def.PerSecond is 0). clock may be
// nil (time.Now).
func NewRateLimiter(def Rate, clock func() time.Time) *RateLimiter {
	if clock == nil {
		clock = time.Now
	}
	return &RateLimiter{clock: clock, def: def, overrides: map[string]Rate{}, buckets: map[string]*bucketOf{}}
}

// SetDefault changes the deployment's rate.
func (l *RateLimiter) SetDefault(r Rate) {
	l.mu.Lock()
	l.def = r
	l.mu.Unlock()
}

// SetProject gives project its own rate (PerSecond 0: no limit for it).
func (l *RateLimiter) SetProject(project string, r Rate) {
	l.mu.Lock()
	l.overrides[project] = r
	l.mu.Unlock()
}

// ClearProject returns project to the default.
func (l *RateLimiter) ClearProject(project string) {
	l.mu.Lock()
	delete(l.overrides, project)
	l.mu.Unlock()
}

// Allow takes n records from project's bucket, or refuses the request whole.
func (l *RateLimiter) Allow(project string, n int) RateDecision {
	now := l.clock()
	l.mu.Lock()
	defer l.mu.Unlock()
	r, ok := l.overrides[project]
	if !ok {
		r = l.def
	}
	if r.off() {
		return RateDecision{OK: true}
	}
	if n > r.burst() {
		return RateDecision{TooLarge: true}
	}
	b := l.buckets[project]
	if b == nil || b.rate != r {
		b = &bucketOf{rate: r, lim: rate.NewLimiter(rate.Limit(r.PerSecond), r.burst())}
		// A new bucket starts full, as of now (not of the limiter's zero time).
		b.lim.SetLimitAt(now, rate.Limit(r.PerSecond))
		l.buckets[project] = b
	}
	b.used = now
	l.sweep(now)
	res := b.lim.ReserveN(now, n)
	if d := res.DelayFrom(now); d > 0 {
		res.CancelAt(now)
		return RateDecision{RetryAfter: d}
	}
	return RateDecision{OK: true}
}

// sweep forgets buckets that have been idle long enough to be full again (so forgetting
// changes nothing), at most once a minute, so memory follows the active projects.
func (l *RateLimiter) sweep(now time.Time) {
	if now.Sub(l.swept) < time.Minute {
		return
	}
	l.swept = now
	for p, b := range l.buckets {
		refill := time.Duration(float64(b.rate.burst()) / b.rate.PerSecond * float64(time.Second))
		if idle := now.Sub(b.used); idle > time.Minute && idle > refill {
			delete(l.buckets, p)
		}
	}
}
