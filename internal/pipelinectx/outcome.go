package pipelinectx

import (
	"context"

	"github.com/otelcol-svc/otelcol-svc/internal/deliverylog"
)

type outcomeKey struct{}

// WithOutcome returns ctx carrying o: the jetstream receiver creates the batch's
// deliverylog.Outcome (pipeline role, ledger on), the processors and the agent exporter
// record in it what became of each record, and the receiver settles it in the delivery
// ledger when the call returns.
func WithOutcome(ctx context.Context, o *deliverylog.Outcome) context.Context {
	return context.WithValue(ctx, outcomeKey{}, o)
}

// OutcomeFrom returns the outcome in ctx, or nil (whose methods do nothing).
func OutcomeFrom(ctx context.Context) *deliverylog.Outcome {
	o, _ := ctx.Value(outcomeKey{}).(*deliverylog.Outcome)
	return o
}
