package sinkexporter

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelinedata"
	"github.com/otelcol-svc/otelcol-svc/internal/deliverylog"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
)

// A webhook that asks to be retried in 2 s: while the delivery waits, the log says when
// the next try is due, and the attempt it made with the headers it sent, its credentials
// (the destination's Authorization, the signature) as [redacted]; the webhook itself got
// them whole. Once the retry is made and taken, nothing is due any more.
func TestWaitingDeliveryLogsNextAttemptAndRedactedHeaders(t *testing.T) {
	e := newEnv(t)
	release := make(chan struct{})
	hook := newAgent(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n == 1 {
			w.Header().Set("Retry-After", "2")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		<-release
		w.WriteHeader(http.StatusOK)
	})
	e.putProject(t, sinkProject("sk", mirror.Sink{ID: "s_hook", Kind: "webhook", URL: hook.srv.URL,
		Headers: map[string]string{"Authorization": "Bearer hook-secret", "X-Tenant": "acme"}}))
	r := e.start(t, func(c *Config) { c.Retry.MaxElapsedTime = time.Minute })

	done := make(chan error, 1)
	go func() { done <- consumeResult(r, "sk", "s_hook", `{"text":"hello"}`) }()
	id := sinkDeliveryID(pipelinedata.Item{MsgID: "out:req_1:abc"}, "s_hook")
	d := e.delivery(t, "sk", id, func(d deliverylog.Delivery) bool {
		return d.State == deliverylog.StateRetrying && !d.NextAttemptAt.IsZero()
	})
	require.Len(t, d.AttemptLog, 1)
	first := d.AttemptLog[0]
	due := d.NextAttemptAt.Sub(first.At)
	assert.True(t, due >= 2*time.Second && due < 3*time.Second, "the next try is due 2 s after the first (Retry-After), got %s", due)

	got := hook.requests()
	require.Len(t, got, 1)
	assert.Equal(t, "Bearer hook-secret", got[0].header.Get("Authorization"), "the webhook gets its credential")
	require.NotEmpty(t, got[0].header.Get("webhook-signature"))
	h := first.RequestHeaders
	assert.Equal(t, deliverylog.Redacted, h["Authorization"])
	assert.Equal(t, deliverylog.Redacted, h["X-Tenant"], "every value a destination's configuration adds")
	assert.Equal(t, deliverylog.Redacted, h["Webhook-Signature"])
	assert.Equal(t, "req_1", h["X-Request-Id"])
	assert.Equal(t, "application/json", h["Content-Type"])
	assert.Equal(t, got[0].header.Get("webhook-id"), h["Webhook-Id"])
	assert.Equal(t, got[0].header.Get("webhook-timestamp"), h["Webhook-Timestamp"])
	for k, v := range h {
		assert.NotContains(t, v, "hook-secret", k)
	}

	close(release)
	require.NoError(t, <-done)
	got = hook.requests()
	require.Len(t, got, 2)
	d = e.delivery(t, "sk", id, inState(deliverylog.StateDelivered))
	assert.True(t, d.NextAttemptAt.IsZero(), "delivered: no retry is due")
	require.Len(t, d.AttemptLog, 2)
	second := d.AttemptLog[1]
	assert.False(t, second.At.Before(first.At.Add(2*time.Second)), "the retry came when it was due")
	assert.Equal(t, deliverylog.Redacted, second.RequestHeaders["Authorization"])
	assert.Equal(t, got[1].header.Get("webhook-timestamp"), second.RequestHeaders["Webhook-Timestamp"], "each attempt logs its own headers")
}
