package usage

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
)

// Limits reads and writes the per-account limit overrides. The control plane's
// `accounts set-limit` uses Set; every Meter watches the bucket, so a change is in force
// on every receiver as soon as the watch delivers it (milliseconds).
type Limits struct {
	kv jetstream.KeyValue
}

// OpenLimits binds to (creating when missing) the limits bucket.
func OpenLimits(ctx context.Context, js jetstream.JetStream, replicas int) (*Limits, error) {
	kv, err := openLimitsBucket(ctx, js, replicas)
	if err != nil {
		return nil, err
	}
	return &Limits{kv: kv}, nil
}

// Set gives account its own monthly limit; 0 means unlimited, like SVC_FREE_TIER_EVENTS.
func (l *Limits) Set(ctx context.Context, account string, limit int64) error {
	if account == "" {
		return ErrNoAccount
	}
	if limit < 0 {
		return fmt.Errorf("limit must be 0 (unlimited) or more, got %d", limit)
	}
	if _, err := l.kv.Put(ctx, token(account), []byte(strconv.FormatInt(limit, 10))); err != nil {
		return fmt.Errorf("set limit of %s: %w", account, err)
	}
	return nil
}

// Delete returns account to the default limit.
func (l *Limits) Delete(ctx context.Context, account string) error {
	err := l.kv.Delete(ctx, token(account))
	if err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("delete limit of %s: %w", account, err)
	}
	return nil
}

// Get returns account's override, and whether it has one.
func (l *Limits) Get(ctx context.Context, account string) (int64, bool, error) {
	e, err := l.kv.Get(ctx, token(account))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	n, err := strconv.ParseInt(string(e.Value()), 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("limit of %s: %w", account, err)
	}
	return n, true, nil
}

// List returns every override, by account (for `accounts list`).
func (l *Limits) List(ctx context.Context) (map[string]int64, error) {
	out := map[string]int64{}
	lister, err := l.kv.ListKeys(ctx)
	if err != nil {
		return nil, err
	}
	defer lister.Stop() //nolint:errcheck
	var keys []string
	for k := range lister.Keys() {
		keys = append(keys, k)
	}
	for _, k := range keys {
		n, ok, err := l.Get(ctx, untoken(k))
		if err != nil {
			return nil, err
		}
		if ok {
			out[untoken(k)] = n
		}
	}
	return out, nil
}

// limitTable is a meter's in-memory copy of the overrides, kept current by a KV watch.
type limitTable struct {
	mu        sync.RWMutex
	def       int64
	overrides map[string]int64
	changed   func(account string)
}

// of returns account's limit; 0 means unlimited.
func (t *limitTable) of(account string) int64 {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if n, ok := t.overrides[account]; ok {
		return n
	}
	return t.def
}

// watch applies every change of the bucket until ctx ends; ready is closed once the
// bucket's current content is applied, so a meter never starts on the default alone.
func (t *limitTable) watch(ctx context.Context, kv jetstream.KeyValue, ready chan<- struct{}) error {
	w, err := kv.WatchAll(ctx)
	if err != nil {
		return err
	}
	go func() {
		defer w.Stop() //nolint:errcheck
		once := sync.OnceFunc(func() { close(ready) })
		defer once()
		for e := range w.Updates() {
			if e == nil {
				once()
				continue
			}
			account := untoken(e.Key())
			n, perr := strconv.ParseInt(string(e.Value()), 10, 64)
			t.mu.Lock()
			if e.Operation() != jetstream.KeyValuePut || perr != nil || n < 0 {
				delete(t.overrides, account)
			} else {
				t.overrides[account] = n
			}
			t.mu.Unlock()
			if t.changed != nil {
				t.changed(account)
			}
		}
	}()
	return nil
}
