package usage

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// noticeLog records what OnNotice was called with, by key, failing the first fail calls.
type noticeLog struct {
	mu    sync.Mutex
	calls map[string]int
	fail  int
}

func (l *noticeLog) on(_ context.Context, n Notice) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.calls == nil {
		l.calls = map[string]int{}
	}
	l.calls[noticeKey(n.Account, n.Month, n.Limit, n.Percent)]++
	if l.fail > 0 {
		l.fail--
		return errors.New("NATS went away")
	}
	return nil
}

func (l *noticeLog) snapshot() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]int{}
	for k, v := range l.calls {
		out[k] = v
	}
	return out
}

func noticeState(t *testing.T, m *Meter, key string) noticeEntry {
	t.Helper()
	kve, err := m.kv.Get(context.Background(), key)
	require.NoError(t, err)
	var e noticeEntry
	require.NoError(t, json.Unmarshal(kve.Value(), &e))
	return e
}

// A receiver that claimed a notice and died before sending it (its entry written, no
// OnNotice): another receiver sends it once the claim is overdue, exactly once however
// many receivers race for it, and marks it sent. A notice written before delivery states
// existed counts as sent, and one of a month long gone is left alone.
func TestNoticeOfADeadSenderIsSentByAnother(t *testing.T) {
	n := testenv.StartNATS(t)
	ctx := context.Background()
	now := time.Now().UTC()
	month := Month(now)
	_, js := testenv.Connect(t, n.URL())
	kv, err := openUsageBucket(ctx, js, 1)
	require.NoError(t, err)
	put := func(key string, v any) {
		b, err := json.Marshal(v)
		require.NoError(t, err)
		_, err = kv.Create(ctx, key, b)
		require.NoError(t, err)
	}
	dead := noticeKey("acct-d", month, 100, 80)
	put(dead, noticeEntry{
		Notice: Notice{Account: "acct-d", Month: month, Percent: 80, Limit: 100, Used: 80, At: now, ResetAt: ResetAt(now)},
		State:  noticeClaimed, ClaimedAt: now.UnixMilli(), Attempts: 1,
	})
	legacy := noticeKey("acct-d", month, 100, 100)
	put(legacy, Notice{Account: "acct-d", Month: month, Percent: 100, Limit: 100, Used: 100, At: now, ResetAt: ResetAt(now)})
	old := MonthStart(now).AddDate(0, -3, 0)
	put(noticeKey("acct-d", Month(old), 100, 80), noticeEntry{
		Notice: Notice{Account: "acct-d", Month: Month(old), Percent: 80, Limit: 100},
		State:  noticeClaimed, ClaimedAt: old.UnixMilli(), Attempts: 1,
	})

	var log noticeLog
	var meters []*Meter
	for range 3 {
		meters = append(meters, meterOn(t, n.URL(), Config{DefaultLimit: 100, NoticeTimeout: 200 * time.Millisecond, OnNotice: log.on}))
	}
	require.Eventually(t, func() bool { return noticeState(t, meters[0], dead).State == noticeSent },
		10*time.Second, 20*time.Millisecond, "the dead sender's notice is sent and marked")
	for _, m := range meters {
		require.NoError(t, m.Close(ctx)) // waits for sends in flight
	}
	require.Equal(t, map[string]int{dead: 1}, log.snapshot(), "once, by one receiver; not the legacy nor the old month's")
	e := noticeState(t, meters[0], dead)
	require.Equal(t, 2, e.Attempts, "one takeover")
	require.True(t, now.Equal(e.At), "the notice keeps its time")

	u, err := readerOn(t, n.URL(), 100).Account(ctx, "acct-d", now)
	require.NoError(t, err)
	require.Len(t, u.Notices, 2, "the usage API still reads both entries")
}

// A sender whose OnNotice fails (NATS lost while publishing) leaves its notice claimed,
// and it is sent again until it goes through.
func TestFailedNoticeIsSentAgain(t *testing.T) {
	n := testenv.StartNATS(t)
	ctx := context.Background()
	log := noticeLog{fail: 2}
	m := meterOn(t, n.URL(), Config{DefaultLimit: 100, NoticeTimeout: 100 * time.Millisecond, OnNotice: log.on})
	r, err := m.Reserve(ctx, "acct-f", "p", 80)
	require.NoError(t, err)
	r.Commit()
	key := noticeKey("acct-f", Month(time.Now()), 100, 80)
	require.Eventually(t, func() bool {
		kve, err := m.kv.Get(ctx, key)
		if err != nil {
			return false
		}
		var e noticeEntry
		return json.Unmarshal(kve.Value(), &e) == nil && e.State == noticeSent
	}, 10*time.Second, 20*time.Millisecond)
	require.NoError(t, m.Close(ctx))
	require.Equal(t, map[string]int{key: 3}, log.snapshot(), "two failures, then sent; not after")
	require.Equal(t, 3, noticeState(t, m, key).Attempts)
}

// The wait before retrying a notice doubles with each failed try, up to an hour.
func TestNoticeRetryBacksOff(t *testing.T) {
	at := time.UnixMilli(1_000_000)
	for attempts, want := range map[int]time.Duration{1: 30 * time.Second, 2: time.Minute, 3: 2 * time.Minute, 40: time.Hour} {
		e := noticeEntry{ClaimedAt: at.UnixMilli(), Attempts: attempts}
		require.Equal(t, at.Add(want), e.due(30*time.Second), "attempts %d", attempts)
	}
}

// A notice entry is read back from KV by every meter: whatever it holds, reading it and
// computing its retry time neither panics nor waits past the cap.
func FuzzNoticeEntry(f *testing.F) {
	f.Add([]byte(`{"account":"a","month":"2026-11","percent":80,"limit":100,"state":"claimed","claimed_at":1,"attempts":3}`))
	f.Add([]byte(`{"attempts":-5,"claimed_at":-9223372036854775808}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var e noticeEntry
		if json.Unmarshal(b, &e) != nil {
			return
		}
		if d := e.due(30 * time.Second).Sub(time.UnixMilli(e.ClaimedAt)); d > maxNoticeRetry || d <= 0 {
			t.Fatalf("wait %s for %+v", d, e)
		}
	})
}
