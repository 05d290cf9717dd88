package usage

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// reserveOrRefuse reserves and commits n records, and says whether the quota refused them.
func reserveOrRefuse(t *testing.T, m *Meter, account, project string, n int64) bool {
	t.Helper()
	r, err := m.Reserve(context.Background(), account, project, n)
	var qe *QuotaError
	if errors.As(err, &qe) {
		return true
	}
	require.NoError(t, err)
	r.Commit()
	return false
}

// The usage answers count the records refused this month, by reason,
// per project (never another's), and say since when the account refuses for its quota;
// a raised limit ends "refusing" and keeps the counts.
func TestRefusedRecordsAreCounted(t *testing.T) {
	n := testenv.StartNATS(t)
	clock := &fakeClock{t: time.Date(2026, 11, 20, 9, 0, 0, 0, time.UTC)}
	m := meterOn(t, n.URL(), Config{DefaultLimit: 100, Clock: clock.Now, FlushInterval: time.Hour})
	rd := readerOn(t, n.URL(), 100)
	ctx := context.Background()

	require.False(t, reserveOrRefuse(t, m, "acct-a", "p-shop", 60))
	require.False(t, reserveOrRefuse(t, m, "acct-a", "p-blog", 9))
	u, err := rd.Account(ctx, "acct-a", clock.Now())
	require.NoError(t, err)
	assert.Zero(t, u.Refused)
	assert.Nil(t, u.RefusingSince, "nothing refused yet")

	// 31 left: a batch of 50 is refused whole; the first refusal is the "since".
	first := clock.Now().Add(time.Minute)
	clock.Set(first)
	require.True(t, reserveOrRefuse(t, m, "acct-a", "p-shop", 50))
	clock.Set(first.Add(time.Minute))
	require.True(t, reserveOrRefuse(t, m, "acct-a", "p-shop", 50))
	m.Refused("acct-a", "p-shop", ReasonRate, 7)
	m.Refused("acct-a", "p-shop", ReasonTooLarge, 1)
	m.Refused("acct-b", "p-other", ReasonQuota, 1000)
	require.NoError(t, m.Flush(ctx))

	u, err = rd.Account(ctx, "acct-a", clock.Now())
	require.NoError(t, err)
	assert.EqualValues(t, 108, u.Refused)
	assert.Equal(t, map[string]int64{ReasonQuota: 100, ReasonRate: 7, ReasonTooLarge: 1}, u.RefusedByReason)
	require.NotNil(t, u.RefusingSince, "refused a minute ago with 31 left: refusing")
	assert.True(t, first.Equal(*u.RefusingSince), "since %v, want the first refusal %v", u.RefusingSince, first)
	assert.EqualValues(t, 69, u.Events, "refused records are never counted as events")

	// The blog project refused nothing: its own count is 0, though its account refuses.
	blog, err := rd.Project(ctx, "acct-a", "p-blog", clock.Now())
	require.NoError(t, err)
	assert.Zero(t, blog.Refused)
	assert.Empty(t, blog.RefusedByReason)
	require.NotNil(t, blog.RefusingSince, "the quota is the account's: the blog's records are refused too")
	shop, err := rd.Project(ctx, "acct-a", "p-shop", clock.Now())
	require.NoError(t, err)
	assert.EqualValues(t, 108, shop.Refused)
	// Another account sees none of it.
	other, err := rd.Account(ctx, "acct-c", clock.Now())
	require.NoError(t, err)
	assert.Zero(t, other.Refused)
	assert.Nil(t, other.RefusingSince)

	// An hour later with records left and no refusal since: not refusing, still counted.
	u, err = rd.Account(ctx, "acct-a", clock.Now().Add(time.Hour))
	require.NoError(t, err)
	assert.Nil(t, u.RefusingSince)
	assert.EqualValues(t, 108, u.Refused)

	// Used up: refusing whatever the time of the last refusal.
	require.False(t, reserveOrRefuse(t, m, "acct-a", "p-blog", 31))
	require.True(t, reserveOrRefuse(t, m, "acct-a", "p-blog", 1))
	require.NoError(t, m.Flush(ctx))
	u, err = rd.Account(ctx, "acct-a", clock.Now().Add(time.Hour))
	require.NoError(t, err)
	require.NotNil(t, u.RefusingSince)
	assert.True(t, first.Equal(*u.RefusingSince))
	blog, err = rd.Project(ctx, "acct-a", "p-blog", clock.Now())
	require.NoError(t, err)
	assert.EqualValues(t, 1, blog.Refused)

	// A raised limit: the account is not refusing any more; the month's counts stay.
	require.NoError(t, rd.Limits().Set(ctx, "acct-a", 1000))
	u, err = rd.Account(ctx, "acct-a", clock.Now())
	require.NoError(t, err)
	assert.Nil(t, u.RefusingSince)
	assert.EqualValues(t, 109, u.Refused)

	// Next month starts from nothing.
	u, err = rd.Account(ctx, "acct-a", time.Date(2026, 12, 1, 0, 0, 1, 0, time.UTC))
	require.NoError(t, err)
	assert.Zero(t, u.Refused)
}

// A refusal storm costs no write per request: two receivers refusing thousands of
// requests past the quota write the counts once per flush each, and the sums are exact.
func TestRefusalStormWritesOncePerFlush(t *testing.T) {
	n := testenv.StartNATS(t)
	const flush = 200 * time.Millisecond
	m1 := meterOn(t, n.URL(), Config{DefaultLimit: 100, FlushInterval: flush})
	m2 := meterOn(t, n.URL(), Config{DefaultLimit: 100, FlushInterval: flush})
	rd := readerOn(t, n.URL(), 100)
	ctx := context.Background()
	require.False(t, reserveOrRefuse(t, m1, "storm", "p-1", 100))
	require.True(t, reserveOrRefuse(t, m1, "storm", "p-1", 1))
	require.True(t, reserveOrRefuse(t, m2, "storm", "p-1", 1))
	require.NoError(t, m1.Flush(ctx))
	require.NoError(t, m2.Flush(ctx))

	_, js := testenv.Connect(t, n.URL())
	st, err := js.Stream(ctx, "KV_"+BucketUsage)
	require.NoError(t, err)
	writes := func() uint64 {
		info, err := st.Info(ctx)
		require.NoError(t, err)
		return info.State.LastSeq
	}
	before := writes()
	start := time.Now()
	const requests, size = 4000, 50
	var wg sync.WaitGroup
	for g := range 8 {
		m := m1
		if g%2 == 1 {
			m = m2
		}
		wg.Go(func() {
			for range requests / 8 {
				if !reserveOrRefuse(t, m, "storm", "p-1", size) {
					t.Error("a request past the quota was accepted")
					return
				}
			}
		})
	}
	wg.Wait()
	var u AccountUsage
	require.Eventually(t, func() bool {
		u, err = rd.Account(ctx, "storm", time.Now())
		require.NoError(t, err)
		return u.Refused == requests*size+2
	}, 5*time.Second, 20*time.Millisecond, "the refusals never all showed: %d", u.Refused)
	elapsed := time.Since(start)
	// Each meter writes the key at most once per flush (plus a first partial one).
	bound := 2 * (uint64(elapsed/flush) + 2)
	got := writes() - before
	t.Logf("%d refused requests in %s: %d writes to the usage bucket (bound %d)", requests, elapsed, got, bound)
	assert.LessOrEqual(t, got, bound, "a write per refused request, or close to it")
	assert.Equal(t, map[string]int64{ReasonQuota: requests*size + 2}, u.RefusedByReason)
	assert.EqualValues(t, 100, u.Events)
}

// Counts added before the counter is bound to the bucket wait in memory and are written
// at the first flush after; a process's counter and its meter add to the same key exactly.
func TestRefusalCounterBindsLate(t *testing.T) {
	n := testenv.StartNATS(t)
	ctx := context.Background()
	c := NewRefusalCounter(nil)
	c.Add("acct", "p-1", ReasonLimits, 1, 0)
	c.Add("acct", "p-1", ReasonTooLarge, 3, 0)
	c.Add("", "p-1", ReasonTooLarge, 3, 0) // no account: not metered, not counted
	require.NoError(t, c.Flush(ctx), "unbound: nothing to write yet")
	_, js := testenv.Connect(t, n.URL())
	require.NoError(t, c.Open(ctx, js, 1))
	m := meterOn(t, n.URL(), Config{DefaultLimit: 0})
	m.Refused("acct", "p-1", ReasonTooLarge, 2)
	require.NoError(t, c.Flush(ctx))
	require.NoError(t, m.Flush(ctx))
	u, err := readerOn(t, n.URL(), 0).Account(ctx, "acct", time.Now())
	require.NoError(t, err)
	assert.Equal(t, map[string]int64{ReasonLimits: 1, ReasonTooLarge: 5}, u.RefusedByReason)
	assert.Nil(t, u.RefusingSince, "unlimited: never refusing for the quota")
}
