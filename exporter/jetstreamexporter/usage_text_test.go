package jetstreamexporter

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/otelcol-svc/otelcol-svc/internal/usage"
)

// Usage notices are the service's sentences, saying whose limit it is, what happens at
// 100% and until when (they used to read "checkout-prod: 100% of…",
// and a chat template made that ":rotating_light: [] checkout-prod: 100% of…").
func TestUsageNoticeTextIsTheServicesOwn(t *testing.T) {
	reset := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	assert.Equal(t, "otelcol-svc: the account of project checkout-prod has used 100% of this month's 10,000 events; "+
		"new events are refused (429 quota_exceeded) until 1 December 2026 00:00 UTC. Ask for a higher limit, or send fewer events until then.",
		noticeText("checkout-prod", usage.Notice{Percent: 100, Limit: 10000, Used: 10000, ResetAt: reset}))
	assert.Equal(t, "otelcol-svc: the account of project checkout-prod has used 80% of this month's 10,000 events (8,000); "+
		"at 100% new events are refused until 1 December 2026 00:00 UTC.",
		noticeText("checkout-prod", usage.Notice{Percent: 80, Limit: 10000, Used: 8000, ResetAt: reset}))
}
