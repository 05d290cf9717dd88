package ingestreceiver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/plog"
)

// On shutdown a request being handled completes and is answered 2xx, while new ones are
// answered 503 with Retry-After until drain_delay has passed and the listener closes.
func TestShutdownDrainsInflightAndRefusesNew(t *testing.T) {
	tr := startTestReceiver(t, func(c *Config) {
		c.DrainDelay, c.DrainTimeout = 500*time.Millisecond, 5*time.Second
	}, &fakeAuth{sources: githubSources()})
	entered, release := make(chan struct{}, 1), make(chan struct{})
	var err error
	tr.logs, err = consumer.NewLogs(func(context.Context, plog.Logs) error {
		select {
		case entered <- struct{}{}:
			<-release
		default:
		}
		return nil
	})
	require.NoError(t, err)
	released := false
	t.Cleanup(func() {
		if !released {
			close(release)
		}
	})
	// The receiver's own server, as Start would have it, so Shutdown drains it.
	srv := httptest.NewUnstartedServer(tr.routes())
	tr.server = srv.Config
	srv.Start()
	t.Cleanup(srv.Close)
	url := srv.URL + "/v1/events"
	key := map[string]string{"X-API-Key": "key-p1"}

	inflight := make(chan answer, 1)
	go func() { inflight <- do(t, http.MethodPost, url, []byte(`{"n":1}`), key) }()
	<-entered
	stopped := make(chan error, 1)
	began := time.Now()
	go func() { stopped <- tr.Shutdown(context.Background()) }()

	require.Eventually(t, func() bool { return tr.draining.Load() }, 2*time.Second, 5*time.Millisecond)
	a := do(t, http.MethodPost, url, []byte(`{"n":2}`), key)
	assert.Equal(t, http.StatusServiceUnavailable, a.status, "%s", a.body)
	assert.Equal(t, "unavailable", a.code(t))
	assert.NotEmpty(t, a.header.Get("Retry-After"))

	close(release)
	released = true
	got := <-inflight
	assert.Equal(t, http.StatusAccepted, got.status, "the request in flight completes: %s", got.body)
	require.NoError(t, <-stopped)
	assert.GreaterOrEqual(t, time.Since(began), 500*time.Millisecond, "the listener stays open for drain_delay")
	_, err = http.Post(url, "application/json", nil)
	assert.Error(t, err, "the listener is closed after the drain")
}
