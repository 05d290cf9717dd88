package usage

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// meterOn opens a meter with its own NATS connection, as a receiver process would.
func meterOn(t *testing.T, url string, cfg Config) *Meter {
	t.Helper()
	_, js := testenv.Connect(t, url)
	m, err := Open(context.Background(), js, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close(context.Background()) })
	return m
}

func readerOn(t *testing.T, url string, def int64) *Reader {
	t.Helper()
	_, js := testenv.Connect(t, url)
	r, err := OpenReader(context.Background(), js, def, 1)
	require.NoError(t, err)
	return r
}

// fakeClock is the calendar the meters see; tests move it.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

// Three receivers take 10,050 records for one account, in requests of 50 and of 1 from
// many goroutines: the accepted total ends within the 0.1% bound of the 10,000 limit,
// no refused request is counted, and the counts in KV equal what was accepted.
func TestThreeMetersStopAtTheLimit(t *testing.T) {
	n := testenv.StartNATS(t)
	var meters []*Meter
	for range 3 {
		meters = append(meters, meterOn(t, n.URL(), Config{DefaultLimit: 10_000}))
	}
	var sizes []int64
	for range 195 {
		sizes = append(sizes, 50)
	}
	for range 300 {
		sizes = append(sizes, 1)
	}
	rand.Shuffle(len(sizes), func(i, j int) { sizes[i], sizes[j] = sizes[j], sizes[i] })
	var sent int64
	for _, s := range sizes {
		sent += s
	}
	require.EqualValues(t, 10_050, sent)

	work := make(chan int64)
	var accepted, refused, perProject [2]atomic.Int64
	var wg sync.WaitGroup
	for g := range 24 {
		wg.Go(func() {
			m := meters[g%3]
			project := []string{"p-shop", "p-blog"}[g%2]
			for s := range work {
				r, err := m.Reserve(context.Background(), "acct-1", project, s)
				var qe *QuotaError
				switch {
				case errors.As(err, &qe):
					refused[g%2].Add(s)
					assert.Positive(t, qe.RetryAfter())
				case err != nil:
					t.Error(err)
				default:
					r.Commit()
					accepted[g%2].Add(s)
					perProject[g%2].Add(s)
				}
			}
		})
	}
	for _, s := range sizes {
		work <- s
	}
	close(work)
	wg.Wait()

	total := accepted[0].Load() + accepted[1].Load()
	t.Logf("accepted %d of %d", total, sent)
	require.GreaterOrEqual(t, total, int64(10_000))
	require.LessOrEqual(t, total, int64(10_010))
	require.EqualValues(t, sent, total+refused[0].Load()+refused[1].Load())

	for _, m := range meters {
		require.NoError(t, m.Flush(context.Background()))
	}
	u, err := readerOn(t, n.URL(), 10_000).Account(context.Background(), "acct-1", time.Now())
	require.NoError(t, err)
	require.Equal(t, total, u.Events, "the month count in KV is the accepted total")
	require.Zero(t, u.Pending)
	require.EqualValues(t, 10_000-total, max(u.Remaining, 0))
	got := map[string]int64{}
	var days int64
	for _, p := range u.Projects {
		got[p.ID] = p.Events
	}
	for _, d := range u.Days {
		days += d.Events
	}
	require.Equal(t, map[string]int64{"p-shop": perProject[0].Load(), "p-blog": perProject[1].Load()}, got)
	require.Equal(t, total, days)
	require.Len(t, u.Notices, 2, "80%% and 100%% were both reached")
}

// A meter that closes and a new one (a restarted receiver) continue the same count; a
// meter that dies without closing never makes the count lower than what it accepted.
func TestCountSurvivesRestartAndCrash(t *testing.T) {
	n := testenv.StartNATS(t)
	ctx := context.Background()
	cfg := Config{DefaultLimit: 1000}

	m1 := meterOn(t, n.URL(), cfg)
	for range 30 {
		r, err := m1.Reserve(ctx, "acct-r", "p", 10)
		require.NoError(t, err)
		r.Commit()
	}
	require.NoError(t, m1.Close(ctx))

	m2 := meterOn(t, n.URL(), cfg)
	_, err := m2.Reserve(ctx, "acct-r", "p", 701)
	var qe *QuotaError
	require.ErrorAs(t, err, &qe, "300 of 1000 are used: 701 more must be refused")
	r, err := m2.Reserve(ctx, "acct-r", "p", 700)
	require.NoError(t, err)
	r.Commit()

	// A crash: the process holds a lease and its connection goes away without Close.
	nc, js := testenv.Connect(t, n.URL())
	m3, err := Open(ctx, js, Config{DefaultLimit: 1000, LeaseTTL: 50 * time.Millisecond})
	require.NoError(t, err)
	r, err = m3.Reserve(ctx, "acct-c", "p", 100)
	require.NoError(t, err)
	r.Commit()
	r, err = m3.Reserve(ctx, "acct-c", "p", 20) // drawn on its lease
	require.NoError(t, err)
	r.Commit()
	m3.cancel() // stop its settling, as a killed process would
	m3.bg.Wait()
	nc.Close()

	m4 := meterOn(t, n.URL(), Config{DefaultLimit: 1000, LeaseTTL: 50 * time.Millisecond})
	_, err = m4.Reserve(ctx, "acct-c", "p", 881)
	require.ErrorAs(t, err, &qe, "120 were accepted by the crashed process: 881 more must be refused")
}

// The month rolls over at 00:00 UTC on the 1st: the count and the notices start again.
func TestMonthRollover(t *testing.T) {
	n := testenv.StartNATS(t)
	ctx := context.Background()
	clock := &fakeClock{t: time.Date(2026, 11, 30, 23, 59, 58, 0, time.UTC)}
	var mu sync.Mutex
	var notices []Notice
	m := meterOn(t, n.URL(), Config{DefaultLimit: 100, Clock: clock.Now, OnNotice: func(_ context.Context, no Notice) error {
		mu.Lock()
		notices = append(notices, no)
		mu.Unlock()
		return nil
	}})

	r, err := m.Reserve(ctx, "acct-m", "p", 100)
	require.NoError(t, err)
	r.Commit()
	_, err = m.Reserve(ctx, "acct-m", "p", 1)
	var qe *QuotaError
	require.ErrorAs(t, err, &qe)
	require.Equal(t, 2, qe.RetryAfter())
	require.Equal(t, "this account has used its 100 events for November 2026; the count resets at 2026-12-01T00:00:00Z", qe.Error())

	clock.Set(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	r, err = m.Reserve(ctx, "acct-m", "p", 85)
	require.NoError(t, err, "a new month starts from zero")
	r.Commit()
	require.NoError(t, m.Flush(ctx))

	mu.Lock()
	got := fmt.Sprint(notices)
	var keys []string
	for _, no := range notices {
		keys = append(keys, fmt.Sprintf("%s/%d", no.Month, no.Percent))
	}
	mu.Unlock()
	require.ElementsMatch(t, []string{"2026-11/80", "2026-11/100", "2026-12/80"}, keys, got)

	rd := readerOn(t, n.URL(), 100)
	nov, err := rd.Account(ctx, "acct-m", time.Date(2026, 11, 15, 0, 0, 0, 0, time.UTC))
	require.NoError(t, err)
	require.EqualValues(t, 100, nov.Events)
	require.Equal(t, []Day{{Date: "2026-11-30", Events: 100}}, nov.Days)
	dec, err := rd.Account(ctx, "acct-m", clock.Now())
	require.NoError(t, err)
	require.EqualValues(t, 85, dec.Events)
	require.EqualValues(t, 15, dec.Remaining)
	require.Len(t, dec.Notices, 1)
	require.Equal(t, "shop: 80% of this month's 100 events used; resets 2027-01-01", dec.Notices[0].Text("shop"))
}

// accounts set-limit: a blocked account is let through by every receiver within a second.
func TestSetLimitReachesEveryMeter(t *testing.T) {
	n := testenv.StartNATS(t)
	ctx := context.Background()
	var meters []*Meter
	for range 3 {
		meters = append(meters, meterOn(t, n.URL(), Config{DefaultLimit: 10}))
	}
	r, err := meters[0].Reserve(ctx, "acct-l", "p", 10)
	require.NoError(t, err)
	r.Commit()
	for _, m := range meters {
		_, err := m.Reserve(ctx, "acct-l", "p", 1)
		var qe *QuotaError
		require.ErrorAs(t, err, &qe)
	}

	_, js := testenv.Connect(t, n.URL())
	limits, err := OpenLimits(ctx, js, 1)
	require.NoError(t, err)
	require.NoError(t, limits.Set(ctx, "acct-l", 20))
	for i, m := range meters {
		require.Eventually(t, func() bool {
			_, err := m.Reserve(ctx, "acct-l", "p", 1)
			return err == nil
		}, time.Second, 10*time.Millisecond, "meter %d", i)
	}
	list, err := limits.List(ctx)
	require.NoError(t, err)
	require.Equal(t, map[string]int64{"acct-l": 20}, list)

	// Another account keeps the default.
	_, err = meters[1].Reserve(ctx, "acct-other", "p", 11)
	var qe *QuotaError
	require.ErrorAs(t, err, &qe)

	// Back to the default: 13 are used, so the next request is refused again.
	require.NoError(t, limits.Delete(ctx, "acct-l"))
	for i, m := range meters {
		require.Eventually(t, func() bool { return m.Limit("acct-l") == 10 }, time.Second, 10*time.Millisecond, "meter %d", i)
		_, err := m.Reserve(ctx, "acct-l", "p", 1)
		require.ErrorAs(t, err, &qe)
	}
}

// 80% and 100% are told once each, by one of the meters, however many race past them.
func TestNoticesOnceUnderConcurrency(t *testing.T) {
	n := testenv.StartNATS(t)
	ctx := context.Background()
	var mu sync.Mutex
	got := map[int]int{}
	on := func(_ context.Context, no Notice) error {
		mu.Lock()
		got[no.Percent]++
		mu.Unlock()
		return nil
	}
	var meters []*Meter
	for range 3 {
		meters = append(meters, meterOn(t, n.URL(), Config{DefaultLimit: 500, OnNotice: on}))
	}
	var wg sync.WaitGroup
	for g := range 12 {
		wg.Go(func() {
			for {
				r, err := meters[g%3].Reserve(ctx, "acct-n", "p", 3)
				if err != nil {
					var qe *QuotaError
					assert.ErrorAs(t, err, &qe)
					return
				}
				r.Commit()
			}
		})
	}
	wg.Wait()
	for _, m := range meters {
		require.NoError(t, m.Close(ctx)) // waits for notices in flight
	}
	require.Equal(t, map[int]int{80: 1, 100: 1}, got)
}

// A refunded request (its storage failed) does not stay counted, whether it was counted
// directly, drawn on a lease, or drawn on a lease that was settled since.
func TestRefund(t *testing.T) {
	n := testenv.StartNATS(t)
	ctx := context.Background()
	m := meterOn(t, n.URL(), Config{DefaultLimit: 100})
	other := meterOn(t, n.URL(), Config{DefaultLimit: 100})

	r1, err := m.Reserve(ctx, "acct-f", "p", 60)
	require.NoError(t, err)
	_, err = other.Reserve(ctx, "acct-f", "p", 50)
	var qe *QuotaError
	require.ErrorAs(t, err, &qe)
	require.NoError(t, r1.Refund(ctx))
	r2, err := m.Reserve(ctx, "acct-f", "p", 40)
	require.NoError(t, err, "the refunded 60 are free again at once on the meter that refunded")
	r2.Commit()
	// The other meter refused a moment ago and nothing was leased: it refuses from
	// memory for up to a lease TTL, then sees the refund.
	require.Eventually(t, func() bool {
		r, err := other.Reserve(ctx, "acct-f", "p", 60)
		if err == nil {
			r.Commit()
		}
		return err == nil
	}, time.Second, 10*time.Millisecond)
	_, err = other.Reserve(ctx, "acct-f", "p", 1)
	require.ErrorAs(t, err, &qe, "100 of 100 are used")

	// Unlimited: requests after the first are drawn on the meter's lease.
	rd := readerOn(t, n.URL(), 0)
	u := meterOn(t, n.URL(), Config{DefaultLimit: 0})
	var kept []Reservation
	for range 3 {
		r, err := u.Reserve(ctx, "acct-u", "p", 10)
		require.NoError(t, err)
		kept = append(kept, r)
	}
	require.NotZero(t, kept[1].gen, "the second request is drawn on a lease")
	require.NoError(t, kept[1].Refund(ctx))
	kept[0].Commit()
	require.NoError(t, u.Flush(ctx)) // settles the lease while kept[2] is in flight
	require.NoError(t, kept[2].Refund(ctx))
	a, err := rd.Account(ctx, "acct-u", time.Now())
	require.NoError(t, err)
	require.EqualValues(t, 10, a.Events)
	require.EqualValues(t, -1, a.Remaining)
	p, err := rd.Project(ctx, "acct-u", "p", time.Now())
	require.NoError(t, err)
	require.EqualValues(t, 10, p.Events, "only the committed request is in the day counts")
	require.Equal(t, Month(time.Now()), p.Month)
	require.Zero(t, p.Limit)
	require.Len(t, p.Days, 1)
}

func TestQuotaMessage(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	e := &QuotaError{Limit: 10_000, Used: 10_000, Requested: 50, Month: MonthStart(now), Now: now}
	require.Equal(t, "this account has used its 10,000 events for November 2026; the count resets at 2026-12-01T00:00:00Z", e.Error())
	require.Equal(t, 7*24*3600+12*3600, e.RetryAfter())
	e.Used = 9_990
	require.Equal(t, "this request's 50 records would take this account past its 10,000 events for November 2026 (9,990 used); the count resets at 2026-12-01T00:00:00Z", e.Error())
}

func TestOddIDsGetTheirOwnKeys(t *testing.T) {
	n := testenv.StartNATS(t)
	ctx := context.Background()
	m := meterOn(t, n.URL(), Config{DefaultLimit: 10})
	for _, acct := range []string{"a.b", "a b", "ab", "=YWI"} {
		r, err := m.Reserve(ctx, acct, "p.q", 10)
		require.NoError(t, err, acct)
		r.Commit()
	}
	require.NoError(t, m.Flush(ctx))
	a, err := readerOn(t, n.URL(), 10).Account(ctx, "a.b", time.Now())
	require.NoError(t, err)
	require.EqualValues(t, 10, a.Events)
	require.Equal(t, "p.q", a.Projects[0].ID)
}

func TestNoAccountIsAnError(t *testing.T) {
	n := testenv.StartNATS(t)
	m := meterOn(t, n.URL(), Config{DefaultLimit: 10})
	_, err := m.Reserve(context.Background(), "", "p", 1)
	require.ErrorIs(t, err, ErrNoAccount)
}

// The control plane imports this package: it must not pull in the collector.
func TestNoCollectorDependency(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	require.NoError(t, err, string(out))
	for _, dep := range strings.Fields(string(out)) {
		require.False(t, strings.HasPrefix(dep, "go.opentelemetry.io/collector"), dep)
	}
}

// Quota leased to one receiver that then goes quiet comes back to the others before they
// refuse: the account gets its whole limit, not the limit minus a stranded lease.
func TestIdleLeaseIsNotStranded(t *testing.T) {
	n := testenv.StartNATS(t)
	ctx := context.Background()
	a := meterOn(t, n.URL(), Config{DefaultLimit: 1000})
	b := meterOn(t, n.URL(), Config{DefaultLimit: 1000})

	r, err := a.Reserve(ctx, "acct-s", "p", 1)
	require.NoError(t, err)
	r.Commit()
	granted, _ := leaseOf(a, "acct-s")
	require.Positive(t, granted, "a holds a lease")
	var total int64 = 1
	for {
		_, free := leaseOf(b, "acct-s")
		free = max(free, 1)
		r, err := b.Reserve(ctx, "acct-s", "p", free)
		if err != nil {
			var qe *QuotaError
			require.ErrorAs(t, err, &qe)
			break
		}
		r.Commit()
		total += free
	}
	require.EqualValues(t, 1000, total)
}

// leaseOf is m's lease on account's current month and the free pool it last saw.
func leaseOf(m *Meter, account string) (granted, free int64) {
	am := m.accountMonth(account, time.Now())
	am.mu.Lock()
	defer am.mu.Unlock()
	return am.granted, am.free
}

// Requests whose storage fails are refunded while others race on three meters: what stays
// counted is exactly what was committed, and never more than the limit.
func TestRefundsUnderConcurrency(t *testing.T) {
	n := testenv.StartNATS(t)
	ctx := context.Background()
	var meters []*Meter
	for range 3 {
		meters = append(meters, meterOn(t, n.URL(), Config{DefaultLimit: 3000}))
	}
	var committed atomic.Int64
	var wg sync.WaitGroup
	for g := range 12 {
		wg.Go(func() {
			for i := range 200 {
				size := []int64{1, 7, 25}[i%3]
				r, err := meters[(g+i)%3].Reserve(ctx, "acct-rf", "p", size)
				var qe *QuotaError
				if errors.As(err, &qe) {
					continue
				}
				if !assert.NoError(t, err) {
					return
				}
				if (g+i)%4 == 0 { // this request's storage failed
					assert.NoError(t, r.Refund(ctx))
					continue
				}
				r.Commit()
				committed.Add(size)
			}
		})
	}
	wg.Wait()
	for _, m := range meters {
		require.NoError(t, m.Flush(ctx))
	}
	u, err := readerOn(t, n.URL(), 3000).Account(ctx, "acct-rf", time.Now())
	require.NoError(t, err)
	require.Equal(t, committed.Load(), u.Events)
	require.LessOrEqual(t, u.Events, int64(3000))
	require.Zero(t, u.Pending)
	require.Len(t, u.Projects, 1)
	require.Equal(t, committed.Load(), u.Projects[0].Events)
}

// A request partly dropped as duplicates keeps only its stored records counted, in the
// month and in the project's days, whether it was counted directly or drawn on a lease.
func TestCommitStored(t *testing.T) {
	n := testenv.StartNATS(t)
	ctx := context.Background()
	m := meterOn(t, n.URL(), Config{DefaultLimit: 100})

	r, err := m.Reserve(ctx, "acct-d", "p", 60)
	require.NoError(t, err)
	require.NoError(t, r.CommitStored(ctx, 0), "a retry JetStream stored nothing of")
	r, err = m.Reserve(ctx, "acct-d", "p", 60)
	require.NoError(t, err, "the duplicates' share is free again")
	require.NoError(t, r.CommitStored(ctx, 45))
	r, err = m.Reserve(ctx, "acct-d", "p", 55)
	require.NoError(t, err, "45 of 100 are used")
	require.NoError(t, r.CommitStored(ctx, 99), "clamped to the reservation")
	_, err = m.Reserve(ctx, "acct-d", "p", 1)
	var qe *QuotaError
	require.ErrorAs(t, err, &qe)

	u := meterOn(t, n.URL(), Config{DefaultLimit: 0})
	for range 3 {
		r, err := u.Reserve(ctx, "acct-du", "p", 10)
		require.NoError(t, err)
		require.NoError(t, r.CommitStored(ctx, 4))
	}
	require.NoError(t, m.Flush(ctx))
	require.NoError(t, u.Flush(ctx))
	rd := readerOn(t, n.URL(), 100)
	for account, want := range map[string]int64{"acct-d": 100, "acct-du": 12} {
		a, err := rd.Account(ctx, account, time.Now())
		require.NoError(t, err)
		require.Equal(t, want, a.Events, account)
		require.Zero(t, a.Pending, account)
		p, err := rd.Project(ctx, account, "p", time.Now())
		require.NoError(t, err)
		require.Equal(t, want, p.Events, "%s: the day counts hold the stored records only", account)
	}
}
