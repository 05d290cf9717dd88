package deliverylog

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Counters of a project's ledger.
type Counters struct {
	Received     int64 `json:"received"`
	Dropped      int64 `json:"dropped"`
	AgentCalls   int64 `json:"agent_calls"`
	Results      int64 `json:"results"`
	Delivered    int64 `json:"delivered"`
	DeadLettered int64 `json:"dead_lettered"`
	Pending      int64 `json:"pending"`
	Unmatched    int64 `json:"unmatched"`
	Suppressed   int64 `json:"suppressed"`
}

func (c *Counters) add(o Counters) {
	c.Received += o.Received
	c.Dropped += o.Dropped
	c.AgentCalls += o.AgentCalls
	c.Results += o.Results
	c.Delivered += o.Delivered
	c.DeadLettered += o.DeadLettered
	c.Pending += o.Pending
	c.Unmatched += o.Unmatched
	c.Suppressed += o.Suppressed
}

// LedgerBucket holds one key per project.
const LedgerBucket = "svc-ledger"

// Ledger adds to counters in memory and flushes them once per interval with KV
// compare-and-set, so processes sharing a project add up exactly.
type Ledger struct {
	kv      jetstream.KeyValue
	mu      sync.Mutex
	pending map[string]Counters
	stop    chan struct{}
	done    chan struct{}
}

// OpenLedger creates the bucket if needed and starts the flush loop.
func OpenLedger(ctx context.Context, js jetstream.JetStream, interval time.Duration) (*Ledger, error) {
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: LedgerBucket, History: 1})
	if err != nil {
		return nil, err
	}
	if interval <= 0 {
		interval = time.Second
	}
	l := &Ledger{kv: kv, pending: map[string]Counters{}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				_ = l.Flush(context.Background())
			case <-l.stop:
				return
			}
		}
	}()
	return l, nil
}

// Add counts delta for project; it costs a map update under a mutex.
func (l *Ledger) Add(project string, delta Counters) {
	if !validToken(project) {
		return
	}
	l.mu.Lock()
	c := l.pending[project]
	c.add(delta)
	l.pending[project] = c
	l.mu.Unlock()
}

// Flush writes what was added since the last flush; what fails is kept for the next.
func (l *Ledger) Flush(ctx context.Context) error {
	l.mu.Lock()
	batch := l.pending
	l.pending = map[string]Counters{}
	l.mu.Unlock()
	var errs []error
	for p, delta := range batch {
		if err := l.apply(ctx, p, delta); err != nil {
			errs = append(errs, err)
			l.Add(p, delta)
		}
	}
	return errors.Join(errs...)
}

func (l *Ledger) apply(ctx context.Context, project string, delta Counters) error {
	for range 100 {
		var cur Counters
		e, err := l.kv.Get(ctx, project)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			cur.add(delta)
			b, _ := json.Marshal(cur)
			if _, err = l.kv.Create(ctx, project, b); err == nil {
				return nil
			}
		case err != nil:
			return err
		default:
			if err := json.Unmarshal(e.Value(), &cur); err != nil {
				return err
			}
			cur.add(delta)
			b, _ := json.Marshal(cur)
			if _, err = l.kv.Update(ctx, project, b, e.Revision()); err == nil {
				return nil
			}
		}
		if !errors.Is(err, jetstream.ErrKeyExists) && !isWrongSeq(err) {
			return err
		}
	}
	return errors.New("deliverylog: ledger update kept conflicting")
}

func isWrongSeq(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence
}

// Counts returns a project's flushed counters.
func (l *Ledger) Counts(ctx context.Context, project string) (Counters, error) {
	var c Counters
	if !validToken(project) {
		return c, ErrInvalidID
	}
	e, err := l.kv.Get(ctx, project)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return c, nil
	}
	if err != nil {
		return c, err
	}
	return c, json.Unmarshal(e.Value(), &c)
}

// Close flushes and stops.
func (l *Ledger) Close(ctx context.Context) error {
	close(l.stop)
	<-l.done
	return l.Flush(ctx)
}
