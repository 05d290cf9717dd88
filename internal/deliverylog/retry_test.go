package deliverylog

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A delivery waiting for its retry says when the next try is due, and each attempt the
// headers it sent: the service's own with their values, credentials and whatever the
// destination's configuration added as [redacted]. The next try clears the time; so does
// the end of the delivery.
func TestWaitingDeliveryShowsNextAttemptAndRedactedHeaders(t *testing.T) {
	w, r := setup(t)
	ctx := context.Background()
	sent := http.Header{}
	sent.Set("Content-Type", "application/json")
	sent.Set("X-Request-Id", "req_1")
	sent.Set("User-Agent", "otelcol-svc/1")
	sent.Set("Webhook-Id", "msg_1")
	sent.Set("Webhook-Timestamp", "1790000000")
	sent.Set("Webhook-Signature", "v1,c2VjcmV0LXNpZ25hdHVyZQ==")
	sent.Set("Authorization", "Bearer hook-secret-1")
	sent.Set("X-Api-Key", "key-secret-2")
	sent.Set("Cookie", "session=cookie-secret-3")
	sent.Set("X-Pass", "pass-secret-4")
	sent.Set("X-Env", "prod")
	configured := map[string]string{"authorization": "Bearer hook-secret-1", "X-Pass": "pass-secret-4", "x-env": "prod"}

	due := time.Now().Add(90 * time.Second).UTC().Truncate(time.Millisecond)
	w.Record("p1", Delivery{ID: "d1", Kind: KindSink, SinkID: "s1"})
	w.Attempt("p1", "d1", Attempt{StatusCode: 503, Error: "503", LatencyMS: 4, RequestHeaders: LogHeaders(sent, configured)}, nil)
	w.NextAttempt("p1", "d1", due)
	flushOnly(t, w)

	d, err := r.Get(ctx, "p1", "d1")
	require.NoError(t, err)
	assert.Equal(t, StateRetrying, d.State)
	assert.True(t, d.NextAttemptAt.Equal(due), "next attempt at %v, want %v", d.NextAttemptAt, due)
	require.Len(t, d.AttemptLog, 1)
	assert.Equal(t, map[string]string{
		"Content-Type":      "application/json",
		"X-Request-Id":      "req_1",
		"User-Agent":        "otelcol-svc/1",
		"Webhook-Id":        "msg_1",
		"Webhook-Timestamp": "1790000000",
		"Webhook-Signature": Redacted,
		"Authorization":     Redacted,
		"X-Api-Key":         Redacted,
		"Cookie":            Redacted,
		"X-Pass":            Redacted,
		"X-Env":             Redacted,
	}, d.AttemptLog[0].RequestHeaders)
	// The stored message holds no secret at all, whoever reads it.
	raw, err := r.s.GetLastMsgForSubject(ctx, subject("p1", "d1"))
	require.NoError(t, err)
	for _, secret := range []string{"hook-secret-1", "key-secret-2", "cookie-secret-3", "pass-secret-4", "c2VjcmV0", "prod"} {
		assert.NotContains(t, string(raw.Data), secret)
	}
	// Listed too, so the list shows which deliveries wait and until when.
	ds, err := r.List(ctx, "p1", Filter{})
	require.NoError(t, err)
	require.Len(t, ds, 1)
	assert.True(t, ds[0].NextAttemptAt.Equal(due))

	// The next try is made: no time is due until it schedules another one.
	w.Attempt("p1", "d1", Attempt{StatusCode: 503, Error: "503"}, nil)
	flushOnly(t, w)
	d, err = r.Get(ctx, "p1", "d1")
	require.NoError(t, err)
	assert.Len(t, d.AttemptLog, 2)
	assert.True(t, d.NextAttemptAt.IsZero(), "an attempt clears it: %v", d.NextAttemptAt)
	w.NextAttempt("p1", "d1", due.Add(time.Minute))
	w.Finish("p1", "d1", Final{State: StateDeadLettered})
	flush(t, w)
	d, err = r.Get(ctx, "p1", "d1")
	require.NoError(t, err)
	assert.Equal(t, StateDeadLettered, d.State)
	assert.True(t, d.NextAttemptAt.IsZero(), "a delivery that ended waits for nothing: %v", d.NextAttemptAt)
}

// flushOnly waits until the writer has published what it was given, without closing it:
// the events are applied in order, so a marker delivery recorded last shows they are.
func flushOnly(t *testing.T, w *Writer) {
	t.Helper()
	marker := "m" + strings.ReplaceAll(time.Now().Format("150405.000000000"), ".", "")
	w.Record("markers", Delivery{ID: marker, Kind: KindAgent})
	s, err := w.js.Stream(context.Background(), StreamName)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := NewReader(s).Get(context.Background(), "markers", marker)
		return err == nil
	}, 10*time.Second, 10*time.Millisecond)
}

func TestLogHeadersBounds(t *testing.T) {
	assert.Nil(t, LogHeaders(nil, nil))
	h := http.Header{}
	for i := range MaxHeaders + 5 {
		h.Set("X-H"+strings.Repeat("a", i), "v")
	}
	h.Set("X-Request-Id", strings.Repeat("r", MaxHeaderValue+10))
	got := LogHeaders(h, nil)
	assert.Len(t, got, MaxHeaders)
	// A destination's own X-Request-Id is its value, not the service's: redacted.
	got = LogHeaders(http.Header{"X-Request-Id": {"mine"}}, map[string]string{"x-request-id": "mine"})
	assert.Equal(t, map[string]string{"X-Request-Id": Redacted}, got)
	// The service replaced it: its own value shows.
	got = LogHeaders(http.Header{"X-Request-Id": {"req_2"}}, map[string]string{"x-request-id": "mine"})
	assert.Equal(t, map[string]string{"X-Request-Id": "req_2"}, got)
	// Whoever builds an attempt's headers, the writer bounds them.
	big := map[string]string{}
	for i := range MaxHeaders + 3 {
		big[strings.Repeat("n", MaxHeaderName+i)] = strings.Repeat("v", MaxHeaderValue+1)
	}
	b := boundHeaders(big)
	assert.LessOrEqual(t, len(b), MaxHeaders)
	for k, v := range b {
		assert.LessOrEqual(t, len(k), MaxHeaderName)
		assert.LessOrEqual(t, len(v), MaxHeaderValue)
	}
}

// Two names that are one header once canonical give the log one entry, the same one on
// every attempt (the later in sorted order, as always), whichever order the map gives.
func TestLogHeadersNonCanonicalNamesAreDeterministic(t *testing.T) {
	for range 20 {
		got := LogHeaders(http.Header{"X-Request-Id": {"a"}, "x-request-id": {"b"}, "Content-Type": {"application/json"}}, nil)
		assert.Equal(t, map[string]string{"X-Request-Id": "b", "Content-Type": "application/json"}, got)
	}
}
