package usage

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/otelcol-svc/otelcol-svc/internal/streams"
)

// Config tunes a Meter. The zero value of every field but DefaultLimit means its default.
type Config struct {
	// DefaultLimit is the records an account may have accepted per calendar month (UTC)
	// when it has no override (SVC_FREE_TIER_EVENTS); 0 means unlimited.
	DefaultLimit int64
	// Replicas of the buckets when this meter creates them.
	Replicas int
	// LeaseTTL is how long a lease may be drawn on before its unused part goes back
	// (default 250 ms). It bounds how long a request near the limit may wait for other
	// processes' leases to come back.
	LeaseTTL time.Duration
	// MaxLease caps one lease (default 100,000 records). A lease starts small and
	// doubles each time one is used up before its TTL, so it follows the account's rate:
	// about one KV write per TTL per busy account and process, and a crashed process
	// over-counts by about what it would have accepted in a TTL or two.
	MaxLease int64
	// LeaseShare: a lease is at most 1/LeaseShare of what the account has left (default
	// 16), so leases shrink as the limit nears.
	LeaseShare int64
	// MinLease: below this many records a lease is not worth it and every request goes
	// to KV (default 16). With the defaults, the last ~16×16 records of a limit are
	// counted request by request.
	MinLease int64
	// FlushInterval is how often per-day counts go to KV (default 1 s).
	FlushInterval time.Duration
	// Clock gives the calendar time (month, day, reset); tests inject one. Lease timing
	// uses the real clock: it is about network round-trips, not the calendar.
	Clock func() time.Time
	// OnNotice sends a notice (in its own goroutine, within ctx): across all meters it is
	// called once per account, month and threshold, and again (by any meter) when it
	// returned an error or its caller died before it returned, NoticeTimeout after. It
	// must be idempotent (the exporter publishes with a msg-id); see noticedelivery.go.
	OnNotice func(ctx context.Context, n Notice) error
	// NoticeTimeout is how long a claimed notice may stay unsent before another meter
	// sends it (default 30 s; doubled after each failed try, up to an hour). It is kept
	// well under the output streams' duplicate window (2 min), so that a notice sent just
	// before its sender died is dropped as a duplicate when sent again.
	NoticeTimeout time.Duration
	// OnError receives background errors (flushes, settlements) for logging.
	OnError func(error)
}

func (c *Config) fill() {
	if c.LeaseTTL <= 0 {
		c.LeaseTTL = 250 * time.Millisecond
	}
	if c.MaxLease <= 0 {
		c.MaxLease = 100_000
	}
	if c.LeaseShare <= 0 {
		c.LeaseShare = 16
	}
	if c.MinLease <= 0 {
		c.MinLease = 16
	}
	if c.FlushInterval <= 0 {
		c.FlushInterval = time.Second
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	if c.NoticeTimeout <= 0 {
		c.NoticeTimeout = 30 * time.Second
	}
}

// ErrNoAccount is returned for a request whose project has no account: the caller must
// decide (the mirror's key entries carry the account since the control plane writes it).
var ErrNoAccount = errors.New("usage: no account to meter")

// Gate is what the ingest path needs; *Meter and Nop implement it.
type Gate interface {
	Reserve(ctx context.Context, account, project string, n int64) (Reservation, error)
}

// Nop meters nothing and refuses nothing (metering off, and the benchmark's reference).
type Nop struct{}

// Reserve always succeeds.
func (Nop) Reserve(context.Context, string, string, int64) (Reservation, error) {
	return Reservation{}, nil
}

// monthValue is the JSON of a month key. Claimed counts records accepted (or reserved
// and not yet committed) outside leases, plus the used part of every settled lease.
// Leases are the outstanding grants by meter id; their records are spoken for but not yet
// known to be used. What is left for new requests is limit − claimed − Σ leases.
type monthValue struct {
	Claimed int64            `json:"claimed"`
	Leases  map[string]lease `json:"leases,omitempty"`
}

type lease struct {
	N int64 `json:"n"`
	// Exp is when the holder stops drawing on it, unix ms by the holder's clock.
	Exp int64 `json:"exp"`
}

func (v monthValue) leased() int64 {
	var s int64
	for _, l := range v.Leases {
		s += l.N
	}
	return s
}

// Meter counts accepted records per account and month in JetStream KV, shared by every
// process that opens one on the same NATS, and refuses what would pass the limit.
type Meter struct {
	cfg    Config
	id     string
	kv     jetstream.KeyValue
	limits *limitTable

	mu       sync.Mutex
	accounts map[amID]*accountMonth
	days     map[dayID]int64 // committed records not yet flushed
	// refusals counts refused records (quota here, the rest through Refused), written
	// with the day counts.
	refusals *RefusalCounter

	cancel  context.CancelFunc
	bg      sync.WaitGroup
	notices sync.WaitGroup // OnNotice calls and notice writes in flight
	nw      *noticeWatch
	closed  sync.Once
}

// amID and dayID are map keys that cost no allocation on the request path; the KV key
// strings are built once per account and month, and per flush.
type amID struct {
	account string
	month   int // year*12 + month-1
}

type dayID struct {
	account, project string
	date             int // yyyymmdd
}

// accountMonth is this meter's view of one account's month: its lease, if any.
type accountMonth struct {
	mu      sync.Mutex
	key     string
	account string
	month   time.Time // start of the month
	// gen counts leases; a reservation drawn on lease gen g can be handed back locally
	// only while the lease is still gen g.
	gen      uint64
	granted  int64     // size of the current lease in KV (0: none)
	used     int64     // drawn on it (reserved, not refunded)
	deadline time.Time // real time after which it is no longer drawn on
	noticed  [2]bool   // 80 and 100 already tried by this meter
	// next is the size of the next lease before the limit's share caps it: doubled when
	// a lease runs out within its TTL, else what the last one saw used (times two).
	next int64
	// free is what the account had outside all leases at this meter's last write.
	free    int64
	touched time.Time
	// evicted: dropped from Meter.accounts; a Reserve that got it just before must take
	// the new one, or its lease would be settled by nobody.
	evicted bool
	// blockedUntil: until then, requests that do not fit in blockedLimit − blockedUsed
	// (the state of the last refusal, when nothing was leased) are refused from memory.
	blockedUntil              time.Time
	blockedUsed, blockedLimit int64
}

// Open starts a meter: binds the buckets, loads the limit overrides and watches them.
func Open(ctx context.Context, js jetstream.JetStream, cfg Config) (*Meter, error) {
	cfg.fill()
	kv, err := openUsageBucket(ctx, js, cfg.Replicas)
	if err != nil {
		return nil, err
	}
	lkv, err := openLimitsBucket(ctx, js, cfg.Replicas)
	if err != nil {
		return nil, err
	}
	var id [8]byte
	_, _ = rand.Read(id[:])
	m := &Meter{
		cfg: cfg, id: hex.EncodeToString(id[:]), kv: kv,
		accounts: map[amID]*accountMonth{}, days: map[dayID]int64{},
		refusals: NewRefusalCounter(cfg.Clock),
	}
	m.refusals.kv = kv
	m.limits = &limitTable{def: cfg.DefaultLimit, overrides: map[string]int64{}, changed: m.limitChanged}
	bctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	ready := make(chan struct{})
	if err := m.limits.watch(bctx, lkv, ready); err != nil {
		cancel()
		return nil, fmt.Errorf("watch limits: %w", err)
	}
	select {
	case <-ready:
	case <-ctx.Done():
		cancel()
		return nil, ctx.Err()
	}
	if err := m.watchNotices(bctx); err != nil {
		cancel()
		return nil, fmt.Errorf("watch notices: %w", err)
	}
	m.bg.Add(1)
	go m.background(bctx)
	return m, nil
}

// Limit is account's current monthly limit (0: unlimited).
func (m *Meter) Limit(account string) int64 { return m.limits.of(account) }

// Refused counts n records of project refused for reason by a check other than the
// quota's (the rate limit, a size limit), for the usage answers' refused_by_reason.
// Quota refusals are counted by Reserve itself. Memory only; written each flush.
func (m *Meter) Refused(account, project, reason string, n int64) {
	m.refusals.Add(account, project, reason, n, m.limits.of(account))
}

// Reservation is a request's records, counted against its account's month. Exactly one
// of Commit (the records were stored) or Refund (they were not) must follow. The zero
// Reservation (from Nop) does nothing.
type Reservation struct {
	m       *Meter
	am      *accountMonth
	gen     uint64 // 0: counted in Claimed directly; else drawn on that lease
	n       int64
	project string
	day     time.Time
	// Remaining is what the account had left after this request, as this meter knew it
	// (for a RateLimit-Remaining style header); -1 when unlimited.
	Remaining int64
}

// Commit records that the reserved records were stored: they stay counted and go into the
// per-day count of their project.
func (r Reservation) Commit() {
	if r.m == nil || r.n == 0 {
		return
	}
	y, mo, d := r.day.Date()
	k := dayID{account: r.am.account, project: r.project, date: y*10000 + int(mo)*100 + d}
	r.m.mu.Lock()
	r.m.days[k] += r.n
	r.m.mu.Unlock()
}

// CommitStored is Commit for a request of which only stored records were added: the
// rest are refunded. JetStream drops a retried request's records as duplicates (same
// Nats-Msg-Id within the stream's duplicate window), and those were counted by the
// request that stored them. stored is clamped to the reservation's size.
func (r Reservation) CommitStored(ctx context.Context, stored int64) error {
	stored = min(max(stored, 0), r.n)
	rest := r
	rest.n -= stored
	r.n = stored
	r.Commit()
	return rest.Refund(ctx)
}

// Refund un-counts the reserved records (their storage failed).
func (r Reservation) Refund(ctx context.Context) error {
	if r.m == nil || r.n == 0 {
		return nil
	}
	am := r.am
	am.mu.Lock()
	defer am.mu.Unlock()
	am.blockedUntil = time.Time{}
	if r.gen != 0 && r.gen == am.gen && am.granted > 0 {
		am.used -= r.n
		return nil
	}
	_, err := r.m.update(ctx, am.key, func(v *monthValue) bool {
		v.Claimed = max(v.Claimed-r.n, 0)
		return true
	})
	return err
}

// Reserve counts n records of project against account's month, or refuses them all with
// a *QuotaError when they would take the account past its limit.
func (m *Meter) Reserve(ctx context.Context, account, project string, n int64) (Reservation, error) {
	if account == "" {
		return Reservation{}, ErrNoAccount
	}
	if n <= 0 {
		return Reservation{}, nil
	}
	now := m.cfg.Clock().UTC()
	var am *accountMonth
	for {
		am = m.accountMonth(account, now)
		am.mu.Lock()
		if !am.evicted {
			break
		}
		am.mu.Unlock()
	}
	defer am.mu.Unlock()
	limit := m.limits.of(account)
	res := Reservation{m: m, am: am, n: n, project: project, day: now, Remaining: -1}
	real := time.Now()
	am.touched = real
	if real.Before(am.blockedUntil) && limit == am.blockedLimit && am.blockedUsed+n > limit {
		// A blocked account's clients may keep sending: each refusal costs no KV read.
		m.refusals.Add(account, project, ReasonQuota, n, limit)
		return Reservation{}, &QuotaError{Limit: limit, Used: am.blockedUsed, Requested: n, Month: am.month, Now: now}
	}
	if am.granted > 0 && real.Before(am.deadline) && am.granted-am.used >= n {
		am.used += n
		res.gen = am.gen
		if limit > 0 {
			res.Remaining = m.remainingEstimate(am)
		}
		return res, nil
	}
	return m.reserveSlow(ctx, am, res, limit, now)
}

// reserveSlow settles this meter's lease and counts the request in one compare-and-set,
// taking a fresh lease when far from the limit. Near the limit it waits (up to about two
// lease TTLs) for other processes' leases to come back before refusing, so no quota stays
// stranded in a lease while requests are refused.
func (m *Meter) reserveSlow(ctx context.Context, am *accountMonth, res Reservation, limit int64, now time.Time) (Reservation, error) {
	n := res.n
	waitUntil := time.Now().Add(2*m.cfg.LeaseTTL + 50*time.Millisecond)
	backoff := 2 * time.Millisecond
	for {
		var (
			accepted bool
			newLease int64
			after    monthValue
			liveElse bool
		)
		real := time.Now()
		v, err := m.update(ctx, am.key, func(v *monthValue) bool {
			changed := m.settleInto(v, am, real)
			avail := int64(math.MaxInt64)
			if limit > 0 {
				avail = limit - v.Claimed - v.leased()
			}
			accepted, newLease, liveElse = false, 0, false
			if avail >= n {
				accepted = true
				v.Claimed += n
				newLease = m.leaseSize(am, avail-n, limit)
				if newLease > 0 {
					if v.Leases == nil {
						v.Leases = map[string]lease{}
					}
					v.Leases[m.id] = lease{N: newLease, Exp: real.Add(m.cfg.LeaseTTL).UnixMilli()}
				}
				return true
			}
			// Leases still in their TTL (plus one TTL for their holders to settle them)
			// may come back unused: worth waiting for if they could make the request fit.
			possible := avail
			for id, l := range v.Leases {
				if id != m.id && real.UnixMilli() < l.Exp+m.cfg.LeaseTTL.Milliseconds() {
					possible += l.N
				}
			}
			liveElse = possible >= n
			return changed
		})
		if err != nil {
			return Reservation{}, err
		}
		after = v
		// Whatever the outcome, our old lease is settled now (or was taken from us).
		am.sizeNext(real)
		am.gen++
		am.granted, am.used = 0, 0
		if accepted {
			if newLease > 0 {
				am.gen++
				am.granted, am.used = newLease, 0
				am.deadline = real.Add(m.cfg.LeaseTTL)
			}
			if limit > 0 {
				am.free = max(limit-after.Claimed-after.leased(), 0)
				res.Remaining = am.free + am.granted
				m.checkNotices(am, after.Claimed, limit, false)
			}
			return res, nil
		}
		if liveElse && time.Now().Before(waitUntil) {
			t := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
				t.Stop()
				return Reservation{}, ctx.Err()
			case <-t.C:
			}
			backoff = min(backoff*2, 25*time.Millisecond)
			continue
		}
		m.checkNotices(am, after.Claimed, limit, true)
		if len(after.Leases) == 0 {
			// Everything is claimed and nothing leased: only a refund or a new limit can
			// free records, so refuse what does not fit without asking KV for a while.
			am.blockedUntil = time.Now().Add(m.cfg.LeaseTTL)
			am.blockedUsed, am.blockedLimit = after.Claimed, limit
		}
		m.refusals.Add(am.account, res.project, ReasonQuota, n, limit)
		return Reservation{}, &QuotaError{
			Limit: limit, Used: after.Claimed + after.leased(), Requested: n,
			Month: am.month, Now: now,
		}
	}
}

// settleInto folds this meter's lease into Claimed (its used part) and removes it, and
// folds leases whose holder must be gone (ten TTLs past their end) as fully used: what
// they drew on is unknown, and over-counting is the side that never lets an account past
// its limit. Reports whether v changed.
func (m *Meter) settleInto(v *monthValue, am *accountMonth, real time.Time) bool {
	changed := false
	if l, ok := v.Leases[m.id]; ok {
		if am.granted > 0 {
			v.Claimed += min(am.used, l.N)
		} else {
			// Ours in KV but not here: a write that timed out yet was applied. What was
			// drawn on it is unknown; count it all.
			v.Claimed += l.N
		}
		delete(v.Leases, m.id)
		changed = true
	}
	for id, l := range v.Leases {
		if real.UnixMilli() > l.Exp+10*m.cfg.LeaseTTL.Milliseconds() {
			v.Claimed += l.N
			delete(v.Leases, id)
			changed = true
		}
	}
	return changed
}

// leaseSize is how much to take beyond the request: what this meter's traffic on the
// account needs for a TTL (am.next), at most a share of what is left, so that leases
// shrink near the limit and stop below MinLease (every request then goes to KV).
func (m *Meter) leaseSize(am *accountMonth, left, limit int64) int64 {
	l := min(max(am.next, 4*m.cfg.MinLease), m.cfg.MaxLease)
	if limit > 0 {
		l = min(l, left/m.cfg.LeaseShare)
	}
	if l < m.cfg.MinLease {
		return 0
	}
	return l
}

// sizeNext learns from the lease being settled how big the next one should be. Called
// with am.mu held, before the lease is cleared.
func (am *accountMonth) sizeNext(real time.Time) {
	if am.granted == 0 {
		return
	}
	if real.Before(am.deadline) { // used up within its TTL: the rate is higher
		am.next = 2 * am.granted
	} else {
		am.next = 2 * am.used
	}
}

// remainingEstimate is what the account has left as far as this meter knows without a
// round-trip: the free pool at its last write plus what is left of its lease.
func (m *Meter) remainingEstimate(am *accountMonth) int64 {
	return am.free + am.granted - am.used
}

// update applies f to the month value at key with compare-and-set, retrying on a
// conflicting write until ctx ends: a count or a lease given back must not be dropped
// because the account is busy. f returns whether it changed anything (nothing is written
// otherwise). Returns the value as left.
func (m *Meter) update(ctx context.Context, key string, f func(*monthValue) bool) (monthValue, error) {
	var v monthValue
	_, err := streams.UpdateKV(ctx, m.kv, key, func(old []byte, exists bool) ([]byte, error) {
		v = monthValue{}
		if exists {
			if err := json.Unmarshal(old, &v); err != nil {
				return nil, fmt.Errorf("%s holds %q: %w", key, old, err)
			}
		}
		if !f(&v) {
			return nil, streams.ErrKVUnchanged
		}
		return json.Marshal(v)
	}, streams.KVAttempts(0))
	if err != nil {
		return v, fmt.Errorf("usage: %w", err)
	}
	return v, nil
}

func (m *Meter) accountMonth(account string, now time.Time) *accountMonth {
	y, mo, _ := now.UTC().Date()
	id := amID{account: account, month: y*12 + int(mo) - 1}
	m.mu.Lock()
	defer m.mu.Unlock()
	am := m.accounts[id]
	if am == nil {
		start := MonthStart(now)
		am = &accountMonth{key: monthKey(account, Month(start)), account: account, month: start, touched: time.Now()}
		m.accounts[id] = am
	}
	return am
}

// limitChanged makes every lease of account end now: the next request settles it and
// decides against the new limit.
func (m *Meter) limitChanged(account string) {
	m.mu.Lock()
	var ams []*accountMonth
	for _, am := range m.accounts {
		if am.account == account {
			ams = append(ams, am)
		}
	}
	m.mu.Unlock()
	for _, am := range ams {
		am.mu.Lock()
		am.deadline = time.Time{}
		am.blockedUntil = time.Time{}
		for i := range am.noticed {
			am.noticed[i] = false
		}
		am.mu.Unlock()
	}
}

// background settles leases that ended (so their unused part is free for other
// processes within a TTL even when this one gets no more traffic), flushes the per-day
// counts, forgets idle accounts, and sends notices whose sender is overdue.
func (m *Meter) background(ctx context.Context) {
	defer m.bg.Done()
	settle := time.NewTicker(max(m.cfg.LeaseTTL/4, 5*time.Millisecond))
	flush := time.NewTicker(m.cfg.FlushInterval)
	retry := time.NewTicker(min(m.cfg.NoticeTimeout/4, time.Second))
	defer settle.Stop()
	defer flush.Stop()
	defer retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-settle.C:
			m.settleExpired(ctx, false)
		case <-flush.C:
			m.report(m.flushDays(ctx))
			m.report(m.refusals.Flush(ctx))
		case <-retry.C:
			m.retryNotices(ctx)
		}
	}
}

func (m *Meter) report(err error) {
	if err != nil && m.cfg.OnError != nil {
		m.cfg.OnError(err)
	}
}

// settleExpired gives back every ended lease (all leases when all is set), and drops
// account states idle for a while so memory follows the active accounts.
func (m *Meter) settleExpired(ctx context.Context, all bool) {
	real := time.Now()
	m.mu.Lock()
	var ams []*accountMonth
	for k, am := range m.accounts {
		ams = append(ams, am)
		if !all {
			am.mu.Lock()
			if am.granted == 0 && real.Sub(am.touched) > 10*time.Minute {
				delete(m.accounts, k)
				am.evicted = true
			}
			am.mu.Unlock()
		}
	}
	m.mu.Unlock()
	for _, am := range ams {
		am.mu.Lock()
		if am.granted > 0 && (all || !real.Before(am.deadline)) {
			v, err := m.update(ctx, am.key, func(v *monthValue) bool { return m.settleInto(v, am, real) })
			if err != nil {
				m.report(err)
			} else {
				am.sizeNext(real)
				am.gen++
				am.granted, am.used = 0, 0
				if limit := m.limits.of(am.account); limit > 0 {
					am.free = max(limit-v.Claimed-v.leased(), 0)
					m.checkNotices(am, v.Claimed, limit, false)
				}
			}
		}
		am.mu.Unlock()
	}
}

// flushDays adds the committed records of each project and day to their KV counters;
// what fails is added again at the next flush.
func (m *Meter) flushDays(ctx context.Context) error {
	return streams.FlushPending(&m.mu, &m.days, func(k dayID, n int64) error {
		key := dayKey(k.account, fmt.Sprintf("%04d-%02d", k.date/10000, k.date/100%100), fmt.Sprintf("%02d", k.date%100), k.project)
		return m.addDay(ctx, key, n)
	}, func(failed, newer int64) int64 { return failed + newer })
}

func (m *Meter) addDay(ctx context.Context, key string, n int64) error {
	_, err := streams.UpdateKV(ctx, m.kv, key, func(old []byte, _ bool) ([]byte, error) {
		var cur int64
		fmt.Sscan(string(old), &cur) //nolint:errcheck // a damaged counter restarts from 0
		return fmt.Appendf(nil, "%d", cur+n), nil
	}, streams.KVAttempts(0))
	return err
}

// Flush gives back every lease and writes the per-day counts now: after it, the month
// counts in KV equal what this meter accepted and did not refund.
func (m *Meter) Flush(ctx context.Context) error {
	m.settleExpired(ctx, true)
	m.notices.Wait()
	return errors.Join(m.flushDays(ctx), m.refusals.Flush(ctx))
}

// Close flushes and stops the meter. A process that dies without Close loses no count:
// its leases are counted as fully used (an over-count bounded by its leases).
func (m *Meter) Close(ctx context.Context) error {
	var err error
	m.closed.Do(func() {
		m.cancel()
		m.bg.Wait()
		m.settleExpired(ctx, true)
		m.notices.Wait()
		err = errors.Join(m.flushDays(ctx), m.refusals.Flush(ctx))
	})
	return err
}
