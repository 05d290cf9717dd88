package ingestreceiver

import (
	"context"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/otelcol-svc/otelcol-svc/internal/deliverylog"
)

// Agent results are counted in their project's ledger (deliverylog): results,
// and those under a request id never issued to the project (unmatched). The ledger is
// opened in the background on the NATS connection the projectauth extension lends (the
// configmirror extension's), so the receiver starts, and takes results, while NATS is
// away; what is counted before it opens is kept in memory (for at most maxEarlyProjects
// projects) and handed over then.

// maxEarlyProjects bounds the projects whose counts wait in memory for the ledger.
const maxEarlyProjects = 10000

const (
	ledgerOpenTimeout  = 5 * time.Second
	ledgerRetryInitial = 250 * time.Millisecond
	ledgerRetryMax     = 30 * time.Second
)

type resultCounts struct {
	mu     sync.Mutex
	ledger *deliverylog.Ledger
	early  map[string]deliverylog.Counters
	// lost counts results not counted: the ledger never opened and early was full.
	lost int64
}

// count adds one stored result of project.
func (c *resultCounts) count(project string, unmatched bool) {
	n := deliverylog.Counters{Results: 1}
	if unmatched {
		n.Unmatched = 1
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ledger != nil {
		c.ledger.Add(project, n)
		return
	}
	if c.early == nil {
		c.early = map[string]deliverylog.Counters{}
	}
	cur, ok := c.early[project]
	if !ok && len(c.early) >= maxEarlyProjects {
		c.lost++
		return
	}
	cur.Results += n.Results
	cur.Unmatched += n.Unmatched
	c.early[project] = cur
}

// opened hands the early counts to l, which counts from now on.
func (c *resultCounts) opened(l *deliverylog.Ledger) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for p, n := range c.early {
		l.Add(p, n)
	}
	c.early, c.ledger = nil, l
}

// close flushes the ledger, if it opened.
func (c *resultCounts) close(ctx context.Context) error {
	c.mu.Lock()
	l := c.ledger
	c.ledger = nil
	c.mu.Unlock()
	if l == nil {
		return nil
	}
	return l.Close(ctx)
}

// startLedger opens the ledger in the background, retrying while NATS is away.
func (r *ingestReceiver) startLedger(js jetstream.JetStream) {
	if js == nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.stopLedger = cancel
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		wait := ledgerRetryInitial
		for logged := false; ; logged = true {
			octx, cancel := context.WithTimeout(ctx, ledgerOpenTimeout)
			l, err := deliverylog.OpenLedger(octx, js, 0)
			cancel()
			if err == nil {
				r.results.opened(l)
				return
			}
			if !logged {
				r.settings.Logger.Debug("ledger not open yet: agent results are counted in memory until it is; retrying", zap.Error(err))
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			wait = min(2*wait, ledgerRetryMax)
		}
	}()
}
