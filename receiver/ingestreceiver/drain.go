package ingestreceiver

import (
	"context"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
	"github.com/otelcol-svc/otelcol-svc/receiver/ingestreceiver/internal/otlphttp"
)

// Stopping (SIGTERM) goes in three steps, each a step behind the health check, which the
// collector turns to 503 as soon as it starts shutting components down:
//
//  1. new requests are answered 503 with Retry-After and Connection: close, so a client
//     retries, on another replica once the load balancer has taken this one out;
//  2. after drain_delay (the time load balancers and kube-proxy need to stop sending) the
//     listener closes, and the requests being handled get up to drain_timeout to complete:
//     one answered 2xx has its records stored, as always;
//  3. connections still open after that are closed; their requests were never answered
//     2xx, so their clients retry them.

// refuseWhileDraining answers new requests 503 once the receiver is stopping.
func (r *ingestReceiver) refuseWhileDraining(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if !r.draining.Load() {
			next.ServeHTTP(w, req)
			return
		}
		// The connection goes with this answer: the client's next request opens a new
		// one, which the load balancer sends to another replica.
		w.Header().Set("Connection", "close")
		e := apierror.New(http.StatusServiceUnavailable, apierror.Unavailable,
			"the receiver is shutting down; retry, another replica takes the request")
		e.RetryAfter = r.cfg.RetryAfter
		if isOTLPPath(req.URL.Path) {
			enc, _ := otlpEncodingOf(req)
			otlphttp.WriteError(w, enc, e)
			return
		}
		apierror.Write(w, e)
	})
}

// drain refuses new requests, waits drain_delay, then closes the listener and waits up
// to drain_timeout (or until ctx ends) for the requests being handled.
func (r *ingestReceiver) drain(ctx context.Context) error {
	// Keep-alives stay on: closing idle connections now would race with the requests
	// clients are sending on them (a POST is not retried by most clients). Each 503
	// closes its own connection instead; the rest close with the listener.
	r.draining.Store(true)
	if r.cfg.DrainDelay > 0 {
		t := time.NewTimer(r.cfg.DrainDelay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
	sctx, cancel := context.WithTimeout(ctx, r.cfg.DrainTimeout)
	defer cancel()
	if err := r.server.Shutdown(sctx); err != nil {
		// Requests that did not complete in time: their connections are closed and the
		// clients, never answered, retry. Not a failed shutdown.
		r.settings.Logger.Warn("requests still being handled at the end of drain_timeout were cut off; their clients retry them",
			zap.Duration("drain_timeout", r.cfg.DrainTimeout), zap.Error(err))
		_ = r.server.Close()
	}
	return nil
}
