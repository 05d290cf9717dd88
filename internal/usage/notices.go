package usage

import (
	"fmt"
	"time"
)

// Thresholds are the shares of the limit at which an account is told, once a month each.
var Thresholds = [2]int{80, 100}

// Notice tells an account it has used a share of its month's limit.
type Notice struct {
	Account string    `json:"account"`
	Month   string    `json:"month"` // "2026-11"
	Percent int       `json:"percent"`
	Limit   int64     `json:"limit"`
	Used    int64     `json:"used"`
	At      time.Time `json:"at"`
	ResetAt time.Time `json:"reset_at"`
}

// Text is the short message for a project's sinks, e.g.
// "shop: 80% of this month's 10,000 events used; resets 2026-12-01".
func (n Notice) Text(project string) string {
	return fmt.Sprintf("%s: %d%% of this month's %s events used; resets %s",
		project, n.Percent, group(n.Limit), n.ResetAt.UTC().Format("2006-01-02"))
}

// checkNotices claims the notices the account's count has reached (refused: a request
// was refused, which is 100% as far as the user is concerned). A KV create decides which
// meter sends a notice; delivery then survives the sender's death (see claimNotice).
// Called with am.mu held; the write happens in its own goroutine, off the request path.
func (m *Meter) checkNotices(am *accountMonth, claimed, limit int64, refused bool) {
	if limit <= 0 {
		return
	}
	for i, pct := range Thresholds {
		if am.noticed[i] {
			continue
		}
		// claimed*100 ≥ pct*limit without overflow for any realistic limit.
		if !(refused && pct == 100) && claimed*100 < int64(pct)*limit {
			continue
		}
		am.noticed[i] = true
		n := Notice{
			Account: am.account, Month: Month(am.month), Percent: pct, Limit: limit,
			Used: min(claimed, limit), At: m.cfg.Clock().UTC(), ResetAt: ResetAt(am.month),
		}
		m.notices.Add(1)
		go func() {
			defer m.notices.Done()
			m.claimNotice(n)
		}()
	}
}

// QuotaError refuses a request that would take its account past the month's limit.
type QuotaError struct {
	Limit     int64
	Used      int64 // counted this month when refused (leases included)
	Requested int64
	Month     time.Time // start of the month
	Now       time.Time
}

// RetryAfter is the seconds until the count resets, for the Retry-After header.
func (e *QuotaError) RetryAfter() int { return RetryAfter(e.Now) }

// ResetAt is when the count resets.
func (e *QuotaError) ResetAt() time.Time { return ResetAt(e.Month) }

// Error is the message the receiver returns with 429 quota_exceeded.
func (e *QuotaError) Error() string {
	month := e.Month.Format("January 2006")
	reset := e.ResetAt().Format(time.RFC3339)
	if e.Used >= e.Limit {
		return fmt.Sprintf("this account has used its %s events for %s; the count resets at %s",
			group(e.Limit), month, reset)
	}
	return fmt.Sprintf("this request's %s records would take this account past its %s events for %s (%s used); the count resets at %s",
		group(e.Requested), group(e.Limit), month, group(e.Used), reset)
}
