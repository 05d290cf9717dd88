package incident

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// countingKV is the real bucket, counting its reads.
type countingKV struct {
	jetstream.KeyValue
	gets atomic.Int64
}

func (c *countingKV) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	c.gets.Add(1)
	return c.KeyValue.Get(ctx, key)
}

func counting(s *Store) *countingKV {
	c := &countingKV{KeyValue: s.kv}
	s.kv = c
	return c
}

// A fingerprint's batches applied one after another by the process that wrote it last
// cost one compare-and-set each, no read: the pipeline makes one Apply per fingerprint
// per batch, and the read was half of its round trips.
func TestApplyStartsFromItsOwnLastWrite(t *testing.T) {
	e := start(t)
	kv := counting(e.s)
	r := applySeqs(t, e.s, "disk", seqRange(1, 3), t0)
	require.True(t, r.Opened)
	before := kv.gets.Load()
	for i := range uint64(5) {
		r = applySeqs(t, e.s, "disk", seqRange(10*i+10, 10*i+12), t0.Add(time.Duration(i+1)*time.Second))
		require.True(t, r.Joined)
	}
	assert.Equal(t, int64(18), r.Incident.Events)
	assert.Zero(t, kv.gets.Load()-before, "reads of the f-key while only this process writes it")
}

// Another process's writes in between make the guess stale: its compare-and-set loses,
// the key is read and every event counts once, the other's included.
func TestApplyAfterAnotherProcessWrote(t *testing.T) {
	e := start(t)
	other := e.another(t)
	applySeqs(t, e.s, "disk", seqRange(1, 3), t0)
	r := applySeqs(t, other, "disk", seqRange(4, 6), t0.Add(time.Second))
	require.True(t, r.Joined)
	// 4..6 again (the other's batch delivered here too) and 7..8 new.
	r = applySeqs(t, e.s, "disk", seqRange(4, 8), t0.Add(2*time.Second))
	require.True(t, r.Joined)
	assert.Equal(t, int64(8), r.Incident.Events)
	// Resolved by the other: a batch here reopens it (within ReopenWithin) instead of
	// joining the open incident it last wrote.
	set := defaults
	set.ReopenWithin = time.Hour
	_, _, err := other.Act(context.Background(), "p1", r.Incident.ID, "resolve", "alice", t0.Add(3*time.Second))
	require.NoError(t, err)
	r, err = e.s.Apply(context.Background(), "p1", set, Join{Fingerprint: "disk", Seqs: seqRange(9, 9), Title: "t", At: t0.Add(4 * time.Second)})
	require.NoError(t, err)
	assert.True(t, r.Reopened)
	assert.Equal(t, StatusOpen, r.Incident.Status)
}

// A redelivered batch decides nothing on the guess: the other process published the
// opened notice meanwhile, so it is not given again (the guess still has it in the
// outbox; a chat root would be posted twice).
func TestRedeliveryAfterAnotherPublishedReadsTheKey(t *testing.T) {
	e := start(t)
	other := e.another(t)
	r := applySeqs(t, e.s, "disk", seqRange(1, 3), t0)
	require.True(t, r.Opened)
	require.NoError(t, other.Published(context.Background(), "p1", r.Incident.ID, MaxSeq(r.Notices, r.Incident.ID)))
	again := applySeqs(t, e.s, "disk", seqRange(1, 3), t0.Add(time.Minute))
	assert.Empty(t, again.Notices)
	assert.Equal(t, int64(3), again.Incident.Events)
}
