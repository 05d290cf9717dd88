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

	"github.com/otelcol-svc/otelcol-svc/internal/pipelinectx"
)

type noTelemetry struct{}

func (noTelemetry) Attempt(context.Context, string, string) {}
func (noTelemetry) ThrottledWait(context.Context, string)   {}
func (noTelemetry) CircuitChange(context.Context, string)   {}
func (noTelemetry) ObserveLog(_, _, _ func() int64) error   { return nil }

// drainEngine is an engine that retries a failing agent for a long budget, and lets
// loopback addresses through (Start would refuse them).
func drainEngine() *Engine {
	s := DefaultSettings()
	s.Retry = RetryConfig{InitialInterval: 5 * time.Second, MaxInterval: 5 * time.Second, MaxElapsedTime: time.Hour}
	e := New(Options{Settings: s, Name: "test", Logger: zap.NewNop(), Telemetry: noTelemetry{}})
	e.client = &http.Client{}
	return e
}

// A process that starts stopping hands a failing delivery back at once (aborted, not
// dead-lettered) instead of waiting out its backoff until it is killed.
func TestDrainEndsTheRetriesNotTheAttempt(t *testing.T) {
	var attempts atomic.Int32
	started := make(chan struct{}, 1)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if attempts.Add(1) == 1 {
			started <- struct{}{}
			<-release
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	drain, stop := context.WithCancel(context.Background())
	ctx := pipelinectx.WithDrain(context.Background(), drain)
	done := make(chan Result, 1)
	go func() {
		done <- drainEngine().Deliver(ctx, Request{Who: "agent", Project: "p", Target: srv.URL, Body: []byte("{}")})
	}()

	<-started
	stop()
	// The attempt in progress is not cut by the drain: it gets its answer.
	close(release)
	select {
	case r := <-done:
		assert.True(t, r.Aborted, "handed back, not dead-lettered: %+v", r)
		assert.Equal(t, 1, r.Attempts)
		assert.Equal(t, http.StatusServiceUnavailable, r.Status, "the attempt in progress completed")
		assert.ErrorIs(t, r.Cause, pipelinectx.ErrDraining)
	case <-time.After(3 * time.Second):
		t.Fatal("the delivery kept retrying after the drain began")
	}
	require.EqualValues(t, 1, attempts.Load())
}

// Without a drain the same delivery keeps retrying (the budget is an hour).
func TestWithoutDrainTheRetriesGoOn(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	r := drainEngine().Deliver(ctx, Request{Who: "agent", Project: "p", Target: srv.URL, Body: []byte("{}")})
	assert.True(t, r.Aborted)
	assert.Equal(t, 1, r.Attempts, "still waiting for the second attempt when the context ended")
}
