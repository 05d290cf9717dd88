package delivery

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/stretchr/testify/assert"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"1":                       time.Second,
		" 120 ":                   2 * time.Minute,
		"0":                       0,
		"99999999999999999999999": maxRetryAfter,
		now.Add(90 * time.Second).Format(http.TimeFormat): 90 * time.Second,
		now.Add(-time.Hour).Format(http.TimeFormat):       0,
	} {
		got, ok := parseRetryAfter(v, now)
		assert.True(t, ok, v)
		assert.Equal(t, want, got, v)
	}
	for _, v := range []string{"", "-1", "1.5", "soon", "+3"} {
		_, ok := parseRetryAfter(v, now)
		assert.False(t, ok, v)
	}
}

func TestFullJitterStaysUnderTheCeiling(t *testing.T) {
	cfg := RetryConfig{InitialInterval: 100 * time.Millisecond, MaxInterval: time.Second, MaxElapsedTime: time.Hour}
	ceilings := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, time.Second, time.Second}
	top := make([]time.Duration, len(ceilings))
	for range 500 {
		b := newCallBackOff(cfg, &attemptResult{})
		b.Reset()
		for n, ceiling := range ceilings {
			d := b.NextBackOff()
			assert.GreaterOrEqual(t, d, time.Duration(0))
			assert.LessOrEqual(t, d, ceiling, "after attempt %d", n+1)
			top[n] = max(top[n], d)
		}
	}
	for n, ceiling := range ceilings {
		assert.Greater(t, top[n], ceiling/2, "after attempt %d: the whole interval is used", n+1)
	}
}

func TestBackOffKeepsToTheBudget(t *testing.T) {
	last := &attemptResult{}
	b := newCallBackOff(RetryConfig{InitialInterval: time.Hour, MaxInterval: time.Hour, MaxElapsedTime: time.Minute}, last)
	b.Reset()
	assert.LessOrEqual(t, b.NextBackOff(), time.Minute, "a wait is cut to the budget left")

	*last = attemptResult{retryAfter: 2 * time.Minute, hasRetryAfter: true, reason: "503"}
	assert.Equal(t, backoff.Stop, b.NextBackOff(), "a Retry-After beyond the budget ends the retries")
	assert.Contains(t, b.exhausted(2, *last), "the agent asked to retry after 2m0s, beyond the remaining")

	*last = attemptResult{retryAfter: time.Second, hasRetryAfter: true}
	assert.Equal(t, time.Second, b.NextBackOff(), "a Retry-After within the budget is the wait")

	b.deadline = time.Now().Add(-time.Millisecond)
	assert.Equal(t, backoff.Stop, b.NextBackOff(), "no attempt after the budget")
}

func TestRedactURL(t *testing.T) {
	for raw, want := range map[string]string{
		"https://u:p@agent.example.com:8443/hook?token=x#f": "https://agent.example.com:8443/hook",
		"https://agent.example.com/a/b?":                    "https://agent.example.com/a/b",
		"not a url":                                         "(not a valid URL)",
		"":                                                  "(not a valid URL)",
	} {
		assert.Equal(t, want, redactURL(raw), raw)
	}
	assert.Equal(t, "https://agent.example.com", Origin("https://u:p@agent.example.com/T0/B0/secret"))
}

func TestHeaderValueIsOneBoundedLine(t *testing.T) {
	assert.Equal(t, "agent answered 400: a b  c", headerValue("agent answered 400: a\nb\r\nc"))
	long := headerValue(string(make([]byte, 5000)))
	assert.LessOrEqual(t, len(long), maxHeaderValue)
	assert.Equal(t, "agent answered 500 with an empty body", answered("agent", 500, []byte("  \n")))
	// 199 ASCII bytes and a two-byte character cut in half: the half is dropped.
	cut := answered("agent", 400, []byte(strings.Repeat("a", 199)+"é"))
	assert.Equal(t, "agent answered 400: "+strings.Repeat("a", 199), cut)
}
