// Package mirrorcache is the data plane's side of the configuration mirror
// (internal/mirror): an in-memory copy kept current by KV watches, owned by the
// configmirror extension and found by other components through the collector's host.
// It is apart from internal/mirror so that the control plane, which writes the
// mirror, links no collector code.
package mirrorcache

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/collector/component"
	"go.uber.org/zap"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/natsclient"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
)

// Change tells a subscriber which entry changed. Deleted is true when it was removed.
type Change struct {
	Bucket  string
	Key     string
	Deleted bool
}

// Cache is the data plane's in-memory copy of the mirror, kept current by KV watches.
// Lookups never touch the network.
type Cache struct {
	logger *zap.Logger

	mu       sync.RWMutex
	keys     map[string]mirror.KeyEntry
	projects map[string]mirror.Project
	sources  map[string]mirror.Source
	// consoleKeys verify console tokens (mirror.BucketSettings, mirror.KeyConsoleTokenKeys).
	consoleKeys []ed25519.PublicKey
	// revoked maps a revoked credential's id to when it was revoked
	// (mirror.BucketRevocations); prunedAt is when entries past mirror.RevocationTTL,
	// which NATS expires without telling watchers, were last dropped.
	revoked  map[string]time.Time
	prunedAt time.Time

	ready atomic.Bool

	subMu sync.Mutex
	subs  map[int]func(Change)
	next  int
}

// NewCache returns an empty cache; Run fills it.
func NewCache(logger *zap.Logger) *Cache {
	return &Cache{
		logger:   logger,
		keys:     map[string]mirror.KeyEntry{},
		projects: map[string]mirror.Project{},
		sources:  map[string]mirror.Source{},
		revoked:  map[string]time.Time{},
		subs:     map[int]func(Change){},
	}
}

// Ready reports whether the initial contents of every bucket have been loaded. Until then
// an unknown key may just not be loaded yet, so callers answer 503, not 401.
func (c *Cache) Ready() bool { return c.ready.Load() }

// Key resolves a key hash.
func (c *Cache) Key(hash string) (mirror.KeyEntry, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	e, ok := c.keys[hash]
	return e, ok
}

// Project returns a project's configuration.
func (c *Cache) Project(id string) (mirror.Project, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	p, ok := c.projects[id]
	return p, ok
}

// Projects returns every project's configuration.
func (c *Cache) Projects() []mirror.Project {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]mirror.Project, 0, len(c.projects))
	for _, p := range c.projects {
		out = append(out, p)
	}
	return out
}

// Source returns the push source of an ingest key.
func (c *Cache) Source(ingestKey string) (mirror.Source, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	s, ok := c.sources[ingestKey]
	return s, ok
}

// ConsoleKeys returns the public keys that verify console tokens; none until the control
// plane has published them. The slice must not be modified.
func (c *Cache) ConsoleKeys() []ed25519.PublicKey {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.consoleKeys
}

// Revoked reports whether a credential (the id a console token names as its minter) has
// been revoked.
func (c *Cache) Revoked(credentialID string) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	_, ok := c.revoked[credentialID]
	return ok
}

// Subscribe calls fn after each change is applied (from the watching goroutine; fn must
// not block). The returned func unsubscribes.
func (c *Cache) Subscribe(fn func(Change)) func() {
	c.subMu.Lock()
	defer c.subMu.Unlock()
	id := c.next
	c.next++
	c.subs[id] = fn
	return func() {
		c.subMu.Lock()
		defer c.subMu.Unlock()
		delete(c.subs, id)
	}
}

func (c *Cache) notify(ch Change) {
	c.subMu.Lock()
	fns := make([]func(Change), 0, len(c.subs))
	for _, fn := range c.subs {
		fns = append(fns, fn)
	}
	c.subMu.Unlock()
	for _, fn := range fns {
		fn(ch)
	}
}

// Run keeps the cache current until ctx ends. It survives NATS being down at start or
// going away later: it retries opening the buckets and the watches with backoff.
func (c *Cache) Run(ctx context.Context, js jetstream.JetStream) {
	// Jittered, so the many data-plane processes that lost the same NATS do not come back
	// to it in step.
	b := &backoff.ExponentialBackOff{InitialInterval: 100 * time.Millisecond, RandomizationFactor: 0.2,
		Multiplier: 2, MaxInterval: 5 * time.Second}
	b.Reset()
	for ctx.Err() == nil {
		err := c.watch(ctx, js)
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, errReconnected) {
			c.logger.Debug("NATS connection back; configuration mirror watched again")
			b.Reset()
			continue
		}
		wait := b.NextBackOff()
		// Early failures are normal at start (the embedded NATS may start after us).
		log := c.logger.Debug
		if wait >= 2*time.Second {
			log = c.logger.Warn
		}
		log("configuration mirror unavailable; retrying", zap.Error(err), zap.Duration("in", wait))
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// errReconnected ends a watch when its NATS connection is back after losing its server.
// A server that restarted has lost the watches' consumers, and the client notices only
// when their heartbeats have been missing for a while (18 s measured): until then no
// change reached the cache, so a key deleted or a credential revoked right after the
// restart (the control plane publishes as soon as NATS is back) stayed in force. Watching
// again replays every bucket's current values at once.
var errReconnected = errors.New("NATS connection re-established")

func (c *Cache) watch(ctx context.Context, js jetstream.JetStream) error {
	store, err := mirror.Open(ctx, js, 1)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if nc := js.Conn(); nc != nil {
		defer natsclient.OnReconnect(nc, func() { cancel(errReconnected) })()
	}
	type watched struct {
		name string
		w    jetstream.KeyWatcher
	}
	var ws []watched
	for _, kv := range store.Watched() {
		w, err := kv.WatchAll(wctx)
		if err != nil {
			return err
		}
		defer func() { _ = w.Stop() }()
		ws = append(ws, watched{kv.Bucket(), w})
	}
	// Each watcher first replays current values and then sends nil; the cache is ready
	// when all of them have done so.
	errc := make(chan error, len(ws))
	var loaded sync.WaitGroup
	loaded.Add(len(ws))
	for _, w := range ws {
		go func() {
			initial := true
			for e := range w.w.Updates() {
				if e == nil {
					if initial {
						initial = false
						loaded.Done()
					}
					continue
				}
				c.apply(w.name, e)
			}
			if initial {
				loaded.Done()
			}
			errc <- errors.New("watch of bucket " + w.name + " closed")
		}()
	}
	go func() {
		loaded.Wait()
		if ctx.Err() == nil && !c.ready.Swap(true) {
			c.logger.Info("configuration mirror loaded")
		}
	}()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-wctx.Done():
		return context.Cause(wctx)
	case err := <-errc:
		return err
	}
}

func (c *Cache) apply(bucket string, e jetstream.KeyValueEntry) {
	key := e.Key()
	deleted := e.Operation() != jetstream.KeyValuePut
	c.mu.Lock()
	switch bucket {
	case mirror.BucketKeys:
		deleted = decodeInto(c.keys, key, e.Value(), deleted, c.logger, bucket)
	case mirror.BucketProjects:
		deleted = decodeInto(c.projects, key, e.Value(), deleted, c.logger, bucket)
		if p, ok := c.projects[key]; ok && !deleted {
			p.SetStoredAt(e.Created())
			c.projects[key] = p
		}
	case mirror.BucketSources:
		deleted = decodeInto(c.sources, key, e.Value(), deleted, c.logger, bucket)
	case mirror.BucketSettings:
		deleted = c.applySetting(key, e.Value(), deleted)
	case mirror.BucketRevocations:
		c.applyRevocation(key, e.Created(), deleted)
	}
	c.mu.Unlock()
	c.notify(Change{Bucket: bucket, Key: key, Deleted: deleted})
}

// applyRevocation records a revoked credential (c.mu held). Any value counts: a
// revocation that cannot be decoded must not let the credential's tokens back in.
func (c *Cache) applyRevocation(key string, stored time.Time, deleted bool) {
	if deleted {
		delete(c.revoked, key)
		return
	}
	c.revoked[key] = stored
	if now := time.Now(); now.Sub(c.prunedAt) >= time.Minute {
		c.prunedAt = now
		for k, at := range c.revoked {
			if now.Sub(at) > mirror.RevocationTTL {
				delete(c.revoked, k)
			}
		}
	}
}

// applySetting applies one entry of mirror.BucketSettings (c.mu held). Unknown entries are
// ignored: a newer control plane may publish settings this process does not know.
func (c *Cache) applySetting(key string, value []byte, deleted bool) bool {
	if key != mirror.KeyConsoleTokenKeys {
		return deleted
	}
	c.consoleKeys = nil
	if deleted {
		return true
	}
	var ck mirror.ConsoleKeys
	if err := json.Unmarshal(value, &ck); err != nil {
		c.logger.Error("undecodable configuration mirror entry ignored", zap.String("bucket", mirror.BucketSettings), zap.String("key", key), zap.Error(err))
		return true
	}
	keys := make([]ed25519.PublicKey, 0, len(ck.PublicKeys))
	for i, s := range ck.PublicKeys {
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil || len(b) != ed25519.PublicKeySize {
			c.logger.Error("console token key ignored: not a base64 Ed25519 public key", zap.Int("index", i))
			continue
		}
		keys = append(keys, ed25519.PublicKey(b))
	}
	c.consoleKeys = keys
	return false
}

// decodeInto applies one entry to m. An undecodable value removes the entry: a key or
// project that cannot be read must not keep its previous, possibly revoked, meaning.
func decodeInto[T any](m map[string]T, key string, value []byte, deleted bool, logger *zap.Logger, bucket string) bool {
	if deleted {
		delete(m, key)
		return true
	}
	var v T
	if err := json.Unmarshal(value, &v); err != nil {
		logger.Error("undecodable configuration mirror entry ignored", zap.String("bucket", bucket), zap.String("key", key), zap.Error(err))
		delete(m, key)
		return true
	}
	m[key] = v
	return false
}

// Provider is implemented by the extension that owns the cache (configmirror), so other
// data-plane components read project configuration from the one copy in the process.
type Provider interface {
	MirrorCache() *Cache
}

// DefaultExtension is the configmirror extension of our configs, the default of the
// `mirror` setting of the components that read the cache.
var DefaultExtension = component.MustNewID("configmirror")

// legacyOwner is the extension that held the mirror before configmirror did. It still
// lends its cache to the ingest receiver's console, so FromHost would find one there:
// an old config naming it is refused instead, with the way to the new form.
var legacyOwner = component.MustNewType("projectauth")

// ErrLegacyMirror is the refusal of a `mirror` setting that names projectauth.
var ErrLegacyMirror = errors.New("projectauth no longer holds the configuration mirror: add the configmirror extension and set mirror: configmirror")

// CheckExtension validates a component's `mirror` setting.
func CheckExtension(id component.ID) error {
	switch id.Type() {
	case component.Type{}:
		return errors.New("mirror must name the configmirror extension that holds the configuration mirror, e.g. configmirror")
	case legacyOwner:
		return ErrLegacyMirror
	}
	return nil
}

// CheckConnection validates the `nats` and `mirror` settings of a component that has a
// NATS connection of its own and reads the mirror (agent and sink exporters, jetstream
// receiver), as the first errors of its Validate.
func CheckConnection(n natsclient.Config, mirror component.ID) []error {
	var errs []error
	if err := n.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("nats: %w", err))
	}
	if err := CheckExtension(mirror); err != nil {
		errs = append(errs, err)
	}
	return errs
}

// FromHost returns the cache of the extension id, a component's `mirror` setting. The
// extension is named rather than found among the host's extensions, so that a second
// one is never picked by accident.
func FromHost(host interface {
	GetExtensions() map[component.ID]component.Component
}, id component.ID) (*Cache, error) {
	if id.Type() == legacyOwner {
		return nil, ErrLegacyMirror
	}
	exts := host.GetExtensions()
	ext, ok := exts[id]
	if !ok {
		for other := range exts {
			if other.Type() == legacyOwner {
				// A config written for the projectauth extension that held the mirror,
				// relying on the `mirror` default.
				return nil, fmt.Errorf("no %s extension is running: %w", id, ErrLegacyMirror)
			}
		}
		return nil, fmt.Errorf("no %s extension is running: add it under `extensions:` and `service.extensions`, or set `mirror` to the configmirror extension you run", id)
	}
	p, ok := ext.(Provider)
	if !ok {
		return nil, fmt.Errorf("the extension %s holds no configuration mirror: `mirror` must name a configmirror extension", id)
	}
	return p.MirrorCache(), nil
}
