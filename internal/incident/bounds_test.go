package incident

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func bucketMaxBytes(t *testing.T, s *Store) int64 {
	t.Helper()
	st, err := s.KV().Status(context.Background())
	require.NoError(t, err)
	return st.(*jetstream.KeyValueBucketStatus).StreamInfo().Config.MaxBytes
}

// The bucket has a size, the component's when it gives one, and a bucket made before
// takes the size given.
func TestOpenSizesTheBucket(t *testing.T) {
	e := start(t)
	assert.Equal(t, DefaultMaxBytes, bucketMaxBytes(t, e.s))
	s, err := Open(context.Background(), e.js, 1, WithMaxBytes(64<<20))
	require.NoError(t, err)
	assert.Equal(t, int64(64<<20), bucketMaxBytes(t, s))
}

// A project keeps at most maxFingerprints fingerprints: events of one more join the
// overflow incident (the kept ones go on as they are), until a kept one's key is gone.
func TestFingerprintLimit(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	s, err := Open(ctx, e.js, 1, WithMaxFingerprints(3))
	require.NoError(t, err)
	for k := range 3 {
		r := apply(t, s, defaults, "fp"+strconv.Itoa(k), "1", 1, t0)
		require.True(t, r.Opened)
		_, _, err := s.Act(ctx, "p1", r.Incident.ID, ActionResolve, "x", t0)
		require.NoError(t, err)
	}
	// Three resolved, none open: the open limit is not what holds the fourth back.
	r := apply(t, s, defaults, "fp3", "1", 2, t0.Add(time.Second))
	assert.Equal(t, overflowPrint, r.Incident.Fingerprint)
	assert.Contains(t, r.Incident.Title, "Too many fingerprints")
	// A kept one opens its next generation.
	r = apply(t, s, defaults, "fp0", "2", 1, t0.Add(2*time.Second))
	assert.True(t, r.Opened)
	assert.Equal(t, 2, r.Incident.Generation)
	// Another project is apart.
	r2, err := s.Apply(ctx, "p2", defaults, Join{Fingerprint: "fp9", Events: 1, At: t0})
	require.NoError(t, err)
	assert.Equal(t, "fp9", r2.Incident.Fingerprint)

	// fp1's key expired: a minute on, a new fingerprint takes its place.
	require.NoError(t, s.KV().Purge(ctx, fKey("p1", FingerprintHash("fp1"))))
	r = apply(t, s, defaults, "fp4", "1", 1, t0.Add(2*time.Minute))
	assert.True(t, r.Opened)
	assert.Equal(t, "fp4", r.Incident.Fingerprint)
	r = apply(t, s, defaults, "fp5", "1", 1, t0.Add(3*time.Minute))
	assert.Equal(t, overflowPrint, r.Incident.Fingerprint)
}

// A fingerprint keeps its newest five archives.
func TestArchivesKept(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	fph := FingerprintHash("db-1")
	at := t0
	for gen := 1; gen <= 8; gen++ {
		r := apply(t, e.s, defaults, "db-1", strconv.Itoa(gen), 1, at)
		require.True(t, r.Opened)
		require.Equal(t, gen, r.Incident.Generation)
		_, _, err := e.s.Act(ctx, "p1", r.Incident.ID, ActionResolve, "x", at)
		require.NoError(t, err)
		at = at.Add(time.Hour)
	}
	for gen := 1; gen <= 8; gen++ {
		_, err := e.s.Get(ctx, "p1", ID(fph, gen))
		if gen <= 8-1-maxArchives {
			assert.ErrorIs(t, err, ErrNotFound, "generation %d", gen)
		} else {
			assert.NoError(t, err, "generation %d", gen)
		}
	}
	list, err := e.s.List(ctx, "p1", "", 50)
	require.NoError(t, err)
	assert.Len(t, list, 4, "the current one and 3 archives")
}

// An archive keeps the last 20 timeline entries (Get shows the rest as dropped) and
// none of the counting state; entries added to it later stay within that.
func TestArchiveIsCut(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	r, err := e.s.Apply(ctx, "p1", defaults, Join{Fingerprint: "db-1", Seqs: []uint64{1, 2, 3}, Title: "t", At: t0})
	require.NoError(t, err)
	id := r.Incident.ID
	for k := range 30 {
		require.NoError(t, e.s.AddTimeline(ctx, "p1", id, Entry{At: t0, Type: "chat", Detail: "posted " + strconv.Itoa(k)}))
	}
	_, _, err = e.s.Act(ctx, "p1", id, ActionResolve, "x", t0) // not published: stays in the outbox
	require.NoError(t, err)
	full, err := e.s.Get(ctx, "p1", id)
	require.NoError(t, err)
	total := len(full.Timeline) + full.TimelineDropped
	require.NotEmpty(t, full.Counted)
	require.NotEmpty(t, full.Outbox)

	next, err := e.s.Apply(ctx, "p1", defaults, Join{Fingerprint: "db-1", Seqs: []uint64{10}, Title: "t", At: t0.Add(time.Hour)})
	require.NoError(t, err)
	require.True(t, next.Opened)
	arch, err := e.s.Get(ctx, "p1", id)
	require.NoError(t, err)
	assert.Len(t, arch.Timeline, maxArchivedTimeline)
	assert.Equal(t, total-maxArchivedTimeline, arch.TimelineDropped)
	assert.Equal(t, total-maxArchivedTimeline, arch.Detail().TimelineDropped)
	assert.Equal(t, full.Timeline[len(full.Timeline)-1], arch.Timeline[len(arch.Timeline)-1], "the last entries")
	assert.Nil(t, arch.Counted)
	assert.Nil(t, arch.Outbox)
	assert.Nil(t, arch.Applied)

	require.NoError(t, e.s.AddTimeline(ctx, "p1", id, Entry{At: t0.Add(2 * time.Hour), Type: "chat", Detail: "late"}))
	arch, err = e.s.Get(ctx, "p1", id)
	require.NoError(t, err)
	assert.Len(t, arch.Timeline, maxArchivedTimeline)
	assert.Equal(t, total+1-maxArchivedTimeline, arch.TimelineDropped)
	assert.Equal(t, "late", arch.Timeline[maxArchivedTimeline-1].Detail)
}

// List reads at most listKeys incidents, those changed last.
func TestListIsBounded(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	e.s.listKeys = 4
	for k := range 7 {
		apply(t, e.s, defaults, "fp"+strconv.Itoa(k), "1", 1, t0.Add(time.Duration(k)*time.Second))
	}
	list, err := e.s.List(ctx, "p1", "", 50)
	require.NoError(t, err)
	var fps []string
	for _, i := range list {
		fps = append(fps, i.Fingerprint)
		assert.Empty(t, i.Outbox)
		assert.Empty(t, i.Counted)
	}
	assert.Equal(t, []string{"fp6", "fp5", "fp4", "fp3"}, fps)
}

// DueStateOf reads what Due needs, and Due of it says what Due of the whole incident
// says.
func TestDueStateOf(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	fph := FingerprintHash("db-1")
	r := apply(t, e.s, defaults, "db-1", "1", 3, t0)
	_, ok, err := e.s.Claim(ctx, "p1", fph, ReasonOpened, "req_1", "a", t0.Add(time.Minute), defaults, time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	entry, err := e.s.KV().Get(ctx, fKey("p1", fph))
	require.NoError(t, err)
	d, err := DueStateOf(entry.Value())
	require.NoError(t, err)
	var full Incident
	require.NoError(t, json.Unmarshal(entry.Value(), &full))
	assert.Equal(t, full.DueState(), d)
	assert.Equal(t, r.Incident.ID, d.ID)
	require.NotNil(t, d.Pending)
	assert.Equal(t, "req_1", d.Pending.RequestID)
	assert.Equal(t, t0, d.OutboxSince, "the opened notice waits to be cleared")
	for _, at := range []time.Duration{0, time.Minute, 3 * time.Minute, time.Hour} {
		r1, n1, ok1 := Due(full, defaults, t0.Add(at), time.Minute)
		r2, n2, ok2 := DueOf(d, defaults, t0.Add(at), time.Minute)
		assert.Equal(t, []any{r1, n1, ok1}, []any{r2, n2, ok2})
	}
	// Every field Due reads comes before the bulk DueStateOf does not read.
	full.RefusedAt, full.MutedUntil, full.LastCallAt, full.OpeningDone, full.ResolvedCallDone = t0, t0, t0, true, true
	full.ReinvestigateRequested, full.Status, full.NewEvents = true, StatusResolved, 7
	full.Chat = map[string]ChatThread{"s": {TS: "1"}}
	full.Counted = []SeqRange{{Lo: 1, Hi: 2}}
	b, err := marshalBounded(&full)
	require.NoError(t, err)
	d, err = DueStateOf(b)
	require.NoError(t, err)
	assert.Equal(t, full.DueState(), d)

	_, err = DueStateOf([]byte(`{"counts":1}`))
	assert.Error(t, err)
	_, err = DueStateOf([]byte(`not json`))
	assert.Error(t, err)
}

func FuzzDueStateOf(f *testing.F) {
	inc := open("p1", FingerprintHash("f"), 1, Join{Fingerprint: "f", Events: 2, At: t0})
	inc.notice(NoticeOpened, "opened", "", t0, "x")
	inc.Pending = &PendingCall{RequestID: "r", Reason: ReasonOpened, HeartbeatAt: t0}
	b, _ := json.Marshal(inc)
	f.Add(b)
	f.Add([]byte(`{"id":"x","outbox":[{"at":"2026-01-01T00:00:00Z"},{}],"pending":null}`))
	f.Add([]byte(`{"id":"x","outbox":{}}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(``))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := DueStateOf(b)
		if err != nil {
			return
		}
		require.NotEmpty(t, d.ID)
		_, _, _ = DueOf(d, defaults, t0, time.Minute)
	})
}

// worstIncident has every bounded part at its bound, its texts of char.
func worstIncident(char string) Incident {
	worst := strings.Repeat(char, 2000)
	i := open("p1", FingerprintHash("x"), 1, Join{Fingerprint: worst, Title: worst, Events: 1, At: t0})
	i.LastResult = cutRunes(worst, maxLastResult)
	i.AcknowledgedBy, i.MutedBy, i.ResolvedBy = cut(worst, maxEntryBy), cut(worst, maxEntryBy), cut(worst, maxEntryBy)
	i.Chat = map[string]ChatThread{}
	for k := range maxChatThreads {
		i.Chat[cut(strconv.Itoa(k)+worst, 128)] = ChatThread{Channel: cut(worst, 128), TS: cut(worst, 64), PostedAt: t0}
	}
	for range 2 * maxTimeline {
		i.add(Entry{At: t0, Type: cut(worst, 32), By: cut(worst, maxEntryBy), Detail: cutRunes(worst, maxEntryText),
			RequestID: cut(worst, 128), SinkID: cut(worst, 128), Count: 1 << 40, Outcome: cut(worst, 32)})
	}
	return i
}

// The sizes doc.go gives for a project's worst case: an archive at every bound is a
// fraction of a current incident's.
func TestArchiveSizeBound(t *testing.T) {
	for _, c := range []struct {
		char  string
		bound int
	}{{"a", 40 << 10}, {"<", 200 << 10}} { // "<" is written \u003c: six bytes
		cur := worstIncident(c.char)
		b, err := marshalBounded(&cur)
		require.NoError(t, err)
		assert.LessOrEqual(t, len(b), maxValue)
		a := worstIncident(c.char)
		a.archived()
		b, err = marshalBounded(&a)
		require.NoError(t, err)
		assert.LessOrEqual(t, len(b), c.bound, "archive of texts of %q", c.char)
	}
}
