package jetstreamexporter

import (
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/otelcol-svc/otelcol-svc/internal/streams"
)

// waker tells the pipeline and sink processes that a project's stream got records, so
// that they pull from the streams of active projects only (idle ones cost no polling;
// see the jetstream receiver). One wake per project and stream at most every interval:
// a consumer woken stays awake until it has found nothing for a while, and the receiver
// counts a wake as covering everything stored within the interval after it.
type waker struct {
	nc    *nats.Conn
	every time.Duration
	last  sync.Map // wake subject -> time.Time of the last wake sent
}

const wakeInterval = 100 * time.Millisecond

func (w *waker) wake(kind, projectID string) {
	if w == nil || w.nc == nil {
		return
	}
	subject := streams.WakeSubject(kind, projectID)
	now := time.Now()
	if v, ok := w.last.Load(subject); ok && now.Sub(v.(time.Time)) < w.every {
		return
	}
	w.last.Store(subject, now)
	// Lost wakes are found by the consumers' sweeps; a publish error is not the request's.
	_ = w.nc.Publish(subject, nil)
}
