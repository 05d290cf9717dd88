package windowstore

import (
	"container/heap"
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
	key     string     // in Memory.groups
	entries []memEntry // by time, then arrival
	// Records come in stream order nearly always, so the entries' sequences usually
	// rise along entries: a sequence above the last is new without any lookup, and one
	// at or below it (a redelivery) is found by binary search. inversions counts the
	// neighbours out of that order; while there are any, seqs indexes every entry's
	// sequence instead (built when the first appears, dropped with the last).
	inversions int
	seqs       map[uint64]struct{}
	expires    time.Time
	project    *memProject
}

// memProject is what one project's windows hold in all, against the per-project bound:
// their bytes and entries, and the order the entries came in, oldest first, so the
// oldest go first when the bound is passed, whichever group they are in. order may hold
// entries already gone (expired, cut by MaxPerGroup, their group dropped); they are
// skipped, and dropped when they outnumber the live ones.
type memProject struct {
	id          string
	bytes, live int
	order       []memRef
	head        int
	index       int // in Memory.largest; -1 when not there
}

// memRef names an entry by its group and sequence. A group that was dropped holds no
// entries any more, so its references read as gone.
type memRef struct {
	group *memGroup
	seq   uint64
}

// entryOverhead is what an entry costs besides its record's bytes: the entry, its place
// in the project's order, its seq in the group's index when it has one.
const entryOverhead = 96

// DefaultMaxProjectBytes is the in-memory windows' bound per project when none is set.
// Each group is held to MaxPerGroup records already, but a project may have any number
// of groups: 64 MiB holds a 50,000-record window of 1 KB records with room to spare.
const DefaultMaxProjectBytes = 64 << 20

// DefaultMaxBytes is the in-memory windows' bound for the whole process when none is
// set. The per-project bound alone does not hold a process: an account may own several
// projects (10 on the free tier), each at its own bound. 256 MiB is a quarter of the
// memory_limiter's 1024 MiB in embedded.yaml, which refuses ingest at 768 MiB (limit -
// spike) but frees nothing the windows hold: it leaves the rest for batches in flight,
// call bodies and the garbage collector's headroom, and still lets four projects sit at
// their full 64 MiB at once.
const DefaultMaxBytes = 256 << 20

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

// WithMaxBytes bounds the bytes all projects' windows hold in this process's memory
// (n <= 0: DefaultMaxBytes). Past it the entries evicted are the oldest of the project
// holding the most, until the process is back within it: the tenant that fills the
// memory loses context, not the small ones.
func WithMaxBytes(n int) MemoryOption {
	return func(m *Memory) {
		if n > 0 {
			m.maxBytes = n
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
	maxBytes        int
	total           int         // every project's bytes
	largest         projectHeap // the projects holding entries, the most bytes first
	logger          *zap.Logger
	evicted         atomic.Int64
	stop            chan struct{}
	once            sync.Once
}

// NewMemory returns a store that also drops idle groups every sweep interval.
func NewMemory(sweep time.Duration, opts ...MemoryOption) *Memory {
	m := &Memory{groups: map[string]*memGroup{}, projects: map[string]*memProject{}, cooldowns: map[string]*memCooldown{},
		maxProjectBytes: DefaultMaxProjectBytes, maxBytes: DefaultMaxBytes, logger: zap.NewNop(), stop: make(chan struct{})}
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

// Add implements Store. It keeps a copy of rec.
func (m *Memory) Add(ctx context.Context, project, group string, seq uint64, rec []byte, t time.Time, ttl time.Duration) error {
	return m.AddBatch(ctx, project, t, ttl, []Entry{{Group: group, Seq: seq, Rec: rec}})
}

// AddBatch implements Store: the entries under one lock, and the bounds applied once
// for all of them. It keeps an exact-size copy of each Rec it stores: a caller's Rec
// may be a slice of a larger buffer (a NATS message's, headers included), and keeping
// that would hold memory the project's and process's bounds never counted.
func (m *Memory) AddBatch(_ context.Context, project string, t time.Time, ttl time.Duration, entries []Entry) error {
	if len(entries) == 0 {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	pr := m.projects[project]
	if pr == nil {
		pr = &memProject{id: project, index: -1}
		m.projects[project] = pr
	}
	before := pr.bytes
	var g *memGroup
	for i := range entries {
		e := &entries[i]
		// A batch's entries mostly run in few groups: one lookup per run.
		if g == nil || e.Group != entries[i-1].Group {
			k := groupKey(project, e.Group)
			if g = m.groups[k]; g == nil {
				g = &memGroup{key: k}
				m.groups[k] = g
			}
			// A group left empty may outlive its project's tracker (forgotten when it
			// held nothing): it joins the current one.
			g.project = pr
		}
		if g.has(e.Seq) {
			continue // redelivered
		}
		pr.bytes += len(e.Rec) + entryOverhead
		pr.live++
		pr.order = append(pr.order, memRef{group: g, seq: e.Seq})
		g.insert(memEntry{t: t, seq: e.Seq, rec: exactCopy(e.Rec)})
		// Trim what has expired and what exceeds the cap.
		cut := 0
		if g.entries[0].t.Before(t.Add(-ttl)) {
			cut = sort.Search(len(g.entries), func(i int) bool { return !g.entries[i].t.Before(t.Add(-ttl)) })
		}
		if n := len(g.entries) - cut; n > MaxPerGroup {
			cut = len(g.entries) - MaxPerGroup
		}
		if cut > 0 {
			pr.bytes -= g.cut(cut)
			pr.live -= cut
		}
		if exp := t.Add(ttl); exp.After(g.expires) {
			g.expires = exp
		}
	}
	m.resized(pr, before)
	if pr.bytes > m.maxProjectBytes {
		n, freed := 0, 0
		for pr.bytes > m.maxProjectBytes {
			size, ok := m.evictOldest(pr)
			if !ok {
				break
			}
			n, freed = n+1, freed+size
		}
		m.evictedFrom(pr, n, freed, "the project's windows passed their memory bound (memory_max_project_bytes), oldest first",
			"max_project_bytes", m.maxProjectBytes)
	}
	if m.total > m.maxBytes {
		m.evictLargest()
	}
	pr.compact()
	return nil
}

// has reports whether the group holds an entry of sequence seq.
func (g *memGroup) has(seq uint64) bool {
	if g.seqs != nil {
		_, ok := g.seqs[seq]
		return ok
	}
	n := len(g.entries)
	if n == 0 || seq > g.entries[n-1].seq {
		return false // the usual case: the next record of the stream
	}
	return g.find(seq) >= 0
}

// find returns the index of the entry of sequence seq, or -1.
func (g *memGroup) find(seq uint64) int {
	if len(g.entries) > 0 && g.entries[0].seq == seq {
		return 0 // what eviction asks for: the group's oldest
	}
	if g.inversions == 0 {
		i := sort.Search(len(g.entries), func(i int) bool { return g.entries[i].seq >= seq })
		if i < len(g.entries) && g.entries[i].seq == seq {
			return i
		}
		return -1
	}
	if _, ok := g.seqs[seq]; !ok {
		return -1
	}
	for i := range g.entries {
		if g.entries[i].seq == seq {
			return i
		}
	}
	return -1
}

// inverted counts the pair at i and i+1 when both exist and are out of sequence order.
func (g *memGroup) inverted(i int) int {
	if i < 0 || i+1 >= len(g.entries) || g.entries[i].seq < g.entries[i+1].seq {
		return 0
	}
	return 1
}

// settle builds the sequence index when the entries left sequence order, and drops it
// when they are back in it.
func (g *memGroup) settle() {
	switch {
	case g.inversions > 0 && g.seqs == nil:
		g.seqs = make(map[uint64]struct{}, len(g.entries))
		for _, e := range g.entries {
			g.seqs[e.seq] = struct{}{}
		}
	case g.inversions == 0 && g.seqs != nil:
		g.seqs = nil
	}
}

// insert adds e in time order, after the entries of the same time.
func (g *memGroup) insert(e memEntry) {
	i := len(g.entries)
	// Records come in time order nearly always: append without a search then.
	if i > 0 && g.entries[i-1].t.After(e.t) {
		i = sort.Search(len(g.entries), func(i int) bool { return g.entries[i].t.After(e.t) })
	}
	g.inversions -= g.inverted(i - 1)
	g.entries = append(g.entries, memEntry{})
	copy(g.entries[i+1:], g.entries[i:])
	g.entries[i] = e
	g.inversions += g.inverted(i-1) + g.inverted(i)
	if g.seqs != nil {
		g.seqs[e.seq] = struct{}{}
	}
	g.settle()
}

// cut drops the group's oldest n entries and returns their size. Reslicing rather than
// copying keeps a trim at the cap cheap; append's next reallocation frees the head.
func (g *memGroup) cut(n int) (size int) {
	for j := 0; j < n; j++ {
		g.inversions -= g.inverted(j)
		if g.seqs != nil {
			delete(g.seqs, g.entries[j].seq)
		}
		size += len(g.entries[j].rec) + entryOverhead
		g.entries[j] = memEntry{}
	}
	g.entries = g.entries[n:]
	g.settle()
	return size
}

// remove drops the entry at i and returns its size.
func (g *memGroup) remove(i int) int {
	if i == 0 {
		return g.cut(1)
	}
	size := len(g.entries[i].rec) + entryOverhead
	g.inversions -= g.inverted(i-1) + g.inverted(i)
	if g.seqs != nil {
		delete(g.seqs, g.entries[i].seq)
	}
	copy(g.entries[i:], g.entries[i+1:])
	g.entries[len(g.entries)-1] = memEntry{}
	g.entries = g.entries[:len(g.entries)-1]
	g.inversions += g.inverted(i - 1)
	g.settle()
	return size
}

// evictLargest evicts the oldest entries of whichever project holds the most, one at a
// time, until the process is back within its bound: the project that filled the memory
// gives back first, and a small project loses nothing while a larger one holds more.
func (m *Memory) evictLargest() {
	type tally struct{ n, freed int }
	var from map[*memProject]*tally
	for m.total > m.maxBytes && len(m.largest) > 0 {
		pr := m.largest[0]
		size, ok := m.evictOldest(pr)
		if !ok {
			// Its order names no live entry although it counts bytes: it cannot give
			// any back, so it stops being a candidate rather than stall every Add.
			heap.Remove(&m.largest, pr.index)
			continue
		}
		if from == nil {
			from = map[*memProject]*tally{}
		}
		t := from[pr]
		if t == nil {
			t = &tally{}
			from[pr] = t
		}
		t.n, t.freed = t.n+1, t.freed+size
	}
	for pr, t := range from {
		m.evictedFrom(pr, t.n, t.freed, "the process's windows passed their memory bound (memory_max_bytes): the project holding the most loses its oldest first",
			"max_bytes", m.maxBytes)
		pr.compact()
	}
}

func (m *Memory) evictedFrom(pr *memProject, n, freed int, why, bound string, max int) {
	if n == 0 {
		return
	}
	m.evicted.Add(int64(n))
	if ce := m.logger.Check(zap.DebugLevel, "window entries evicted: "+why); ce != nil {
		ce.Write(zap.String("project_id", pr.id), zap.Int("entries", n), zap.Int("bytes", freed), zap.Int(bound, max))
	}
}

// evictOldest drops the project's oldest live entry and says its size; false when the
// project holds none.
func (m *Memory) evictOldest(pr *memProject) (int, bool) {
	for pr.head < len(pr.order) {
		ref := pr.order[pr.head]
		pr.order[pr.head] = memRef{}
		pr.head++
		g := ref.group
		// Usually the group's first entry, the oldest; a record stored with an older
		// time after it is found further on.
		i := g.find(ref.seq)
		if i < 0 {
			continue // gone already
		}
		size := g.remove(i)
		before := pr.bytes
		pr.bytes -= size
		pr.live--
		m.resized(pr, before)
		if len(g.entries) == 0 && m.groups[g.key] == g {
			delete(m.groups, g.key)
		}
		return size, true
	}
	return 0, false
}

// resized accounts a change of the project's bytes from before: the process's total,
// and the project's place among the largest (it leaves them when it holds nothing).
func (m *Memory) resized(pr *memProject, before int) {
	m.total += pr.bytes - before
	switch {
	case pr.bytes <= 0 && pr.index >= 0:
		heap.Remove(&m.largest, pr.index)
	case pr.bytes > 0 && pr.index < 0:
		heap.Push(&m.largest, pr)
	case pr.bytes > 0 && pr.bytes != before:
		heap.Fix(&m.largest, pr.index)
	}
}

// projectHeap orders projects by the bytes they hold, the most first.
type projectHeap []*memProject

func (h projectHeap) Len() int           { return len(h) }
func (h projectHeap) Less(i, j int) bool { return h[i].bytes > h[j].bytes }
func (h projectHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *projectHeap) Push(x any) {
	pr := x.(*memProject)
	pr.index = len(*h)
	*h = append(*h, pr)
}
func (h *projectHeap) Pop() any {
	old := *h
	pr := old[len(old)-1]
	old[len(old)-1] = nil
	pr.index = -1
	*h = old[:len(old)-1]
	return pr
}

// compact drops the project's order's consumed head and, when they outnumber the live
// entries, the references to entries gone already, so the order stays within a small
// multiple of what the project holds.
func (pr *memProject) compact() {
	if pr.head > 1024 && pr.head > len(pr.order)/2 {
		pr.order = append([]memRef(nil), pr.order[pr.head:]...)
		pr.head = 0
	}
	if len(pr.order)-pr.head <= 2*pr.live+1024 {
		return
	}
	kept := make([]memRef, 0, pr.live)
	for _, ref := range pr.order[pr.head:] {
		if ref.group.has(ref.seq) {
			kept = append(kept, ref)
		}
	}
	pr.order, pr.head = kept, 0
}

// dropGroup forgets an expired group, and its project when it held nothing else. The
// group is emptied: the project's order may still name it.
func (m *Memory) dropGroup(k string, g *memGroup) {
	delete(m.groups, k)
	pr := g.project
	before := pr.bytes
	for _, e := range g.entries {
		pr.bytes -= len(e.rec) + entryOverhead
		pr.live--
	}
	g.entries, g.seqs, g.inversions = nil, nil, 0
	m.resized(pr, before)
	if pr.live <= 0 {
		if m.projects[pr.id] == pr {
			delete(m.projects, pr.id)
		}
	} else {
		pr.compact()
	}
}

// exactCopy is rec in memory of its own, with no spare capacity (append would round
// the capacity up).
func exactCopy(rec []byte) []byte {
	c := make([]byte, len(rec))
	copy(c, rec)
	return c
}

// Evicted is how many entries the bounds (per project and per process) have evicted
// since the store began.
func (m *Memory) Evicted() int64 { return m.evicted.Load() }

// TotalBytes is what every project's windows hold, as the process's bound counts it.
func (m *Memory) TotalBytes() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.total
}

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
func (m *Memory) Window(ctx context.Context, project, group string, since time.Time, max int) ([][]byte, int, error) {
	return m.WindowBefore(ctx, project, group, since, time.Time{}, max)
}

// WindowBefore implements Store; a zero until is no bound.
func (m *Memory) WindowBefore(_ context.Context, project, group string, since, until time.Time, max int) ([][]byte, int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.groups[groupKey(project, group)]
	if g == nil {
		return nil, 0, nil
	}
	from := sort.Search(len(g.entries), func(i int) bool { return !g.entries[i].t.Before(since) })
	to := len(g.entries)
	if !until.IsZero() {
		to = sort.Search(len(g.entries), func(i int) bool { return !g.entries[i].t.Before(until) })
	}
	if to < from {
		to = from
	}
	total := to - from
	if total > max {
		from = to - max
	}
	out := make([][]byte, 0, to-from)
	for _, e := range g.entries[from:to] {
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
