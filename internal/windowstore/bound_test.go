package windowstore

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// Each group was bounded (MaxPerGroup) but a project was not, so a free
// tenant could hold any number of groups of 1 MB records in a shared process. A
// project's windows are now held to a byte bound, evicting its oldest entries first,
// whatever their group; another project's windows are untouched.
func TestMemoryHoldsEachProjectToItsBoundOldestFirst(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	m := NewMemory(time.Minute, WithMaxProjectBytes(100_000), WithLogger(zap.New(core)))
	t.Cleanup(func() { _ = m.Close() })
	ctx := context.Background()
	ttl := time.Hour
	t0 := time.Now()
	rec := func(i int) []byte { return []byte(fmt.Sprintf(`{"n":%d,"pad":"%s"}`, i, strings.Repeat("x", 1000))) }

	require.NoError(t, m.Add(ctx, "quiet", "g", 1, rec(0), t0, ttl))
	// 500 groups of one 1 KB record each: five times the bound.
	for i := range 500 {
		require.NoError(t, m.Add(ctx, "noisy", fmt.Sprintf("trace-%d", i), uint64(i+1), rec(i), t0.Add(time.Duration(i)*time.Millisecond), ttl))
		require.LessOrEqual(t, m.ProjectBytes("noisy"), 100_000, "after record %d", i)
	}
	// The newest groups are whole, the oldest gone.
	got, total, err := m.Window(ctx, "noisy", "trace-499", t0, 10)
	require.NoError(t, err)
	assert.Equal(t, 1, total)
	assert.Equal(t, string(rec(499)), string(got[0]))
	_, total, err = m.Window(ctx, "noisy", "trace-0", t0, 10)
	require.NoError(t, err)
	assert.Zero(t, total, "the oldest context went first")
	kept := 0
	for i := range 500 {
		if _, n, _ := m.Window(ctx, "noisy", fmt.Sprintf("trace-%d", i), t0, 10); n > 0 {
			kept++
			assert.Greater(t, i, 400, "only the newest are kept")
		}
	}
	assert.Greater(t, kept, 50)
	assert.Equal(t, int64(500-kept), m.Evicted())

	// Within one group too: the window keeps its newest records.
	for i := range 300 {
		require.NoError(t, m.Add(ctx, "noisy", "one", uint64(1000+i), rec(1000+i), t0.Add(time.Second+time.Duration(i)*time.Millisecond), ttl))
	}
	got, total, err = m.Window(ctx, "noisy", "one", t0, 1000)
	require.NoError(t, err)
	assert.Equal(t, len(got), total)
	assert.Less(t, total, 100)
	assert.Equal(t, string(rec(1299)), string(got[len(got)-1]))
	assert.Equal(t, string(rec(1300-total)), string(got[0]), "a contiguous run of the newest")

	// The other project kept its window.
	got, _, err = m.Window(ctx, "quiet", "g", t0, 10)
	require.NoError(t, err)
	assert.Equal(t, []string{string(rec(0))}, strs(got))

	evictions := logs.FilterMessageSnippet("evicted").All()
	require.NotEmpty(t, evictions)
	assert.Equal(t, zap.DebugLevel, evictions[0].Level)
	assert.Equal(t, "noisy", evictions[0].ContextMap()["project_id"])
}

// Entries that expire, and groups the sweep drops, give their bytes back, and the
// order of a project that never reaches its bound stays small.
func TestMemoryBoundCountsWhatExpires(t *testing.T) {
	m := NewMemory(time.Hour, WithMaxProjectBytes(1<<20))
	t.Cleanup(func() { _ = m.Close() })
	ctx := context.Background()
	t0 := time.Now()
	for i := range 10_000 {
		require.NoError(t, m.Add(ctx, "p", "g", uint64(i+1), []byte(`{"n":1}`), t0.Add(time.Duration(i)*time.Second), 10*time.Second))
	}
	assert.Less(t, m.ProjectBytes("p"), 20*(7+entryOverhead), "only the last 10 seconds are held")
	m.mu.Lock()
	assert.Less(t, len(m.projects["p"].order), 3000, "the order forgets what expired")
	m.mu.Unlock()
	assert.Zero(t, m.Evicted())

	m.sweep(t0.Add(24 * time.Hour))
	assert.Zero(t, m.ProjectBytes("p"))
}

// The per-project bound alone let one account (10 projects on
// the free tier) hold ten times it in a shared process. The process's windows are held
// to memory_max_bytes too, and what goes is the oldest context of the project holding
// the most: the tenants that filled the memory pay, the small ones keep their windows.
func TestMemoryHoldsTheProcessToItsBoundLargestProjectFirst(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	m := NewMemory(time.Minute, WithMaxProjectBytes(100_000), WithMaxBytes(300_000), WithLogger(zap.New(core)))
	t.Cleanup(func() { _ = m.Close() })
	ctx := context.Background()
	ttl := time.Hour
	t0 := time.Now()
	rec := func(p string, i int) []byte {
		return []byte(fmt.Sprintf(`{"p":%q,"n":%d,"pad":"%s"}`, p, i, strings.Repeat("x", 1000)))
	}
	var seq uint64
	add := func(p, g string, i int) {
		seq++
		require.NoError(t, m.Add(ctx, p, g, seq, rec(p, i), t0.Add(time.Duration(seq)*time.Millisecond), ttl))
	}
	for i := range 5 {
		add("quiet", "g", i)
	}
	for i := range 15 {
		add("medium", "g", i)
	}
	// One account's ten projects, each filling its own bound twice over, in groups of
	// ten records.
	for p := range 10 {
		for i := range 200 {
			add(fmt.Sprintf("acct-%d", p), fmt.Sprintf("g%d", i/10), i)
			require.LessOrEqual(t, m.TotalBytes(), 300_000, "project %d record %d", p, i)
		}
	}

	// The small projects kept every record.
	got, total, err := m.Window(ctx, "quiet", "g", t0, 100)
	require.NoError(t, err)
	assert.Equal(t, 5, total)
	assert.Equal(t, string(rec("quiet", 0)), string(got[0]))
	_, total, err = m.Window(ctx, "medium", "g", t0, 100)
	require.NoError(t, err)
	assert.Equal(t, 15, total)

	// The account's projects paid, each still holding its newest context.
	sum := 0
	for p := range 10 {
		id := fmt.Sprintf("acct-%d", p)
		b := m.ProjectBytes(id)
		assert.LessOrEqual(t, b, 100_000, id)
		sum += b
		got, total, err := m.Window(ctx, id, "g19", t0, 100)
		require.NoError(t, err)
		require.Positive(t, total, "%s kept its newest group", id)
		assert.Equal(t, string(rec(id, 199)), string(got[len(got)-1]))
		_, total, err = m.Window(ctx, id, "g0", t0, 100)
		require.NoError(t, err)
		assert.Zero(t, total, "%s lost its oldest group", id)
	}
	assert.Equal(t, m.TotalBytes(), sum+m.ProjectBytes("quiet")+m.ProjectBytes("medium"))
	assert.Greater(t, sum, 200_000, "evicted no more than the bound asks")

	// The evictions name the bound and the projects that paid, never the small ones.
	byProcess := logs.FilterMessageSnippet("memory_max_bytes").All()
	require.NotEmpty(t, byProcess)
	for _, e := range byProcess {
		assert.Contains(t, e.ContextMap()["project_id"], "acct-")
	}

	// A project that grows to hold the most afterwards is the one that gives back: it
	// holds no more than the account's projects do, and its oldest went first.
	for i := range 90 {
		add("medium", "g2", i)
	}
	_, total, err = m.Window(ctx, "quiet", "g", t0, 100)
	require.NoError(t, err)
	assert.Equal(t, 5, total)
	assert.LessOrEqual(t, m.TotalBytes(), 300_000)
	_, total, err = m.Window(ctx, "medium", "g", t0, 100)
	require.NoError(t, err)
	assert.Zero(t, total)
	got, _, err = m.Window(ctx, "medium", "g2", t0, 100)
	require.NoError(t, err)
	assert.Equal(t, string(rec("medium", 89)), string(got[len(got)-1]))
	for p := range 10 {
		assert.InDelta(t, m.ProjectBytes("medium"), m.ProjectBytes(fmt.Sprintf("acct-%d", p)), 1200, "leveled down together")
	}

	// Expiry gives the process's bytes back too.
	m.sweep(t0.Add(48 * time.Hour))
	assert.Zero(t, m.TotalBytes())
	m.mu.Lock()
	assert.Empty(t, m.largest)
	m.mu.Unlock()
}
