package windowstore

import (
	"context"
	"sort"
	"sync"
	"time"
)

type memEntry struct {
	t   time.Time
	seq uint64
	rec []byte
}

type memGroup struct {
	entries []memEntry
	expires time.Time
}

// Memory is the in-process store of the embedded default.
type Memory struct {
	mu     sync.Mutex
	groups map[string]*memGroup
	stop   chan struct{}
	once   sync.Once
}

// NewMemory returns a store that also drops idle groups every sweep interval.
func NewMemory(sweep time.Duration) *Memory {
	m := &Memory{groups: map[string]*memGroup{}, stop: make(chan struct{})}
	go func() {
		t := time.NewTicker(sweep)
		defer t.Stop()
		for {
			select {
			case <-m.stop:
				return
			case now := <-t.C:
				m.sweep(now)
			}
		}
	}()
	return m
}

func (m *Memory) sweep(now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, g := range m.groups {
		if now.After(g.expires) {
			delete(m.groups, k)
		}
	}
}

// Add implements Store.
func (m *Memory) Add(_ context.Context, project, group string, seq uint64, rec []byte, t time.Time, ttl time.Duration) error {
	k := groupKey(project, group)
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.groups[k]
	if g == nil {
		g = &memGroup{}
		m.groups[k] = g
	}
	for _, e := range g.entries {
		if e.seq == seq {
			return nil // redelivered
		}
	}
	e := memEntry{t: t, seq: seq, rec: append([]byte(nil), rec...)}
	i := sort.Search(len(g.entries), func(i int) bool { return g.entries[i].t.After(t) })
	g.entries = append(g.entries, memEntry{})
	copy(g.entries[i+1:], g.entries[i:])
	g.entries[i] = e
	// Trim what has expired and what exceeds the cap.
	cut := sort.Search(len(g.entries), func(i int) bool { return !g.entries[i].t.Before(t.Add(-ttl)) })
	if n := len(g.entries) - cut; n > MaxPerGroup {
		cut = len(g.entries) - MaxPerGroup
	}
	g.entries = append(g.entries[:0], g.entries[cut:]...)
	if exp := t.Add(ttl); exp.After(g.expires) {
		g.expires = exp
	}
	return nil
}

// Window implements Store.
func (m *Memory) Window(_ context.Context, project, group string, since time.Time) ([][]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.groups[groupKey(project, group)]
	if g == nil {
		return nil, nil
	}
	var out [][]byte
	for _, e := range g.entries {
		if !e.t.Before(since) {
			out = append(out, e.rec)
		}
	}
	return out, nil
}

// Close stops the sweeper.
func (m *Memory) Close() error {
	m.once.Do(func() { close(m.stop) })
	return nil
}
