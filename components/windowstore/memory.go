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
	entries []memEntry // by time, then arrival
	seqs    map[uint64]struct{}
	expires time.Time
}

// memCooldown is one dedup key's state: the call that holds the cooldown (seq, and the
// count it took) until until, and the triggers held back since.
type memCooldown struct {
	until      time.Time
	seq        uint64
	taken      int64
	suppressed int64
	expires    time.Time // when the entry may be forgotten
}

// Memory is the in-process store of the embedded default.
type Memory struct {
	mu        sync.Mutex
	groups    map[string]*memGroup
	cooldowns map[string]*memCooldown
	stop      chan struct{}
	once      sync.Once
}

// NewMemory returns a store that also drops idle groups every sweep interval.
func NewMemory(sweep time.Duration) *Memory {
	m := &Memory{groups: map[string]*memGroup{}, cooldowns: map[string]*memCooldown{}, stop: make(chan struct{})}
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
	for k, c := range m.cooldowns {
		if now.After(c.expires) && now.After(c.until) {
			delete(m.cooldowns, k)
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
		g = &memGroup{seqs: map[uint64]struct{}{}}
		m.groups[k] = g
	}
	if _, dup := g.seqs[seq]; dup {
		return nil // redelivered
	}
	g.seqs[seq] = struct{}{}
	e := memEntry{t: t, seq: seq, rec: append([]byte(nil), rec...)}
	i := sort.Search(len(g.entries), func(i int) bool { return g.entries[i].t.After(t) })
	g.entries = append(g.entries, memEntry{})
	copy(g.entries[i+1:], g.entries[i:])
	g.entries[i] = e
	// Trim what has expired and what exceeds the cap. Reslicing rather than copying
	// keeps an add at the cap cheap; append's next reallocation frees the dropped head.
	cut := sort.Search(len(g.entries), func(i int) bool { return !g.entries[i].t.Before(t.Add(-ttl)) })
	if n := len(g.entries) - cut; n > MaxPerGroup {
		cut = len(g.entries) - MaxPerGroup
	}
	for j := 0; j < cut; j++ {
		delete(g.seqs, g.entries[j].seq)
		g.entries[j] = memEntry{}
	}
	g.entries = g.entries[cut:]
	if exp := t.Add(ttl); exp.After(g.expires) {
		g.expires = exp
	}
	return nil
}

// Window implements Store.
func (m *Memory) Window(_ context.Context, project, group string, since time.Time, max int) ([][]byte, int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.groups[groupKey(project, group)]
	if g == nil {
		return nil, 0, nil
	}
	from := sort.Search(len(g.entries), func(i int) bool { return !g.entries[i].t.Before(since) })
	total := len(g.entries) - from
	if total > max {
		from = len(g.entries) - max
	}
	out := make([][]byte, 0, len(g.entries)-from)
	for _, e := range g.entries[from:] {
		out = append(out, e.rec)
	}
	return out, total, nil
}

// Pass implements Cooldowns.
func (m *Memory) Pass(_ context.Context, project, key string, seq uint64, cooldown time.Duration) (bool, int64, error) {
	k, _ := cooldownKeys(project, key)
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.cooldowns[k]
	if c != nil && now.Before(c.until) {
		if c.seq == seq {
			return true, c.taken, nil
		}
		c.suppressed++
		c.expires = now.Add(cooldown + SuppressedTTL)
		return false, 0, nil
	}
	var n int64
	if c != nil && now.Before(c.expires) {
		n = c.suppressed
	}
	m.cooldowns[k] = &memCooldown{until: now.Add(cooldown), seq: seq, taken: n, expires: now.Add(cooldown + SuppressedTTL)}
	return true, n, nil
}

// Release implements Cooldowns.
func (m *Memory) Release(_ context.Context, project, key string, seq uint64) error {
	k, _ := cooldownKeys(project, key)
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.cooldowns[k]
	if c == nil || c.seq != seq || !now.Before(c.until) {
		return nil
	}
	c.suppressed += c.taken + 1
	c.until, c.seq, c.taken = time.Time{}, 0, 0
	c.expires = now.Add(SuppressedTTL)
	return nil
}

// Cooling implements Cooldowns.
func (m *Memory) Cooling(_ context.Context, project, key string) (bool, error) {
	k, _ := cooldownKeys(project, key)
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.cooldowns[k]
	return c != nil && time.Now().Before(c.until), nil
}

// Close stops the sweeper.
func (m *Memory) Close() error {
	m.once.Do(func() { close(m.stop) })
	return nil
}
