package incident

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every notice a change gives is in the incident's outbox in the same write: should its
// process die before publishing it, a watcher finds it there (PendingNotices) until it is
// published (Published).
func TestNoticesWaitInTheOutboxUntilPublished(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	fph := FingerprintHash("db-1")
	r := apply(t, e.s, defaults, "db-1", "1", 2, t0)
	id := r.Incident.ID
	require.Len(t, r.Notices, 1)
	// Its process died here: the opened notice was never published.
	_, acked, err := e.s.Act(ctx, "p1", id, ActionAcknowledge, "user:a@example.com", t0.Add(time.Minute))
	require.NoError(t, err)
	require.NoError(t, e.s.Published(ctx, "p1", id, MaxSeq(acked, id)))
	_, resolved, err := e.s.ResolveIdle(ctx, "p1", fph, defaults, t0.Add(time.Hour))
	require.NoError(t, err)
	require.Len(t, resolved, 1)
	// Nor was the resolved one.

	inc, err := e.s.Get(ctx, "p1", id)
	require.NoError(t, err)
	assert.Empty(t, PendingNotices(inc, t0.Add(-time.Second)), "none decided so long ago")
	pending := PendingNotices(inc, t0.Add(time.Hour))
	require.Len(t, pending, 1, "the acknowledgement's notices were published, and cleared with the opened one")
	assert.Equal(t, resolved[0].MsgID(), pending[0].MsgID())
	assert.Equal(t, NoticeResolved, pending[0].Type)

	require.NoError(t, e.s.Published(ctx, "p1", id, MaxSeq(pending, id)))
	inc, err = e.s.Get(ctx, "p1", id)
	require.NoError(t, err)
	assert.Empty(t, PendingNotices(inc, t0.Add(2*time.Hour)))
	assert.ErrorIs(t, e.s.Published(ctx, "p1", "inc_x", 1), ErrNotFound)
}

// The outbox keeps the newest notices; an old generation's unpublished ones go out with
// the next generation's opening.
func TestOutboxBoundsAndGenerations(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	r := apply(t, e.s, defaults, "db-1", "1", 1, t0)
	id := r.Incident.ID
	at := t0
	for k := range 40 {
		at = at.Add(time.Second)
		action := ActionMute
		if k%2 == 1 {
			action = ActionReinvestigate
			_, _, err := e.s.Complete(ctx, "p1", FingerprintHash("db-1"), "none", OutcomeDelivered, at)
			require.NoError(t, err)
		}
		_, _, err := e.s.Act(ctx, "p1", id, action, "user:a@example.com", at)
		require.NoError(t, err)
	}
	inc, err := e.s.Get(ctx, "p1", id)
	require.NoError(t, err)
	assert.LessOrEqual(t, len(inc.Outbox), maxOutbox)
	_, res, err := e.s.Act(ctx, "p1", id, ActionResolve, "user:a@example.com", at)
	require.NoError(t, err)
	require.Len(t, res, 1)

	r = apply(t, e.s, defaults, "db-1", "2", 1, at.Add(time.Hour))
	require.True(t, r.Opened)
	var ids []string
	for _, n := range r.Notices {
		ids = append(ids, n.Incident.ID)
	}
	assert.Contains(t, ids, id, "the old generation's notices not yet published")
	assert.Equal(t, r.Incident.ID, ids[len(ids)-1])
	assert.Equal(t, NoticeOpened, r.Notices[len(r.Notices)-1].Type)
	assert.Equal(t, 1, MaxSeq(r.Notices, r.Incident.ID))
	require.Equal(t, r.Notices, r.Incident.Outbox, "the old generation's unpublished notices wait in the new outbox")
	assert.LessOrEqual(t, len(r.Incident.Outbox), maxOutbox)
}

// The previous generation's unpublished notices stay in the outbox of the next one until
// published (the process that opened it may die before publishing them), and Published
// clears only the notices of the id it is given.
func TestPreviousGenerationNoticesWaitInTheOutbox(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	fph := FingerprintHash("db-1")
	r := apply(t, e.s, defaults, "db-1", "1", 1, t0)
	old := r.Incident.ID
	require.NoError(t, e.s.Published(ctx, "p1", old, MaxSeq(r.Notices, old)))
	_, resolved, err := e.s.ResolveIdle(ctx, "p1", fph, defaults, t0.Add(time.Hour))
	require.NoError(t, err)
	require.Len(t, resolved, 1)
	// Not published: the process died. The next generation opens.
	r = apply(t, e.s, defaults, "db-1", "2", 1, t0.Add(2*time.Hour))
	require.True(t, r.Opened)
	cur := r.Incident.ID
	require.NotEqual(t, old, cur)
	// That process dies too: a watcher of the f-key finds both.
	inc, err := e.s.Get(ctx, "p1", cur)
	require.NoError(t, err)
	pending := PendingNotices(inc, t0.Add(3*time.Hour))
	require.Len(t, pending, 2)
	assert.Equal(t, resolved[0].MsgID(), pending[0].MsgID())
	assert.Equal(t, NoticeOpened, pending[1].Type)
	assert.Equal(t, cur, pending[1].Incident.ID)

	// The current one's Seq covers the old one's (both counted per generation): only the
	// id given is cleared.
	require.NoError(t, e.s.Published(ctx, "p1", cur, 100))
	inc, err = e.s.Get(ctx, "p1", cur)
	require.NoError(t, err)
	pending = PendingNotices(inc, t0.Add(3*time.Hour))
	require.Len(t, pending, 1)
	assert.Equal(t, resolved[0].MsgID(), pending[0].MsgID())
	require.NoError(t, e.s.Published(ctx, "p1", old, MaxSeq(pending, old)))
	inc, err = e.s.Get(ctx, "p1", cur)
	require.NoError(t, err)
	assert.Empty(t, inc.Outbox)
}

// The opening batch delivered again gives the opened notice again only while it is not
// published: once on the stream, a late redelivery (past the stream's duplicate window)
// would store it twice and chat webhooks would post the opening twice.
func TestOpenedNoticeNotGivenAgainOncePublished(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	for _, bySeq := range []bool{false, true} {
		fp := "db-" + map[bool]string{false: "key", true: "seq"}[bySeq]
		do := func(at time.Time) JoinResult {
			if bySeq {
				return applySeqs(t, e.s, fp, seqRange(1, 3), at)
			}
			return apply(t, e.s, defaults, fp, "7", 3, at)
		}
		r := do(t0)
		require.True(t, r.Opened)
		again := do(t0.Add(time.Second))
		require.Len(t, again.Notices, 1, "unpublished: given again (%s)", fp)
		assert.Equal(t, r.Notices[0].MsgID(), again.Notices[0].MsgID())
		require.NoError(t, e.s.Published(ctx, "p1", r.Incident.ID, MaxSeq(r.Notices, r.Incident.ID)))
		again = do(t0.Add(5 * time.Minute))
		assert.Empty(t, again.Notices, "published: not again (%s)", fp)
		assert.Equal(t, int64(3), again.Incident.Events)
	}
}
