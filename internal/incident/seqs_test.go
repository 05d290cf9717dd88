package incident

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func seqRange(lo, hi uint64) []uint64 {
	var out []uint64
	for s := lo; s <= hi; s++ {
		out = append(out, s)
	}
	return out
}

func applySeqs(t *testing.T, s *Store, fp string, seqs []uint64, at time.Time) JoinResult {
	t.Helper()
	r, err := s.Apply(context.Background(), "p1", defaults, Join{Fingerprint: fp, Seqs: seqs, Title: "disk full on " + fp, At: at})
	require.NoError(t, err)
	return r
}

// A batch delivered again after many other batches and minutes later counts nothing
// twice and gives its opened notice again.
func TestRedeliveryAfterManyBatchesCountsNothingTwice(t *testing.T) {
	e := start(t)
	first := applySeqs(t, e.s, "db-1", seqRange(1, 10), t0)
	require.True(t, first.Opened)
	// 68 more batches of 3 events each, other records of the stream between them.
	next := uint64(100)
	for k := range 68 {
		applySeqs(t, e.s, "db-1", []uint64{next, next + 2, next + 4}, t0.Add(time.Duration(k)*time.Second))
		next += 10
	}
	again := applySeqs(t, e.s, "db-1", seqRange(1, 10), t0.Add(5*time.Minute))
	assert.Equal(t, int64(10+68*3), again.Incident.Events)
	assert.False(t, again.Joined || again.Opened)
	require.Len(t, again.Notices, 1, "the opening batch again gives its opened notice again")
	assert.Equal(t, first.Notices[0].MsgID(), again.Notices[0].MsgID())
	// A batch of the middle, too.
	again = applySeqs(t, e.s, "db-1", []uint64{300, 302, 304}, t0.Add(6*time.Minute))
	assert.Equal(t, int64(10+68*3), again.Incident.Events)
	assert.Empty(t, again.Notices)
	assert.LessOrEqual(t, len(again.Incident.Counted), maxCounted)

	// However late the opening batch comes again, its opened notice comes with it.
	again = applySeqs(t, e.s, "db-1", []uint64{1, 2, 3}, t0.Add(time.Hour))
	require.NotEmpty(t, again.Notices)
	assert.Equal(t, first.Notices[0].MsgID(), again.Notices[0].MsgID())
}

// A batch delivered again with new records (the same first sequence, more of them)
// counts the new ones only.
func TestRedeliveryMixedWithNewRecordsCountsTheNew(t *testing.T) {
	e := start(t)
	applySeqs(t, e.s, "db-1", []uint64{5, 6, 7}, t0)
	r := applySeqs(t, e.s, "db-1", []uint64{5, 6, 7, 8, 9}, t0.Add(time.Minute))
	assert.True(t, r.Joined)
	assert.Equal(t, int64(5), r.Incident.Events)
	assert.Equal(t, int64(5), r.Incident.NewEvents)
	// Redelivered out of order with a record that came between.
	r = applySeqs(t, e.s, "db-1", []uint64{9, 12, 4}, t0.Add(2*time.Minute))
	assert.Equal(t, int64(7), r.Incident.Events)
}

// Counted sequences pass to the next generation, and a resolve_when record counted
// before resolves nothing again: the reopened incident stays open.
func TestRedeliveredResolveAfterReopen(t *testing.T) {
	e := start(t)
	set := defaults
	set.ReopenWithin = time.Hour
	ctx := context.Background()
	r, err := e.s.Apply(ctx, "p1", set, Join{Fingerprint: "db-1", Seqs: []uint64{1, 2}, ResolveSeq: 3, Resolve: true, At: t0})
	require.NoError(t, err)
	require.True(t, r.Opened && r.Resolved)
	r, err = e.s.Apply(ctx, "p1", set, Join{Fingerprint: "db-1", Seqs: []uint64{4}, At: t0.Add(time.Minute)})
	require.NoError(t, err)
	require.True(t, r.Reopened)
	r, err = e.s.Apply(ctx, "p1", set, Join{Fingerprint: "db-1", Seqs: []uint64{1, 2}, ResolveSeq: 3, Resolve: true, At: t0.Add(2 * time.Minute)})
	require.NoError(t, err)
	assert.False(t, r.Resolved)
	assert.Equal(t, StatusOpen, r.Incident.Status)
	assert.Equal(t, int64(3), r.Incident.Events)

	// Past reopen_within a new generation opens; the first batch again counts nothing
	// into it.
	set.ReopenWithin = 0
	_, err = e.s.Apply(ctx, "p1", set, Join{Fingerprint: "db-1", Seqs: []uint64{5}, ResolveSeq: 6, Resolve: true, At: t0.Add(3 * time.Minute)})
	require.NoError(t, err)
	r, err = e.s.Apply(ctx, "p1", set, Join{Fingerprint: "db-1", Seqs: []uint64{7}, At: t0.Add(4 * time.Minute)})
	require.NoError(t, err)
	require.True(t, r.Opened)
	require.Equal(t, 2, r.Incident.Generation)
	r, err = e.s.Apply(ctx, "p1", set, Join{Fingerprint: "db-1", Seqs: []uint64{1, 2, 4, 5, 7}, At: t0.Add(5 * time.Minute)})
	require.NoError(t, err)
	assert.Equal(t, int64(1), r.Incident.Events)
}

func TestCountBounds(t *testing.T) {
	var rs []SeqRange
	// Every other sequence: no run merges by itself.
	for k := range 400 {
		rs = count(rs, []uint64{uint64(2*k + 1)}, t0)
	}
	require.Len(t, rs, maxCounted)
	for k := range 400 {
		// The lowest go: a very late redelivery of them counts twice rather than a
		// sequence never counted counting as seen.
		assert.Equal(t, k >= 400-maxCounted, seen(rs, uint64(2*k+1)), "sequence %d", 2*k+1)
		assert.False(t, seen(rs, uint64(2*k+2)), "never counted: %d", 2*k+2)
	}
	assert.False(t, seen(rs, 1000))
	// Ten minutes later they are forgotten.
	rs = count(rs, []uint64{5000}, t0.Add(countedFor))
	assert.Equal(t, []SeqRange{{Lo: 5000, Hi: 5000, At: t0.Add(countedFor).Unix()}}, rs)
}

// A storm's fingerprint has its events spread over the stream: remembered one by one
// they fill the counted ranges (every Apply decodes and writes them again); with the
// batches' runs they stay one range, and a batch of them delivered again counts nothing.
func TestCoveredBatchesStayOneRange(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	var last JoinResult
	for b := range 300 {
		lo := uint64(1 + b*100)
		batch := seqRange(lo, lo+99)
		events := []uint64{lo + 7, lo + 31, lo + 77} // this fingerprint's, among other records
		r, err := e.s.Apply(ctx, "p1", defaults, Join{Fingerprint: "db-1", Seqs: events, Covered: Runs(batch), Title: "disk full", At: t0})
		require.NoError(t, err)
		last = r
	}
	assert.Equal(t, int64(900), last.Incident.Events)
	assert.Len(t, last.Incident.Counted, 1, "300 consecutive batches are one counted range")
	again, err := e.s.Apply(ctx, "p1", defaults, Join{Fingerprint: "db-1", Seqs: []uint64{5007, 5031}, Covered: Runs(seqRange(5001, 5100)), At: t0.Add(time.Minute)})
	require.NoError(t, err)
	assert.Equal(t, int64(900), again.Incident.Events, "a batch delivered again counts nothing")
}

func TestRunsOfABatch(t *testing.T) {
	assert.Equal(t, [][2]uint64{{1, 3}, {7, 7}, {9, 10}}, Runs([]uint64{1, 2, 3, 7, 9, 10}))
	assert.Empty(t, Runs(nil))
}

// Two fingerprints past the open limit in one batch both join the overflow incident: the
// first's Apply must not take the whole batch's runs as counted there, or the second's
// events would all count as seen.
func TestTwoFingerprintsOverflowInOneBatch(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	e.s.maxOpen = 1
	_, err := e.s.Apply(ctx, "p1", defaults, Join{Fingerprint: "fp0", Seqs: []uint64{1}, Covered: [][2]uint64{{1, 1}}, At: t0})
	require.NoError(t, err)
	covered := Runs([]uint64{10, 11, 12, 13, 14})
	r, err := e.s.Apply(ctx, "p1", defaults, Join{Fingerprint: "fp1", Seqs: []uint64{10, 12}, Covered: covered, At: t0})
	require.NoError(t, err)
	require.Equal(t, overflowPrint, r.Incident.Fingerprint)
	r, err = e.s.Apply(ctx, "p1", defaults, Join{Fingerprint: "fp2", Seqs: []uint64{11, 13, 14}, Covered: covered, At: t0})
	require.NoError(t, err)
	require.Equal(t, overflowPrint, r.Incident.Fingerprint)
	assert.Equal(t, int64(5), r.Incident.Events, "both fingerprints' events")
}

// A gap in the counted sequences (a killed process's batch, not acknowledged, to come
// again) stays a gap however many ranges come after: its redelivery counts.
func TestGapStaysPastMaxCounted(t *testing.T) {
	var rs []SeqRange
	// Gaps of ten between ranges, except one of a single sequence (500) in the middle.
	rs = count(rs, []uint64{499, 501}, t0)
	for k := range maxCounted + 10 {
		rs = count(rs, []uint64{uint64(1000 + 10*k)}, t0)
	}
	for k := range 100 {
		rs = count(rs, []uint64{uint64(10 * k)}, t0)
	}
	require.LessOrEqual(t, len(rs), maxCounted)
	assert.False(t, seen(rs, 500), "the redelivered batch's sequence counts when it comes")
}
