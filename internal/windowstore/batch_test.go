package windowstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A batch is stored as its records one by one would be: each in its group, oldest
// first, and a redelivered batch (or a record twice in one) once.
func TestAddBatchStoresEachRecordOnce(t *testing.T) {
	for name, s := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			p := fmt.Sprintf("batch-%s-%d", name, time.Now().UnixNano())
			t0 := time.Now()
			ttl := time.Minute
			batch := []Entry{
				{Group: "a", Seq: 1, Rec: []byte(`{"n":1}`)},
				{Group: "b", Seq: 2, Rec: []byte(`{"n":2}`)},
				{Group: "a", Seq: 3, Rec: []byte(`{"n":3}`)},
				{Group: "a", Seq: 3, Rec: []byte(`{"n":3}`)},
			}
			require.NoError(t, s.AddBatch(ctx, p, t0, ttl, batch))
			require.NoError(t, s.AddBatch(ctx, p, t0.Add(time.Millisecond), ttl, batch[:3]), "the batch delivered again")
			require.NoError(t, s.AddBatch(ctx, p, t0.Add(2*time.Millisecond), ttl, []Entry{{Group: "a", Seq: 4, Rec: []byte(`{"n":4}`)}}))
			require.NoError(t, s.AddBatch(ctx, p, t0, ttl, nil))

			got, total, err := s.Window(ctx, p, "a", t0.Add(-ttl), 100)
			require.NoError(t, err)
			assert.Equal(t, []string{`{"n":1}`, `{"n":3}`, `{"n":4}`}, strs(got))
			assert.Equal(t, 3, total)
			got, _, err = s.Window(ctx, p, "b", t0.Add(-ttl), 100)
			require.NoError(t, err)
			assert.Equal(t, []string{`{"n":2}`}, strs(got))
		})
	}
}

// AddBatch trims what expired and what passes MaxPerGroup, as Add does.
func TestAddBatchTrimsExpiredAndCaps(t *testing.T) {
	for name, s := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			p := fmt.Sprintf("batchcap-%s-%d", name, time.Now().UnixNano())
			t0 := time.Now()
			require.NoError(t, s.AddBatch(ctx, p, t0, time.Second, []Entry{{Group: "g", Seq: 1, Rec: []byte("old")}}))
			require.NoError(t, s.AddBatch(ctx, p, t0.Add(2*time.Second), time.Second, []Entry{{Group: "g", Seq: 2, Rec: []byte("new")}}))
			got, _, err := s.Window(ctx, p, "g", t0.Add(-time.Hour), 100)
			require.NoError(t, err)
			assert.Equal(t, []string{"new"}, strs(got))

			var batch []Entry
			for i := range MaxPerGroup + 5 {
				batch = append(batch, Entry{Group: "cap", Seq: uint64(10 + i), Rec: []byte(fmt.Sprint(i))})
			}
			require.NoError(t, s.AddBatch(ctx, p, t0, time.Hour, batch))
			got, total, err := s.Window(ctx, p, "cap", t0.Add(-time.Hour), MaxPerGroup)
			require.NoError(t, err)
			require.Len(t, got, MaxPerGroup)
			assert.Equal(t, MaxPerGroup, total)
			assert.Equal(t, "5", string(got[0]), "the oldest go first")
		})
	}
}

// The memory store finds a redelivered record without a per-entry index while the
// sequences rise along the window, and with one while they do not. Against a model
// (every entry in a list) under random batches: records in stream order, batches
// delivered again whole or in part, records of lower sequences than the window holds,
// times that step back, and expiry.
func TestMemoryMatchesAModelUnderRedeliveryAndDisorder(t *testing.T) {
	type kept struct {
		t   time.Time
		seq uint64
		rec string
	}
	indexed, unindexed := 0, 0
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 7))
		m := NewMemory(time.Hour)
		model := map[string][]kept{}
		ctx := context.Background()
		t0 := time.Unix(1_700_000_000, 0)
		now := t0
		ttl := time.Duration(50+rng.IntN(200)) * time.Millisecond
		groups := []string{"a", "b", "c"}
		var seq uint64
		var sent []Entry
		for step := range 400 {
			var batch []Entry
			switch r := rng.IntN(10); {
			case r < 6 || len(sent) == 0: // the stream's next records
				for range 1 + rng.IntN(20) {
					seq++
					batch = append(batch, Entry{Group: groups[rng.IntN(len(groups))], Seq: seq, Rec: []byte(fmt.Sprint("r", seq))})
				}
			case r < 8: // a batch delivered again, whole or in part
				from := rng.IntN(len(sent))
				batch = append(batch, sent[from:min(len(sent), from+1+rng.IntN(30))]...)
			default: // records older in the stream than what the window holds
				for range 1 + rng.IntN(5) {
					s := uint64(1 + rng.IntN(int(seq)+1))
					batch = append(batch, Entry{Group: groups[rng.IntN(len(groups))], Seq: s, Rec: []byte(fmt.Sprint("r", s))})
				}
			}
			if rng.IntN(8) == 0 {
				now = now.Add(-time.Duration(rng.IntN(20)) * time.Millisecond) // the clock steps back
			} else {
				now = now.Add(time.Duration(rng.IntN(20)) * time.Millisecond)
			}
			require.NoError(t, m.AddBatch(ctx, "p", now, ttl, batch))
			sent = append(sent, batch...)
			for _, e := range batch {
				w := model[e.Group]
				dup := false
				for _, k := range w {
					dup = dup || k.seq == e.Seq
				}
				if dup {
					continue
				}
				i := sort.Search(len(w), func(i int) bool { return w[i].t.After(now) })
				w = append(w[:i], append([]kept{{t: now, seq: e.Seq, rec: string(e.Rec)}}, w[i:]...)...)
				for len(w) > 0 && w[0].t.Before(now.Add(-ttl)) {
					w = w[1:]
				}
				model[e.Group] = w
			}
			for _, g := range groups {
				got, total, err := m.Window(ctx, "p", g, t0.Add(-time.Hour), 1<<20)
				require.NoError(t, err)
				want := []string{}
				for _, k := range model[g] {
					want = append(want, k.rec)
				}
				require.Equal(t, want, strs(got), "seed %d step %d group %s", seed, step, g)
				require.Equal(t, len(want), total)
			}
			m.mu.Lock()
			for _, g := range m.groups {
				inv := 0
				for i := 0; i+1 < len(g.entries); i++ {
					if g.entries[i].seq >= g.entries[i+1].seq {
						inv++
					}
				}
				require.Equal(t, inv, g.inversions, "seed %d step %d", seed, step)
				require.Equal(t, inv > 0, g.seqs != nil, "an index only while out of order")
				if g.seqs != nil {
					require.Len(t, g.seqs, len(g.entries))
					indexed++
				} else if len(g.entries) > 1 {
					unindexed++
				}
			}
			m.mu.Unlock()
		}
		_ = m.Close()
	}
	assert.Positive(t, indexed, "the runs put windows out of sequence order")
	assert.Positive(t, unindexed, "and in it")
}

// A batch passing the project's bound evicts the project's oldest entries, whatever
// their group, until it is back within it; entries a batch stores are the caller's
// bytes, not copies, and are counted as Add's are.
func TestAddBatchHoldsTheProjectToItsBound(t *testing.T) {
	m := NewMemory(time.Minute, WithMaxProjectBytes(100_000))
	t.Cleanup(func() { _ = m.Close() })
	ctx := context.Background()
	t0 := time.Now()
	rec := func(i int) []byte { return []byte(fmt.Sprintf(`{"n":%d,"pad":"%s"}`, i, strings.Repeat("x", 1000))) }
	seq := uint64(0)
	for b := range 20 {
		var batch []Entry
		for range 50 {
			seq++
			batch = append(batch, Entry{Group: fmt.Sprintf("g%d", seq%7), Seq: seq, Rec: rec(int(seq))})
		}
		require.NoError(t, m.AddBatch(ctx, "p", t0.Add(time.Duration(b)*time.Millisecond), time.Hour, batch))
		require.LessOrEqual(t, m.ProjectBytes("p"), 100_000, "after batch %d", b)
	}
	assert.Positive(t, m.Evicted())
	// What is left is the newest records, in every group.
	oldestKept := seq
	kept := 0
	for g := range 7 {
		got, total, err := m.Window(ctx, "p", fmt.Sprintf("g%d", g), t0, 1000)
		require.NoError(t, err)
		kept += total
		for _, r := range got {
			var n uint64
			_, err := fmt.Sscanf(string(r), `{"n":%d`, &n)
			require.NoError(t, err)
			oldestKept = min(oldestKept, n)
		}
	}
	assert.Equal(t, int(seq-oldestKept+1), kept, "a contiguous run of the newest records across the groups")
	assert.Equal(t, int64(int(seq)-kept), m.Evicted())
	m.mu.Lock()
	assert.Less(t, len(m.projects["p"].order)-m.projects["p"].head, 2*kept+1024+50)
	m.mu.Unlock()
}

// The memory store keeps only the record, in memory of its own: a caller's record is
// often a slice of a NATS message's buffer (headers before it), which it must neither
// pin nor see changed, and the bounds count what is really kept.
func TestMemoryKeepsOwnCopiesOfExactlyTheRecord(t *testing.T) {
	m := NewMemory(time.Minute)
	t.Cleanup(func() { _ = m.Close() })
	ctx := context.Background()
	t0 := time.Now()
	const hdr = "NATS/1.0\r\nSvc-Signal: log\r\nNats-Msg-Id: 0123456789abcdef\r\n\r\n"
	const rec = `{"body":"disk full"}`
	msg := []byte(hdr + rec + rec)
	first := msg[len(hdr) : len(hdr)+len(rec)]
	second := msg[len(hdr)+len(rec):]
	require.NoError(t, m.AddBatch(ctx, "p", t0, time.Minute, []Entry{{Group: "g", Seq: 1, Rec: first}}))
	require.NoError(t, m.Add(ctx, "p", "g", 2, second, t0, time.Minute))

	for i := range msg {
		msg[i] = 'x' // the caller reuses its buffer
	}
	got, _, err := m.Window(ctx, "p", "g", t0.Add(-time.Second), 10)
	require.NoError(t, err)
	require.Equal(t, []string{rec, rec}, strs(got))
	for _, g := range got {
		assert.Equal(t, len(rec), cap(g), "the kept entry holds the record only, not the buffer behind it")
	}
	assert.Equal(t, 2*(len(rec)+entryOverhead), m.ProjectBytes("p"))
	assert.Equal(t, 2*(len(rec)+entryOverhead), m.TotalBytes())
}
