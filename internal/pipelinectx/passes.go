package pipelinectx

import (
	"context"
	"errors"
	"sync"

	"github.com/otelcol-svc/otelcol-svc/internal/windowstore"
)

// A trigger takes its key's cooldown in a processor, before the agent exporter decides
// whether its call is made; the exporter may then refuse it (the project's call budget is
// spent). The trigger must then give the cooldown back, or the key cools with no call
// made and the count the call carried is lost. Passes carries, in a pipeline batch's
// context, which triggers of the batch took a cooldown and in which store, from the
// processors to the exporter, which gives back those of the calls it refuses
// (GiveBack). Giving back, rather than asking the budget before taking the cooldown,
// keeps both exact across processes: the budget is counted once, at the call, and the
// store releases a cooldown only for the trigger that holds it, in one atomic step.

// Passes are the triggers of one batch that took a cooldown.
type Passes struct {
	mu   sync.Mutex
	held map[uint64]heldPass // by the trigger's stream sequence
}

type heldPass struct {
	store        windowstore.Cooldowns
	project, key string
}

type passesKey struct{}

// WithPasses returns ctx carrying a Passes for the batch, the one ctx has already if any
// (both processors of a pipeline share it).
func WithPasses(ctx context.Context) context.Context {
	if PassesFrom(ctx) != nil {
		return ctx
	}
	return context.WithValue(ctx, passesKey{}, &Passes{held: map[uint64]heldPass{}})
}

// PassesFrom returns the batch's Passes, or nil (whose methods do nothing).
func PassesFrom(ctx context.Context) *Passes {
	p, _ := ctx.Value(passesKey{}).(*Passes)
	return p
}

// Took notes that the trigger of stream sequence seq took key's cooldown in store.
func (p *Passes) Took(store windowstore.Cooldowns, project, key string, seq uint64) {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.held[seq] = heldPass{store: store, project: project, key: key}
	p.mu.Unlock()
}

// GiveBack releases the cooldowns the triggers of seqs took in ctx's batch (a call that
// is not made): each key cools no longer and its next call counts them as held back.
// Sequences that took none are ignored. An error means some could not be released
// (the store is away): the caller has the batch delivered again, and its triggers pass
// again as the calls that hold the cooldowns.
func GiveBack(ctx context.Context, seqs []uint64) error {
	p := PassesFrom(ctx)
	if p == nil {
		return nil
	}
	var errs []error
	for _, s := range seqs {
		p.mu.Lock()
		h, ok := p.held[s]
		p.mu.Unlock()
		if !ok {
			continue
		}
		if err := h.store.Release(ctx, h.project, h.key, s); err != nil {
			errs = append(errs, err)
			continue
		}
		p.mu.Lock()
		delete(p.held, s)
		p.mu.Unlock()
	}
	return errors.Join(errs...)
}
