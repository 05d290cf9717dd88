package jetstreamreceiver

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/otelcol-svc/otelcol-svc/internal/deliverylog"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
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
// process that created the cursor, or by the first one to find a cursor without a start
// entry: one a previous release created (which recorded none), or one whose creator
// died first. A cursor found after it delivered starts its figures then, so they are
// exact from that moment on (and say since when). Once per cursor and process; the
// entry is written with compare-and-set, so of several processes finding the cursor at
// once the first one's start stands. A start that cannot be written leaves the
// destination's figures counted (shown approximate) until a next try, and never holds
// up deliveries.
//
// The cursor is also checked for results the output stream removed (its max_age)
// before they were settled, which would otherwise count as delivered
// (deliverylog.MarkRemoved): the ledger's reader checks the same.
func (r *jsReceiver) recordStart(ctx context.Context, t target, c jetstream.Consumer) {
	if !r.cfg.Ledger {
		return
	}
	ci := c.CachedInfo()
	if ci == nil {
		return
	}
	key := t.key()
	if v, ok := r.started.Load(key); !ok || !v.(time.Time).Equal(ci.Created) {
		if err := deliverylog.StartDestination(ctx, r.js, t.project, t.sink, ci); err != nil {
			r.settings.Logger.Warn("could not record where a destination's cursor starts; its ledger figures stay approximate",
				append(t.logFields(), zap.Error(err))...)
			return
		}
		r.started.Store(key, ci.Created)
	}
	r.checkRemoved(ctx, t, ci)
}

// checkRemoved marks a destination's figures approximate when the output stream has
// removed results its cursor had not settled. It costs a stream info, once per opening
// of the cursor.
func (r *jsReceiver) checkRemoved(ctx context.Context, t target, ci *jetstream.ConsumerInfo) {
	s, err := r.js.Stream(ctx, streams.OutputStream(t.project))
	if err != nil {
		return // the next opening, or the ledger's reader, looks again
	}
	first := s.CachedInfo().State.FirstSeq
	if first <= 1 || (first-1 <= ci.AckFloor.Stream && first-1 <= ci.Delivered.Stream) {
		return // the usual case, told without reading the ledger: nothing unsettled removed
	}
	marked, err := deliverylog.MarkRemoved(ctx, r.js, t.project, t.sink, ci, first)
	if err == nil && marked {
		r.settings.Logger.Warn("the output stream removed results before this destination settled them (older than its max_age); the ledger shows its figures as approximate",
			t.logFields()...)
	}
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
