package jetstreamreceiver

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/otelcol-svc/otelcol-svc/components/deliverylog"
)

// settleTimeout bounds counting one batch; past it the batch is redelivered.
const settleTimeout = 5 * time.Second

// settle counts a handled batch in the project's ledger before it is acked: the ledger
// proves received = dropped + sent + dead-lettered + pending, and a count written after
// the ack would be lost by a crash in between (one written before is deduplicated by
// sequence when the batch comes again). A batch that cannot be counted is not acked: it
// is delivered again (and its calls made again: delivery is at least once), which only
// happens when NATS itself is failing.
func (r *jsReceiver) settle(ctx context.Context, project string, seqs []uint64, o *deliverylog.Outcome) error {
	ctx, cancel := context.WithTimeout(ctx, settleTimeout)
	defer cancel()
	l, err := r.openLedger(ctx)
	if err != nil {
		return fmt.Errorf("the ledger cannot be opened: %w", err)
	}
	if err := l.Settle(ctx, project, seqs, o); err != nil {
		return fmt.Errorf("the batch cannot be counted in the ledger: %w", err)
	}
	return nil
}

// recordStart writes where a destination's cursor starts into the ledger, from which
// the ledger derives the destination's figures (deliverylog.StartDestination): by the
// process that created the cursor, or, should it have died first, by the next one to
// find the cursor before it delivered anything. Once per cursor and process. A start
// that cannot be written leaves the destination's figures counted (shown approximate),
// and never holds up deliveries.
func (r *jsReceiver) recordStart(ctx context.Context, t target, c jetstream.Consumer) {
	if !r.cfg.Ledger {
		return
	}
	ci := c.CachedInfo()
	if ci == nil {
		return
	}
	key := t.key()
	if v, ok := r.started.Load(key); ok && v.(time.Time).Equal(ci.Created) {
		return
	}
	if ci.Delivered.Consumer != 0 {
		// Too late to tell the start (it is recorded, or it never will be).
		r.started.Store(key, ci.Created)
		return
	}
	err := deliverylog.StartDestination(ctx, r.js, t.project, t.sink, ci)
	if err != nil {
		r.settings.Logger.Warn("could not record where a destination's cursor starts; its ledger figures stay approximate",
			append(t.logFields(), zap.Error(err))...)
		return
	}
	r.started.Store(key, ci.Created)
}

func (r *jsReceiver) openLedger(ctx context.Context) (*deliverylog.Ledger, error) {
	r.ledgerMu.Lock()
	defer r.ledgerMu.Unlock()
	if r.ledger != nil {
		return r.ledger, nil
	}
	l, err := deliverylog.OpenLedger(ctx, r.js, time.Second)
	if err != nil {
		return nil, err
	}
	r.ledger = l
	return l, nil
}

func (r *jsReceiver) closeLedger() {
	r.ledgerMu.Lock()
	l := r.ledger
	r.ledger = nil
	r.ledgerMu.Unlock()
	if l != nil {
		ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
		defer cancel()
		_ = l.Close(ctx)
	}
}
