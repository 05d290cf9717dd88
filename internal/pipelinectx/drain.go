package pipelinectx

import (
	"context"
	"errors"
)

// The drain signal lets the receiver that feeds a pipeline tell the exporters that the
// process is stopping: a batch already being worked on may still finish, but a delivery
// that failed is not retried here any more. Its records are handed back (the batch fails
// and is nak'ed) so that another process retries them at once, instead of this one
// holding them through backoff waits until the orchestrator kills it.
//
// It is a context of its own, not the batch's: cancelling the batch's context would also
// cut the attempt in progress, which the drain lets finish.

// ErrDraining is the cause of a drain context's end.
var ErrDraining = errors.New("the process is stopping; the records are handed back for another process to deliver")

type drainKey struct{}

// WithDrain returns ctx carrying drain, a context that ends when the process starts
// stopping.
func WithDrain(ctx, drain context.Context) context.Context {
	return context.WithValue(ctx, drainKey{}, drain)
}

// DrainFrom returns the drain context carried by ctx, or one that never ends.
func DrainFrom(ctx context.Context) context.Context {
	if d, ok := ctx.Value(drainKey{}).(context.Context); ok {
		return d
	}
	return context.Background()
}
