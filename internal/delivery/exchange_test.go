package delivery

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
)

// exchangeEngine is an engine without the log and notices (no NATS), retrying fast.
func exchangeEngine(t *testing.T, allow string) *Engine {
	t.Helper()
	s := DefaultSettings()
	s.AllowCIDRs = allow
	s.Timeout = 2 * time.Second
	s.Retry = RetryConfig{InitialInterval: time.Millisecond, MaxInterval: 5 * time.Millisecond, MaxElapsedTime: 5 * time.Second}
	s.DeliveryLog.Enabled = false
	s.FailureNotices.Enabled = false
	e := New(Options{Settings: s, Name: "test", Logger: zap.NewNop(), Telemetry: nopTelemetry{}})
	require.NoError(t, e.Start(nil, nil, nil))
	t.Cleanup(func() { e.Shutdown(context.Background()) })
	return e
}

// post is an Exchange that posts to url with the client it is given, and reads a
// refusal from the answer's X-Refused header (as Slack's ok:false).
func post(url string) Exchange {
	return func(ctx context.Context, c *http.Client) ExchangeResult {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
		resp, err := c.Do(req)
		if err != nil {
			return ExchangeResult{Err: err, Sent: req.Header}
		}
		defer resp.Body.Close()
		return ExchangeResult{Status: resp.StatusCode, RetryAfter: resp.Header.Get("Retry-After"),
			Refused: resp.Header.Get("X-Refused"), Retryable: resp.Header.Get("X-Retryable") != "", Sent: req.Header}
	}
}

// An exchange is retried as a request is: a 429, and a 2xx whose body says try again,
// then taken.
func TestExchangeRetriesAsARequest(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		switch n.Add(1) {
		case 1:
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusTooManyRequests)
		case 2:
			w.Header().Set("X-Refused", "internal_error")
			w.Header().Set("X-Retryable", "1")
		}
	}))
	defer srv.Close()
	e := exchangeEngine(t, "127.0.0.0/8")
	res := e.Deliver(context.Background(), Request{Who: "slack", URLField: "slack_api_url", Project: "p", Target: srv.URL, Exchange: post(srv.URL)})
	assert.True(t, res.Delivered, res.Reason)
	assert.Equal(t, 3, res.Attempts)
}

// A refusal that is not worth retrying ends the delivery at once, saying why.
func TestExchangeRefusedIsFinal(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		n.Add(1)
		w.Header().Set("X-Refused", "channel_not_found")
	}))
	defer srv.Close()
	e := exchangeEngine(t, "127.0.0.0/8")
	res := e.Deliver(context.Background(), Request{Who: "slack", URLField: "slack_api_url", Project: "p", Target: srv.URL, Exchange: post(srv.URL)})
	assert.False(t, res.Delivered)
	assert.Equal(t, 1, res.Attempts)
	assert.Equal(t, "slack refused the request: channel_not_found", res.Reason)
	assert.EqualValues(t, 1, n.Load())
}

// The exchange is given the engine's outbound client: a loopback address not allowed is
// refused before anything is sent.
func TestExchangeUsesTheOutboundClient(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { n.Add(1) }))
	defer srv.Close()
	e := exchangeEngine(t, "")
	res := e.Deliver(context.Background(), Request{Who: "slack", URLField: "slack_api_url", Project: "p", Target: srv.URL, Exchange: post(srv.URL)})
	assert.False(t, res.Delivered)
	assert.Contains(t, res.Reason, "is a loopback address")
	assert.Zero(t, n.Load())
}
