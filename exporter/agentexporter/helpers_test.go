package agentexporter

import (
	"net/http"
	"strings"
	"testing"
	"time"

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
	initial, maxInterval := 100*time.Millisecond, time.Second
	for n, ceiling := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 4: 800 * time.Millisecond, 5: time.Second, 60: time.Second} {
		var top time.Duration
		for range 500 {
			d := fullJitter(initial, maxInterval, n)
			assert.GreaterOrEqual(t, d, time.Duration(0))
			assert.LessOrEqual(t, d, ceiling, "attempt %d", n)
			top = max(top, d)
		}
		assert.Greater(t, top, ceiling/2, "attempt %d: the whole interval is used", n)
	}
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
	assert.Equal(t, "https://agent.example.com", origin("https://u:p@agent.example.com/T0/B0/secret"))
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

func TestJoinArray(t *testing.T) {
	assert.Equal(t, `[{"a":1}]`, string(joinArray([][]byte{[]byte(`{"a":1}`)})))
	assert.Equal(t, `[{"a":1},{ "b" : 2 }]`, string(joinArray([][]byte{[]byte(`{"a":1}`), []byte(`{ "b" : 2 }`)})))
}
