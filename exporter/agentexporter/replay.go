package agentexporter

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/otelcol-svc/otelcol-svc/internal/delivery"
	"github.com/otelcol-svc/otelcol-svc/internal/deliverylog"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
)

// errBodyGone: why a call's replay could not be sent; the replay is logged as
// dead-lettered with it.
const errBodyGone = "the original body is no longer stored (its dead letter expired and the log kept only its first 64 KiB); it cannot be replayed"

// ledgerTimeout bounds moving a replayed call's records in the ledger.
const ledgerTimeout = 5 * time.Second

// replayCall sends a call again (internal/delivery runs the replay queue).
func (e *agentExporter) replayCall(ctx context.Context, proj mirror.Project, old deliverylog.Delivery, bulk bool) error {
	body, err := e.engine.StoredBody(ctx, proj.ID, old.DeadLetterSeq, deadLetterKind)
	if err != nil {
		return err
	}
	if body == nil && len(old.RequestBody) > 0 && !old.RequestTruncated {
		body = old.RequestBody
	}
	if body == nil && delivery.StillUnreplayable(old, errBodyGone, bulk) {
		return nil
	}
	ids, err := e.issuer(ctx)
	if err != nil {
		return fmt.Errorf("%w: no request id can be issued yet: %v", delivery.ErrRequeue, err)
	}
	id := ids.New(proj.ID)
	if body == nil {
		e.engine.Unreplayable(proj.ID, old, deliverylog.Delivery{ID: id, Kind: deliverylog.KindAgent, RequestID: id,
			Records: old.Records, Seqs: old.Seqs, TraceID: old.TraceID, ReplayOf: old.ID}, errBodyGone)
		return nil
	}
	c := call{body: body, records: old.Records, seqs: old.Seqs, traceID: old.TraceID}
	deadLettered, err := e.makeCall(ctx, proj, c, id, old.ID)
	if err != nil {
		return fmt.Errorf("%w: %v", delivery.ErrRequeue, err)
	}
	// Settled either way: the replay stands for the old call from now on (a bulk replay
	// of dead letters takes the replay if it failed too, never both).
	e.engine.Log().Superseded(proj.ID, old, id)
	counts := deliverylog.Counters{Replayed: 1, Calls: 1}
	if deadLettered {
		counts = deliverylog.Counters{Replayed: 1, CallsDeadLettered: 1}
	}
	led, err := e.engine.Log().LedgerNow(ctx)
	if err != nil {
		return nil // the replay is done; only its count is lost
	}
	led.Add(proj.ID, counts)
	if deadLettered {
		return nil
	}
	lctx, cancel := context.WithTimeout(ctx, ledgerTimeout)
	defer cancel()
	// Only the first call's records were counted (dead-lettered, when the pipeline
	// settled its batch); a replay of a replay moves that call's records, once.
	root, ok := e.engine.OriginalCall(lctx, proj.ID, old)
	if !ok || root.State != deliverylog.StateDeadLettered {
		return nil
	}
	if err := led.Replayed(lctx, e.js, proj.ID, root.ID, root.Records); err != nil {
		e.logger.Warn("replayed call not moved from dead_lettered in the ledger", zap.String("project", proj.ID),
			zap.String("delivery", root.ID), zap.Error(err))
	}
	return nil
}
