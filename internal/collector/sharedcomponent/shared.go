// Package shared lets the collector's per-signal factories (logs, traces, metrics) of one
// configured component share a single instance: one HTTP server, one NATS connection.
package sharedcomponent

import (
	"context"
	"sync"

	"go.opentelemetry.io/collector/component"
)

// Map holds one instance per configuration.
type Map[K comparable, V component.Component] struct {
	mu sync.Mutex
	m  map[K]*Component[V]
}

// Component is a shared instance that starts once and shuts down with its last user.
type Component[V component.Component] struct {
	Value V

	mu      sync.Mutex
	started bool
	users   int
	remove  func()
}

// LoadOrStore returns the instance for key, creating it with create on first use.
func (m *Map[K, V]) LoadOrStore(key K, create func() (V, error)) (*Component[V], error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c, ok := m.m[key]; ok {
		c.mu.Lock()
		c.users++
		c.mu.Unlock()
		return c, nil
	}
	v, err := create()
	if err != nil {
		return nil, err
	}
	if m.m == nil {
		m.m = map[K]*Component[V]{}
	}
	c := &Component[V]{Value: v, users: 1}
	c.remove = func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		delete(m.m, key)
	}
	m.m[key] = c
	return c, nil
}

// Start starts the instance the first time it is called.
func (c *Component[V]) Start(ctx context.Context, host component.Host) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started {
		return nil
	}
	c.started = true
	return c.Value.Start(ctx, host)
}

// Shutdown stops the instance when its last user shuts down.
func (c *Component[V]) Shutdown(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.users--
	if c.users > 0 {
		return nil
	}
	c.remove()
	if !c.started {
		return nil
	}
	c.started = false
	return c.Value.Shutdown(ctx)
}
