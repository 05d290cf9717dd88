package jetstreamreceiver

import (
	"context"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// inbox holds what one consumer has received and not yet settled: the messages fetched
// ahead of the pipeline and the batch it is working on. JetStream's AckWait runs for all
// of them from delivery, so all of them are kept alive while this process runs: otherwise
// a slow batch (an agent or a destination being retried) would let the messages queued
// behind it time out and be delivered again, a duplicate while this process still holds
// the first copy.
type inbox struct {
	mu      sync.Mutex
	queued  []jetstream.Msg
	working []jetstream.Msg
	err     error
	ready   chan struct{} // a wake-up when queued grows or err is set
}

func newInbox() *inbox { return &inbox{ready: make(chan struct{}, 1)} }

func (in *inbox) wake() {
	select {
	case in.ready <- struct{}{}:
	default:
	}
}

// fill moves messages from the iterator into the inbox until the iterator stops. Its
// prefetch and the consumer's MaxAckPending bound how many wait here.
func (in *inbox) fill(it jetstream.MessagesContext) {
	for {
		m, err := it.Next()
		in.mu.Lock()
		if err != nil {
			in.err = err
		} else {
			in.queued = append(in.queued, m)
		}
		in.mu.Unlock()
		in.wake()
		if err != nil {
			return
		}
	}
}

// take waits for at least one message and returns up to size, waiting up to linger for
// the batch to fill. The batch counts as being worked on until settled is called.
func (in *inbox) take(ctx context.Context, size int, linger time.Duration) ([]jetstream.Msg, error) {
	var deadline <-chan time.Time
	for {
		in.mu.Lock()
		n, err := len(in.queued), in.err
		if n >= size || n > 0 && linger <= 0 {
			return in.takeLocked(size), nil
		}
		in.mu.Unlock()
		if n == 0 && err != nil {
			return nil, err
		}
		if n > 0 && deadline == nil {
			t := time.NewTimer(linger)
			defer t.Stop()
			deadline = t.C
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-in.ready:
		case <-deadline:
			in.mu.Lock()
			return in.takeLocked(size), nil
		}
	}
}

// takeLocked is called with mu held, and releases it.
func (in *inbox) takeLocked(size int) []jetstream.Msg {
	defer in.mu.Unlock()
	n := min(size, len(in.queued))
	batch := make([]jetstream.Msg, n)
	copy(batch, in.queued)
	// Drop the references, so the backing array does not keep settled messages alive.
	clear(in.queued[:n])
	in.queued = in.queued[n:]
	in.working = batch
	return batch
}

// settled marks the current batch as acked or nak'ed: nothing more to keep alive.
func (in *inbox) settled() {
	in.mu.Lock()
	in.working = nil
	in.mu.Unlock()
}

// keepAlive tells JetStream, every interval until ctx ends, that everything in the inbox
// is still being worked on.
func (in *inbox) keepAlive(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		in.mu.Lock()
		held := make([]jetstream.Msg, 0, len(in.working)+len(in.queued))
		held = append(append(held, in.working...), in.queued...)
		in.mu.Unlock()
		for _, m := range held {
			_ = m.InProgress()
		}
	}
}
