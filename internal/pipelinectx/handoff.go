package pipelinectx

import (
	"context"
	"sync"
)

// The batch order hand-off lets a pipeline's last stage tell the stage that feeds it that a
// batch has reached the point where its order is fixed, so the feeder may start the next
// batch before this one is finished.
//
// The jetstream receiver keeps several batches in flight per consumer; the agent exporter
// queues each batch's calls in per-group lanes (one FIFO per group key). For the calls of
// one group to keep the stream's order across batches, batch N+1 must not reach the lanes
// before batch N's calls are in them, and the processors, which keep per-project state,
// must still see one batch at a time. The receiver therefore starts the next batch only
// when the previous one has handed off (its calls are queued) or returned. A pipeline
// whose exporter never hands off (the sink role) stays strictly one batch at a time.
//
// Written by hand: this is a one-shot signal carried in a context, which no library
// offers in this shape.

type handoffKey struct{}

type handoff struct {
	once sync.Once
	done chan struct{}
}

// WithHandoff returns a context that carries a handoff signal, and the channel closed
// the first time Handoff is called with that context (or one derived from it).
func WithHandoff(ctx context.Context) (context.Context, <-chan struct{}) {
	h := &handoff{done: make(chan struct{})}
	return context.WithValue(ctx, handoffKey{}, h), h.done
}

// Handoff tells whoever created ctx's handoff signal that the batch's order is fixed
// downstream. It may be called any number of times; without a signal in ctx it does
// nothing.
func Handoff(ctx context.Context) {
	if h, ok := ctx.Value(handoffKey{}).(*handoff); ok {
		h.once.Do(func() { close(h.done) })
	}
}
