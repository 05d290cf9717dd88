package incident

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/streams"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

var defaults = Settings{GroupWait: 30 * time.Second, GroupInterval: 5 * time.Minute, ResolveAfter: 30 * time.Minute}

type env struct {
	url string
	nc  *nats.Conn
	js  jetstream.JetStream
	s   *Store
}

func start(t *testing.T) env {
	t.Helper()
	srv := testenv.StartNATS(t)
	nc, js := testenv.Connect(t, srv.URL())
	s, err := Open(context.Background(), js, 1)
	require.NoError(t, err)
	return env{url: srv.URL(), nc: nc, js: js, s: s}
}

// another is a second process's store over its own connection.
func (e env) another(t *testing.T) *Store {
	_, js := testenv.Connect(t, e.url)
	s, err := Open(context.Background(), js, 1)
	require.NoError(t, err)
	return s
}

func apply(t *testing.T, s *Store, set Settings, fp, batch string, n int64, at time.Time) JoinResult {
	t.Helper()
	r, err := s.Apply(context.Background(), "p1", set, Join{Fingerprint: fp, BatchKey: batch, Events: n, Title: "disk full on " + fp, At: at})
	require.NoError(t, err)
	return r
}

func TestOpenCreatesTheBucket(t *testing.T) {
	e := start(t)
	st, err := e.s.KV().Status(context.Background())
	require.NoError(t, err)
	assert.Equal(t, Bucket, st.Bucket())
	assert.Equal(t, 30*24*time.Hour, st.TTL())
	assert.Equal(t, uint64(1), uint64(st.History()))
	cfg := st.(*jetstream.KeyValueBucketStatus).StreamInfo().Config
	assert.Equal(t, int32(maxValue), cfg.MaxMsgSize)
	assert.Equal(t, jetstream.FileStorage, cfg.Storage)
	// A second process binds to it.
	_ = e.another(t)
}

// Processes applying the same new fingerprint at once open one incident and count
// every event into it.
func TestConcurrentApplyOpensOneIncident(t *testing.T) {
	e := start(t)
	stores := []*Store{e.s, e.another(t)}
	ctx := context.Background()
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		opened int
		ids    = map[string]bool{}
	)
	const writers = 8
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := stores[w%2].Apply(ctx, "p1", defaults, Join{Fingerprint: "db-1", BatchKey: "b" + strconv.Itoa(w), Events: 2, Title: "t", At: t0})
			assert.NoError(t, err)
			mu.Lock()
			defer mu.Unlock()
			if r.Opened {
				opened++
			}
			ids[r.Incident.ID] = true
		}()
	}
	wg.Wait()
	assert.Equal(t, 1, opened)
	require.Len(t, ids, 1)
	inc, err := e.s.Get(ctx, "p1", ID(FingerprintHash("db-1"), 1))
	require.NoError(t, err)
	assert.Equal(t, int64(2*writers), inc.Events)
	assert.Len(t, inc.Applied, writers)
}

func TestRedeliveredBatchCountedOnce(t *testing.T) {
	e := start(t)
	r := apply(t, e.s, defaults, "db-1", "7", 3, t0)
	require.True(t, r.Opened)
	require.Len(t, r.Notices, 1)
	assert.Equal(t, "Incident opened: disk full on db-1 (3 events)", r.Notices[0].Text)

	again := apply(t, e.s, defaults, "db-1", "7", 3, t0.Add(time.Second))
	assert.False(t, again.Opened || again.Joined)
	assert.Equal(t, int64(3), again.Incident.Events)
	// The opening batch redelivered (its process died before publishing) gives the
	// opened notice again, under the same id: the chat root hangs on it.
	require.Len(t, again.Notices, 1)
	assert.Equal(t, r.Notices[0].MsgID(), again.Notices[0].MsgID())
	assert.Equal(t, NoticeOpened, again.Notices[0].Type)

	r = apply(t, e.s, defaults, "db-1", "8", 2, t0.Add(2*time.Second))
	assert.True(t, r.Joined)
	again = apply(t, e.s, defaults, "db-1", "8", 2, t0.Add(2*time.Second))
	assert.Empty(t, again.Notices, "a joining batch redelivered tells nothing")
	assert.Equal(t, int64(5), again.Incident.Events)
	assert.Equal(t, int64(5), r.Incident.Events)
	assert.Equal(t, int64(5), r.Incident.NewEvents)
	assert.Empty(t, r.Notices)

	// Applied keeps the last 64 batch keys.
	for k := range 70 {
		apply(t, e.s, defaults, "db-1", "k"+strconv.Itoa(k), 1, t0.Add(3*time.Second))
	}
	inc, err := e.s.Get(context.Background(), "p1", r.Incident.ID)
	require.NoError(t, err)
	assert.Len(t, inc.Applied, 64)
	assert.Equal(t, int64(75), inc.Events)
}

func TestResolveWhenAndReopen(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	set := defaults
	set.ReopenWithin = 10 * time.Minute

	// A resolve with nothing open changes nothing.
	r, err := e.s.Apply(ctx, "p1", set, Join{Fingerprint: "db-1", BatchKey: "0", Resolve: true, At: t0})
	require.NoError(t, err)
	assert.False(t, r.Resolved)
	assert.Empty(t, r.Incident.ID)

	first := apply(t, e.s, set, "db-1", "1", 1, t0).Incident
	r, err = e.s.Apply(ctx, "p1", set, Join{Fingerprint: "db-1", BatchKey: "2", Resolve: true, At: t0.Add(time.Minute)})
	require.NoError(t, err)
	require.True(t, r.Resolved)
	assert.Equal(t, StatusResolved, r.Incident.Status)
	assert.Equal(t, "resolve_when", r.Incident.ResolvedBy)
	require.Len(t, r.Notices, 1)
	assert.Equal(t, NoticeResolved, r.Notices[0].Type)

	// Within reopen_within: the same incident.
	r = apply(t, e.s, set, "db-1", "3", 2, t0.Add(11*time.Minute))
	require.True(t, r.Reopened)
	assert.Equal(t, first.ID, r.Incident.ID)
	assert.Equal(t, StatusOpen, r.Incident.Status)
	assert.Equal(t, int64(3), r.Incident.Events)
	assert.True(t, r.Incident.ResolvedAt.IsZero())
	require.Len(t, r.Notices, 1)
	assert.Equal(t, "reopened", r.Notices[0].Transition)

	// Resolved again, and events after reopen_within: generation 2, the first archived.
	_, err = e.s.Apply(ctx, "p1", set, Join{Fingerprint: "db-1", BatchKey: "4", Resolve: true, At: t0.Add(12 * time.Minute)})
	require.NoError(t, err)
	r = apply(t, e.s, set, "db-1", "5", 4, t0.Add(23*time.Minute))
	require.True(t, r.Opened)
	assert.Equal(t, ID(FingerprintHash("db-1"), 2), r.Incident.ID)
	assert.Equal(t, 2, r.Incident.Generation)
	assert.Equal(t, int64(4), r.Incident.Events)

	old, err := e.s.Get(ctx, "p1", first.ID)
	require.NoError(t, err)
	assert.Equal(t, StatusResolved, old.Status)
	assert.Equal(t, int64(3), old.Events)
	cur, err := e.s.Get(ctx, "p1", r.Incident.ID)
	require.NoError(t, err)
	assert.Equal(t, StatusOpen, cur.Status)

	_, err = e.s.Get(ctx, "p1", ID(FingerprintHash("db-1"), 3))
	assert.ErrorIs(t, err, ErrNotFound)
	_, err = e.s.Get(ctx, "p2", first.ID)
	assert.ErrorIs(t, err, ErrNotFound)

	// Without reopen_within a resolved incident is never reopened.
	_, err = e.s.Apply(ctx, "p1", defaults, Join{Fingerprint: "db-1", BatchKey: "6", Resolve: true, At: t0.Add(24 * time.Minute)})
	require.NoError(t, err)
	r = apply(t, e.s, defaults, "db-1", "7", 1, t0.Add(24*time.Minute+time.Second))
	require.True(t, r.Opened)
	assert.Equal(t, 3, r.Incident.Generation)
}

func TestOpenAndResolveInOneBatch(t *testing.T) {
	e := start(t)
	r, err := e.s.Apply(context.Background(), "p1", defaults, Join{Fingerprint: "x", BatchKey: "1", Events: 1, Resolve: true, At: t0})
	require.NoError(t, err)
	assert.True(t, r.Opened && r.Resolved)
	require.Len(t, r.Notices, 2)
	assert.Equal(t, NoticeOpened, r.Notices[0].Type)
	assert.Equal(t, NoticeResolved, r.Notices[1].Type)
	assert.NotEqual(t, r.Notices[0].MsgID(), r.Notices[1].MsgID())
}

func TestResolveIdle(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	inc := apply(t, e.s, defaults, "db-1", "1", 1, t0).Incident
	fph := FingerprintHash("db-1")
	got, notices, err := e.s.ResolveIdle(ctx, "p1", fph, defaults, t0.Add(29*time.Minute))
	require.NoError(t, err)
	assert.Empty(t, notices)
	assert.Equal(t, StatusOpen, got.Status)

	got, notices, err = e.s.ResolveIdle(ctx, "p1", fph, defaults, t0.Add(30*time.Minute))
	require.NoError(t, err)
	require.Len(t, notices, 1)
	assert.Equal(t, "Resolved (no events for 30m): "+inc.Title, notices[0].Text)
	assert.Equal(t, "resolve_after", got.ResolvedBy)
	assert.Equal(t, StatusResolved, got.Status)

	_, notices, err = e.s.ResolveIdle(ctx, "p1", fph, defaults, t0.Add(31*time.Minute))
	require.NoError(t, err)
	assert.Empty(t, notices)
}

func TestClaimOneWinsAndStaleIsTakenOver(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	other := e.another(t)
	fph := FingerprintHash("db-1")
	apply(t, e.s, defaults, "db-1", "1", 1, t0)

	// Nothing due within group_wait.
	_, ok, err := e.s.Claim(ctx, "p1", fph, ReasonOpened, "req_a", "a", t0.Add(time.Second), defaults, time.Minute)
	require.NoError(t, err)
	assert.False(t, ok)

	now := t0.Add(30 * time.Second)
	var (
		wg  sync.WaitGroup
		won = make(chan string, 2)
	)
	for k, s := range []*Store{e.s, other} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			owner := "owner" + strconv.Itoa(k)
			inc, ok, err := s.Claim(ctx, "p1", fph, ReasonOpened, "req_"+owner, owner, now, defaults, time.Minute)
			assert.NoError(t, err)
			if ok {
				assert.Equal(t, "req_"+owner, inc.Pending.RequestID)
				won <- owner
			}
		}()
	}
	wg.Wait()
	close(won)
	var winners []string
	for w := range won {
		winners = append(winners, w)
	}
	require.Len(t, winners, 1)
	first := "req_" + winners[0]

	// A fresh claim holds; a stale one is taken over, the same call retried.
	_, ok, err = e.s.Claim(ctx, "p1", fph, ReasonOpened, "req_c", "c", now.Add(time.Minute), defaults, time.Minute)
	require.NoError(t, err)
	assert.False(t, ok)
	require.NoError(t, e.s.Heartbeat(ctx, "p1", fph, first, now.Add(50*time.Second)))
	_, ok, err = e.s.Claim(ctx, "p1", fph, ReasonOpened, "req_c", "c", now.Add(110*time.Second), defaults, time.Minute)
	require.NoError(t, err)
	assert.False(t, ok, "the heartbeat kept the claim fresh")
	inc, ok, err := e.s.Claim(ctx, "p1", fph, ReasonOpened, "req_c", "c", now.Add(111*time.Second), defaults, time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, first, inc.Pending.RequestID)
	assert.Equal(t, "c", inc.Pending.Owner)
	assert.Equal(t, ReasonOpened, inc.Pending.Reason)

	// The c-key names the incident and reason.
	byReq, reason, ok, err := e.s.ByRequest(ctx, "p1", first)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, inc.ID, byReq.ID)
	assert.Equal(t, ReasonOpened, reason)
	_, _, ok, err = e.s.ByRequest(ctx, "p1", "req_c")
	require.NoError(t, err)
	assert.False(t, ok, "req_c never became a call")
	_, _, ok, err = e.s.ByRequest(ctx, "p1", "not a.key*")
	require.NoError(t, err)
	assert.False(t, ok)

	// The claim's loser cannot heartbeat a claim it does not hold.
	assert.ErrorIs(t, e.s.Heartbeat(ctx, "p1", fph, "req_c", now), ErrNotFound)
}

func TestComplete(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	fph := FingerprintHash("db-1")
	apply(t, e.s, defaults, "db-1", "1", 3, t0)
	at := t0.Add(30 * time.Second)
	inc, ok, err := e.s.Claim(ctx, "p1", fph, ReasonOpened, "req_1", "a", at, defaults, time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, t0, inc.NewSince, "the call carries the events since the opening")
	// An event during the call stays new after it.
	apply(t, e.s, defaults, "db-1", "2", 1, at.Add(time.Second))

	// Another request id changes nothing.
	inc, notices, err := e.s.Complete(ctx, "p1", fph, "req_x", OutcomeDelivered, at.Add(2*time.Second))
	require.NoError(t, err)
	assert.Empty(t, notices)
	require.NotNil(t, inc.Pending)

	inc, notices, err = e.s.Complete(ctx, "p1", fph, "req_1", OutcomeDelivered, at.Add(2*time.Second))
	require.NoError(t, err)
	assert.Nil(t, inc.Pending)
	assert.Equal(t, 1, inc.Calls)
	assert.True(t, inc.OpeningDone)
	assert.Equal(t, int64(1), inc.NewEvents)
	assert.Equal(t, at, inc.NewSince)
	assert.Equal(t, at.Add(2*time.Second), inc.LastCallAt)
	require.Len(t, notices, 1)
	assert.Equal(t, NoticeUpdated, notices[0].Type)
	assert.Equal(t, "call", notices[0].Transition)
	assert.Equal(t, 1, notices[0].Incident.Calls)
	last := inc.Timeline[len(inc.Timeline)-1]
	assert.Equal(t, Entry{At: at.Add(2 * time.Second), Type: "call", Detail: ReasonOpened, RequestID: "req_1", Outcome: OutcomeDelivered, Count: 3}, last)

	// A completed call completes once.
	_, notices, err = e.s.Complete(ctx, "p1", fph, "req_1", OutcomeDelivered, at.Add(3*time.Second))
	require.NoError(t, err)
	assert.Empty(t, notices)

	// Refused by the budget: no call counted, no notice, and the update waits an interval.
	upd := at.Add(2*time.Second + defaults.GroupInterval)
	_, ok, err = e.s.Claim(ctx, "p1", fph, ReasonUpdated, "req_2", "a", upd, defaults, time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	inc, notices, err = e.s.Complete(ctx, "p1", fph, "req_2", OutcomeRefused, upd)
	require.NoError(t, err)
	assert.Empty(t, notices)
	assert.Equal(t, 1, inc.Calls)
	_, _, due := Due(inc, defaults, upd.Add(time.Second), time.Minute)
	assert.False(t, due)

	// Dead-lettered counts as a call made.
	apply(t, e.s, defaults, "db-1", "3", 1, upd.Add(time.Second))
	upd = upd.Add(defaults.GroupInterval)
	c, ok, err := e.s.Claim(ctx, "p1", fph, ReasonUpdated, "req_3", "a", upd, defaults, time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "req_2", c.Pending.RequestID, "the refused call's request id")
	inc, _, err = e.s.Complete(ctx, "p1", fph, "req_2", OutcomeDeadLettered, upd)
	require.NoError(t, err)
	assert.Equal(t, 2, inc.Calls)
	assert.Empty(t, inc.RefusedRequestID)

	_, _, err = e.s.Complete(ctx, "p1", fph, "req_2", "maybe", upd)
	assert.Error(t, err)
}

func TestAct(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	inc := apply(t, e.s, defaults, "db-1", "1", 1, t0).Incident
	at := t0.Add(time.Minute)

	got, notices, err := e.s.Act(ctx, "p1", inc.ID, ActionAcknowledge, "slack:ana", at)
	require.NoError(t, err)
	assert.Equal(t, StatusAcknowledged, got.Status)
	assert.Equal(t, "slack:ana", got.AcknowledgedBy)
	require.Len(t, notices, 1)
	assert.Equal(t, "Acknowledged by slack:ana: disk full on db-1", notices[0].Text)
	assert.Equal(t, "slack:ana", notices[0].Incident.AcknowledgedBy)
	_, notices, err = e.s.Act(ctx, "p1", inc.ID, ActionAcknowledge, "slack:bo", at)
	require.NoError(t, err)
	assert.Empty(t, notices, "acknowledged already")

	got, notices, err = e.s.Act(ctx, "p1", inc.ID, ActionMute, "user:a@x.io", at)
	require.NoError(t, err)
	assert.Equal(t, at.Add(MuteFor), got.MutedUntil)
	require.Len(t, notices, 1)
	assert.Equal(t, "muted", notices[0].Transition)

	got, notices, err = e.s.Act(ctx, "p1", inc.ID, ActionReinvestigate, "user:a@x.io", at)
	require.NoError(t, err)
	assert.True(t, got.ReinvestigateRequested)
	require.Len(t, notices, 1)

	got, notices, err = e.s.Act(ctx, "p1", inc.ID, ActionResolve, "user:a@x.io", at)
	require.NoError(t, err)
	assert.Equal(t, StatusResolved, got.Status)
	assert.Equal(t, "user:a@x.io", got.ResolvedBy)
	require.Len(t, notices, 1)
	assert.Equal(t, NoticeResolved, notices[0].Type)
	assert.Equal(t, "Resolved by user:a@x.io: disk full on db-1", notices[0].Text)

	_, _, err = e.s.Act(ctx, "p1", inc.ID, ActionAcknowledge, "slack:ana", at)
	assert.ErrorIs(t, err, ErrResolved)
	_, _, err = e.s.Act(ctx, "p1", inc.ID, ActionMute, "slack:ana", at)
	assert.ErrorIs(t, err, ErrResolved)
	_, notices, err = e.s.Act(ctx, "p1", inc.ID, ActionResolve, "slack:ana", at)
	require.NoError(t, err)
	assert.Empty(t, notices)

	_, _, err = e.s.Act(ctx, "p1", ID(FingerprintHash("nope"), 1), ActionAcknowledge, "x", at)
	assert.ErrorIs(t, err, ErrNotFound)
	_, _, err = e.s.Act(ctx, "p1", "garbage", ActionAcknowledge, "x", at)
	assert.ErrorIs(t, err, ErrNotFound)
	_, _, err = e.s.Act(ctx, "p1", inc.ID, "explode", "x", at)
	assert.Error(t, err)

	// The timeline tells it all, and every transition's notice id differs.
	got, err = e.s.Get(ctx, "p1", inc.ID)
	require.NoError(t, err)
	var types []string
	for _, en := range got.Timeline {
		types = append(types, en.Type)
	}
	assert.Equal(t, []string{"opened", "acknowledged", "muted", "reinvestigate", "resolved"}, types)
}

func TestAttachResultAndChat(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	fph := FingerprintHash("db-1")
	inc := apply(t, e.s, defaults, "db-1", "1", 1, t0).Incident
	_, ok, err := e.s.Claim(ctx, "p1", fph, ReasonOpened, "req_1", "a", t0.Add(time.Minute), defaults, time.Minute)
	require.NoError(t, err)
	require.True(t, ok)

	long := ""
	for len([]rune(long)) < 600 {
		long += "the disk is full ü "
	}
	got, ok, err := e.s.AttachResult(ctx, "p1", "req_1", long, t0.Add(2*time.Minute))
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, inc.ID, got.ID)
	assert.Len(t, []rune(got.LastResult), 500)
	assert.Equal(t, "result", got.Timeline[len(got.Timeline)-1].Type)
	n := len(got.Timeline)
	got, ok, err = e.s.AttachResult(ctx, "p1", "req_1", long, t0.Add(3*time.Minute))
	require.NoError(t, err)
	require.True(t, ok)
	assert.Len(t, got.Timeline, n, "a redelivered result is attached once")

	_, ok, err = e.s.AttachResult(ctx, "p1", "req_unknown", "x", t0)
	require.NoError(t, err)
	assert.False(t, ok)
	_, ok, err = e.s.AttachResult(ctx, "p1", "../*", "x", t0)
	require.NoError(t, err)
	assert.False(t, ok)

	require.NoError(t, e.s.SetChatThread(ctx, "p1", inc.ID, "s1", ChatThread{Channel: "C1", TS: "1.1", PostedAt: t0}))
	require.NoError(t, e.s.SetChatThread(ctx, "p1", inc.ID, "s1", ChatThread{Channel: "C1", TS: "2.2", PostedAt: t0}))
	require.NoError(t, e.s.AddTimeline(ctx, "p1", inc.ID, Entry{Type: "chat", SinkID: "s1", Detail: "posted"}))
	got, err = e.s.Get(ctx, "p1", inc.ID)
	require.NoError(t, err)
	assert.Equal(t, "1.1", got.Chat["s1"].TS, "the first thread stays")
	assert.Equal(t, "chat", got.Timeline[len(got.Timeline)-1].Type)
	assert.ErrorIs(t, e.s.SetChatThread(ctx, "p1", ID(fph, 9), "s1", ChatThread{}), ErrNotFound)
}

func TestList(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	apply(t, e.s, defaults, "a", "1", 1, t0)
	apply(t, e.s, defaults, "b", "1", 1, t0.Add(time.Minute))
	c := apply(t, e.s, defaults, "c", "1", 1, t0.Add(2*time.Minute)).Incident
	apply(t, e.s, defaults, "d", "1", 1, t0.Add(3*time.Minute))
	_, _, err := e.s.Act(ctx, "p1", c.ID, ActionAcknowledge, "x", t0.Add(4*time.Minute))
	require.NoError(t, err)
	_, _, err = e.s.ResolveIdle(ctx, "p1", FingerprintHash("a"), defaults, t0.Add(40*time.Minute))
	require.NoError(t, err)
	_, _, err = e.s.ResolveIdle(ctx, "p1", FingerprintHash("b"), defaults, t0.Add(41*time.Minute))
	require.NoError(t, err)
	// a opens again: its generation 1 is archived, still listed.
	apply(t, e.s, defaults, "a", "2", 1, t0.Add(50*time.Minute))
	_, err = e.s.Apply(ctx, "p2", defaults, Join{Fingerprint: "e", BatchKey: "1", Events: 1, At: t0.Add(time.Hour)})
	require.NoError(t, err)

	fps := func(l []Incident) (out []string) {
		for _, i := range l {
			out = append(out, fmt.Sprintf("%s/%d/%s", i.Fingerprint, i.Generation, i.Status))
		}
		return out
	}
	all, err := e.s.List(ctx, "p1", "", 50)
	require.NoError(t, err)
	assert.Equal(t, []string{"a/2/open", "c/1/acknowledged", "d/1/open", "b/1/resolved", "a/1/resolved"}, fps(all))
	assert.Nil(t, all[0].Timeline)

	open, err := e.s.List(ctx, "p1", StatusOpen, 50)
	require.NoError(t, err)
	assert.Equal(t, []string{"a/2/open", "d/1/open"}, fps(open))
	two, err := e.s.List(ctx, "p1", "", 2)
	require.NoError(t, err)
	assert.Equal(t, []string{"a/2/open", "c/1/acknowledged"}, fps(two))
	p2, err := e.s.List(ctx, "p2", "", 50)
	require.NoError(t, err)
	assert.Equal(t, []string{"e/1/open"}, fps(p2))
	none, err := e.s.List(ctx, "p3", "", 50)
	require.NoError(t, err)
	assert.Empty(t, none)
}

// A project has at most maxOpen open incidents: a fingerprint beyond joins the
// overflow incident; a resolution frees a slot.
func TestOpenIncidentLimit(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	e.s.maxOpen = 3
	for k := range 3 {
		require.True(t, apply(t, e.s, defaults, "fp"+strconv.Itoa(k), "1", 1, t0).Opened)
	}
	r := apply(t, e.s, defaults, "fp3", "1", 2, t0)
	require.True(t, r.Opened)
	assert.Equal(t, overflowPrint, r.Incident.Fingerprint)
	assert.Contains(t, r.Incident.Title, "Too many open incidents")
	r = apply(t, e.s, defaults, "fp4", "1", 3, t0)
	assert.True(t, r.Joined)
	assert.Equal(t, int64(5), r.Incident.Events)
	// Open ones still join their own.
	r = apply(t, e.s, defaults, "fp0", "2", 1, t0)
	assert.True(t, r.Joined)
	assert.Equal(t, "fp0", r.Incident.Fingerprint)

	_, err := e.s.Get(ctx, "p1", ID(FingerprintHash("fp3"), 1))
	assert.ErrorIs(t, err, ErrNotFound)

	_, _, err = e.s.Act(ctx, "p1", ID(FingerprintHash("fp1"), 1), ActionResolve, "x", t0)
	require.NoError(t, err)
	r = apply(t, e.s, defaults, "fp5", "1", 1, t0)
	assert.True(t, r.Opened)
	assert.Equal(t, "fp5", r.Incident.Fingerprint)

	// A slot whose opening never happened (its process died after reserving) is found
	// and freed when the project is at the limit, a minute on.
	_, _, err = e.s.Act(ctx, "p1", ID(FingerprintHash("fp2"), 1), ActionResolve, "x", t0)
	require.NoError(t, err)
	ok, err := e.s.reserve(ctx, "p1", FingerprintHash("died"), t0, false)
	require.NoError(t, err)
	require.True(t, ok)
	r = apply(t, e.s, defaults, "fp6", "1", 1, t0.Add(30*time.Second))
	assert.Equal(t, overflowPrint, r.Incident.Fingerprint)
	r = apply(t, e.s, defaults, "fp7", "1", 1, t0.Add(2*time.Minute))
	assert.True(t, r.Opened)
	assert.Equal(t, "fp7", r.Incident.Fingerprint)
}

// Incidents of the same fingerprint in two projects are apart.
func TestProjectsApart(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	a, err := e.s.Apply(ctx, "p1", defaults, Join{Fingerprint: "f", BatchKey: "1", Events: 1, At: t0})
	require.NoError(t, err)
	b, err := e.s.Apply(ctx, "p2", defaults, Join{Fingerprint: "f", BatchKey: "1", Events: 1, At: t0})
	require.NoError(t, err)
	assert.True(t, a.Opened && b.Opened)
	assert.Equal(t, a.Incident.ID, b.Incident.ID, "ids are per project")
	_, _, err = e.s.Act(ctx, "p1", a.Incident.ID, ActionResolve, "x", t0)
	require.NoError(t, err)
	got, err := e.s.Get(ctx, "p2", b.Incident.ID)
	require.NoError(t, err)
	assert.Equal(t, StatusOpen, got.Status)
	_, err = e.s.Apply(ctx, "bad.project", defaults, Join{Fingerprint: "f", Events: 1})
	assert.Error(t, err)
}

func TestWatchSeesFingerprintKeys(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	w, err := e.s.Watch(ctx)
	require.NoError(t, err)
	defer w.Stop()
	// The watch is live once it has said its (empty) initial values are all told: a
	// change before that is told as the latest value only (history 1), two as one.
	select {
	case en := <-w.Updates():
		require.Nil(t, en)
	case <-time.After(5 * time.Second):
		t.Fatal("the watch never started")
	}
	apply(t, e.s, defaults, "db-1", "1", 1, t0)
	_, ok, err := e.s.Claim(ctx, "p1", FingerprintHash("db-1"), ReasonOpened, "req_1", "a", t0.Add(time.Minute), defaults, time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	// A watcher is told the latest state of each f-key (two quick changes may come as
	// one: the ticker needs the latest, not each), and nothing of the other keys.
	want := fKey("p1", FingerprintHash("db-1"))
	timeout := time.After(5 * time.Second)
	for {
		select {
		case en := <-w.Updates():
			if en == nil {
				continue
			}
			require.Equal(t, want, en.Key(), "the open set and c-keys are not watched")
			d, err := DueStateOf(en.Value())
			require.NoError(t, err)
			if d.Pending != nil && d.Pending.RequestID == "req_1" {
				return // the claim, the latest change, was told
			}
		case <-timeout:
			t.Fatal("the watch never told the claim")
		}
	}
}

func TestPublish(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	wake, err := e.nc.SubscribeSync(streams.WakeSubject(streams.WakeOutput, "p1"))
	require.NoError(t, err)
	r := apply(t, e.s, defaults, "db-1", "1", 2, t0)
	n := r.Notices[0]
	require.NoError(t, Publish(ctx, e.js, e.nc, "p1", n))
	require.NoError(t, Publish(ctx, e.js, e.nc, "p1", n)) // a repeat is stored once
	_, err = wake.NextMsg(5 * time.Second)
	require.NoError(t, err)

	st, err := e.js.Stream(ctx, streams.OutputStream("p1"))
	require.NoError(t, err)
	info, err := st.Info(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(1), info.State.Msgs)
	msg, err := st.GetMsg(ctx, 1)
	require.NoError(t, err)
	assert.Equal(t, streams.SignalNotice, msg.Header.Get(streams.HeaderSignal))
	assert.Equal(t, r.Incident.ID, msg.Header.Get(HeaderIncidentID))
	assert.Equal(t, n.MsgID(), msg.Header.Get(streams.HeaderRequestID))
	assert.Equal(t, streams.NoticeIDPrefix+"incident-"+r.Incident.ID+"-1", n.MsgID())
	var body map[string]any
	require.NoError(t, json.Unmarshal(msg.Data, &body))
	assert.Equal(t, "incident.opened", body["type"])
	assert.Equal(t, "opened", body["transition"])
	assert.Equal(t, "p1", body["project_id"])
	assert.Equal(t, "Incident opened: disk full on db-1 (2 events)", body["text"])
	assert.Equal(t, r.Incident.ID, body["incident"].(map[string]any)["id"])

	assert.Error(t, Publish(ctx, e.js, e.nc, "bad.project", n))
}

// A round that lost its compare-and-set may archive late; the newer copy stays, and a
// list never shows an incident twice.
func TestArchiveKeepsTheNewerCopy(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	inc := apply(t, e.s, defaults, "db-1", "1", 1, t0).Incident
	older := inc
	_, _, err := e.s.Act(ctx, "p1", inc.ID, ActionAcknowledge, "x", t0.Add(time.Minute))
	require.NoError(t, err)
	newer, err := e.s.Get(ctx, "p1", inc.ID)
	require.NoError(t, err)
	require.NoError(t, e.s.archive(ctx, "p1", &newer))
	require.NoError(t, e.s.archive(ctx, "p1", &older))
	en, err := e.s.KV().Get(ctx, rKey("p1", inc.ID))
	require.NoError(t, err)
	var got Incident
	require.NoError(t, json.Unmarshal(en.Value(), &got))
	assert.Equal(t, StatusAcknowledged, got.Status)

	l, err := e.s.List(ctx, "p1", "", 10)
	require.NoError(t, err)
	require.Len(t, l, 1)
	assert.Equal(t, StatusAcknowledged, l[0].Status)
}

// However long its entries, an incident fits the bucket's value size.
func TestIncidentFitsTheBucket(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	inc := apply(t, e.s, defaults, "db-1", "1", 1, t0).Incident
	big := Entry{Type: "chat", By: strings.Repeat("b", 500), Detail: strings.Repeat("😀", 2000)}
	_, err := e.s.update(ctx, fKey("p1", FingerprintHash("db-1")), func(cur *Incident, _ bool) (bool, error) {
		for range 250 {
			cur.add(Entry{At: t0, Type: "chat", By: cut(big.By, maxEntryBy), Detail: cutRunes(big.Detail, maxEntryText)})
		}
		return true, nil
	})
	require.NoError(t, err)
	require.NoError(t, e.s.AddTimeline(ctx, "p1", inc.ID, big))
	got, err := e.s.Get(ctx, "p1", inc.ID)
	require.NoError(t, err)
	b, _ := json.Marshal(got)
	assert.LessOrEqual(t, len(b), maxValue)
	assert.Equal(t, 252, len(got.Timeline)+got.TimelineDropped)
	assert.Less(t, len(got.Timeline), maxTimeline, "the oldest went to fit")
	last := got.Timeline[len(got.Timeline)-1]
	assert.Len(t, []rune(last.Detail), maxEntryText)
	assert.Len(t, last.By, maxEntryBy)
}
