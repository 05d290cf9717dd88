package windowstore

import (
	"context"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
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
	project *memProject
}

// memProject is what one project's windows hold in all, against the per-project bound:
// their bytes and entries, and the order the entries came in, oldest first, so the
// oldest go first when the bound is passed, whichever group they are in. order may hold
// entries already gone (expired, cut by MaxPerGroup); they are skipped, and dropped
// when they outnumber the live ones.
type memProject struct {
	id          string
	bytes, live int
	order       []memRef
	head        int
}

type memRef struct {
	group string
	seq   uint64
}

// entryOverhead is what an entry costs besides its record's bytes: the entry, its seq
// in the group's set, its place in the project's order.
const entryOverhead = 96

// DefaultMaxProjectBytes is the in-memory windows' bound per project when none is set.
// Each group is held to MaxPerGroup records already, but a project may have any number
// of groups: 64 MiB holds a 50,000-record window of 1 KB records with room to spare.
const DefaultMaxProjectBytes = 64 << 20

// MemoryOption configures NewMemory.
type MemoryOption func(*Memory)

// WithMaxProjectBytes bounds the bytes one project's windows hold in memory (n <= 0:
// DefaultMaxProjectBytes). Past it the project's oldest entries are evicted, whatever
// their group: a window is context, and the oldest context is the least worth keeping.
func WithMaxProjectBytes(n int) MemoryOption {
	return func(m *Memory) {
		if n > 0 {
			m.maxProjectBytes = n
		}
	}
}

// WithLogger has the store log its evictions at debug.
func WithLogger(l *zap.Logger) MemoryOption {
	return func(m *Memory) { m.logger = l }
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
	mu              sync.Mutex
	groups          map[string]*memGroup
	projects        map[string]*memProject
	cooldowns       map[string]*memCooldown
	maxProjectBytes int
	logger          *zap.Logger
	evicted         atomic.Int64
	stop            chan struct{}
	once            sync.Once
}

// NewMemory returns a store that also drops idle groups every sweep interval.
func NewMemory(sweep time.Duration, opts ...MemoryOption) *Memory {
	m := &Memory{groups: map[string]*memGroup{}, projects: map[string]*memProject{}, cooldowns: map[string]*memCooldown{},
		maxProjectBytes: DefaultMaxProjectBytes, logger: zap.NewNop(), stop: make(chan struct{})}
	for _, o := range opts {
		o(m)
	}
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
			m.dropGroup(k, g)
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
	pr := m.projects[project]
	if pr == nil {
		pr = &memProject{id: project}
		m.projects[project] = pr
	}
	g := m.groups[k]
	if g == nil {
		g = &memGroup{seqs: map[uint64]struct{}{}}
		m.groups[k] = g
	}
	// A group left empty may outlive its project's tracker (forgotten when it held
	// nothing): it joins the current one.
	g.project = pr
	if _, dup := g.seqs[seq]; dup {
		return nil // redelivered
	}
	g.seqs[seq] = struct{}{}
	pr.bytes += len(rec) + entryOverhead
	pr.live++
	pr.order = append(pr.order, memRef{group: k, seq: seq})
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
		pr.bytes -= len(g.entries[j].rec) + entryOverhead
		pr.live--
		g.entries[j] = memEntry{}
	}
	g.entries = g.entries[cut:]
	if exp := t.Add(ttl); exp.After(g.expires) {
		g.expires = exp
	}
	if pr.bytes > m.maxProjectBytes {
		m.evict(project, pr)
	}
	pr.compact(m.groups)
	return nil
}

// evict drops the project's oldest entries until it is back within its bound.
func (m *Memory) evict(project string, pr *memProject) {
	n, freed := 0, 0
	for pr.bytes > m.maxProjectBytes && pr.head < len(pr.order) {
		ref := pr.order[pr.head]
		pr.order[pr.head] = memRef{}
		pr.head++
		g := m.groups[ref.group]
		if g == nil {
			continue
		}
		if _, ok := g.seqs[ref.seq]; !ok {
			continue // gone already
		}
		// Usually the group's first entry, the oldest; a record stored with an older
		// time after it is found further on.
		i := 0
		for i < len(g.entries) && g.entries[i].seq != ref.seq {
			i++
		}
		if i == len(g.entries) {
			continue
		}
		size := len(g.entries[i].rec) + entryOverhead
		delete(g.seqs, ref.seq)
		if i == 0 {
			g.entries[0] = memEntry{}
			g.entries = g.entries[1:]
		} else {
			g.entries = append(g.entries[:i], g.entries[i+1:]...)
		}
		pr.bytes -= size
		pr.live--
		n++
		freed += size
		if len(g.entries) == 0 {
			delete(m.groups, ref.group)
		}
	}
	if n > 0 {
		m.evicted.Add(int64(n))
		m.logger.Debug("window entries evicted: the project's windows passed their memory bound, oldest first",
			zap.String("project_id", project), zap.Int("entries", n), zap.Int("bytes", freed), zap.Int("max_project_bytes", m.maxProjectBytes))
	}
}

// compact drops the project's order's consumed head and, when they outnumber the live
// entries, the references to entries gone already, so the order stays within a small
// multiple of what the project holds.
func (pr *memProject) compact(groups map[string]*memGroup) {
	if pr.head > 1024 && pr.head > len(pr.order)/2 {
		pr.order = append([]memRef(nil), pr.order[pr.head:]...)
		pr.head = 0
	}
	if len(pr.order)-pr.head <= 2*pr.live+1024 {
		return
	}
	kept := make([]memRef, 0, pr.live)
	for _, ref := range pr.order[pr.head:] {
		if g := groups[ref.group]; g != nil {
			if _, ok := g.seqs[ref.seq]; ok {
				kept = append(kept, ref)
			}
		}
	}
	pr.order, pr.head = kept, 0
}

// dropGroup forgets an expired group, and its project when it held nothing else.
func (m *Memory) dropGroup(k string, g *memGroup) {
	delete(m.groups, k)
	pr := g.project
	for _, e := range g.entries {
		pr.bytes -= len(e.rec) + entryOverhead
		pr.live--
	}
	if pr.live <= 0 {
		if m.projects[pr.id] == pr {
			delete(m.projects, pr.id)
		}
	} else {
		pr.compact(m.groups)
	}
}

// Evicted is how many entries the per-project bound has evicted since the store began.
func (m *Memory) Evicted() int64 { return m.evicted.Load() }

// ProjectBytes is what a project's windows hold, as the bound counts it.
func (m *Memory) ProjectBytes(project string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if pr := m.projects[project]; pr != nil {
		return pr.bytes
	}
	return 0
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
