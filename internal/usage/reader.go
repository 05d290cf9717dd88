package usage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Reader serves the usage API (contract §9) from the buckets the meters write. It is
// what the control plane opens; like the whole package it needs no collector.
type Reader struct {
	kv           jetstream.KeyValue
	limits       *Limits
	defaultLimit int64
}

// OpenReader binds to (creating when missing) the usage and limits buckets.
// defaultLimit is SVC_FREE_TIER_EVENTS (0: unlimited).
func OpenReader(ctx context.Context, js jetstream.JetStream, defaultLimit int64, replicas int) (*Reader, error) {
	kv, err := openUsageBucket(ctx, js, replicas)
	if err != nil {
		return nil, err
	}
	l, err := OpenLimits(ctx, js, replicas)
	if err != nil {
		return nil, err
	}
	return &Reader{kv: kv, limits: l, defaultLimit: defaultLimit}, nil
}

// Limits is the limits writer (accounts set-limit, accounts list).
func (r *Reader) Limits() *Limits { return r.limits }

// Day is one day's accepted records.
type Day struct {
	Date   string `json:"date"` // "2026-11-23"
	Events int64  `json:"events"`
}

// ProjectUsage is one project's month.
type ProjectUsage struct {
	ID     string `json:"id"`
	Events int64  `json:"events"`
	Days   []Day  `json:"days"`
	// Refused is the project's records refused this month (requests whose records were
	// never counted, such as a body over the size limit, count as one), by reason.
	Refused         int64            `json:"refused"`
	RefusedByReason map[string]int64 `json:"refused_by_reason"`
}

// AccountUsage is an account's month.
type AccountUsage struct {
	Month string `json:"month"`
	// Events is the month's count that the limit applies to: records accepted (and
	// records of requests still being stored), exact once leases are settled, which
	// happens within a lease TTL (250 ms by default) of the last request.
	Events int64 `json:"events"`
	// Pending is records leased to receivers and not yet settled: an upper bound of how
	// far Events may still rise for requests already answered.
	Pending   int64          `json:"pending"`
	Limit     int64          `json:"limit"`     // 0: unlimited
	Remaining int64          `json:"remaining"` // -1 when unlimited
	Projects  []ProjectUsage `json:"projects"`  // projects with records this month
	Days      []Day          `json:"days"`      // summed over the projects
	Notices   []Notice       `json:"notices"`
	// Refused is records refused this month over the projects, by reason (Reason*).
	// Counts trail the refusals by up to a flush interval (1 s) per receiver.
	Refused         int64            `json:"refused"`
	RefusedByReason map[string]int64 `json:"refused_by_reason"`
	// RefusingSince, while the account refuses for its quota, is its first quota refusal
	// of the month under its current limit. "Refusing" is: the limit is used up, or a
	// request was refused for the quota within RefusingWindow (a batch that does not fit
	// in what is left is refused while smaller requests may still pass).
	RefusingSince *time.Time `json:"refusing_since,omitempty"`
}

// Account returns account's usage for the month of t. Per-day counts trail Events by up
// to a flush interval (1 s) per receiver.
func (r *Reader) Account(ctx context.Context, account string, t time.Time) (AccountUsage, error) {
	month := Month(t)
	u := AccountUsage{Month: month, Projects: []ProjectUsage{}, Days: []Day{}, Notices: []Notice{}, RefusedByReason: map[string]int64{}}
	limit, ok, err := r.limits.Get(ctx, account)
	if err != nil {
		return u, err
	}
	if !ok {
		limit = r.defaultLimit
	}
	u.Limit = limit
	e, err := r.kv.Get(ctx, monthKey(account, month))
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
	case err != nil:
		return u, err
	default:
		var v monthValue
		if err := json.Unmarshal(e.Value(), &v); err != nil {
			return u, fmt.Errorf("usage of %s: %w", account, err)
		}
		u.Events, u.Pending = v.Claimed, v.leased()
	}
	u.Remaining = -1
	if limit > 0 {
		u.Remaining = max(limit-u.Events-u.Pending, 0)
	}

	byProject := map[string]*ProjectUsage{}
	byDay := map[string]int64{}
	prefix := "d." + token(account) + "." + month + "."
	if err := r.each(ctx, prefix+">", func(key string, val []byte) {
		rest := strings.SplitN(strings.TrimPrefix(key, prefix), ".", 2)
		if len(rest) != 2 {
			return
		}
		n, err := strconv.ParseInt(string(val), 10, 64)
		if err != nil {
			return
		}
		date := month + "-" + rest[0]
		id := untoken(rest[1])
		p := projectOf(byProject, id)
		p.Events += n
		p.Days = append(p.Days, Day{Date: date, Events: n})
		byDay[date] += n
	}); err != nil {
		return u, err
	}
	if err := r.refusals(ctx, account, month, limit, t, &u, byProject); err != nil {
		return u, err
	}
	for _, p := range byProject {
		sort.Slice(p.Days, func(i, j int) bool { return p.Days[i].Date < p.Days[j].Date })
		u.Projects = append(u.Projects, *p)
	}
	sort.Slice(u.Projects, func(i, j int) bool { return u.Projects[i].ID < u.Projects[j].ID })
	for d, n := range byDay {
		u.Days = append(u.Days, Day{Date: d, Events: n})
	}
	sort.Slice(u.Days, func(i, j int) bool { return u.Days[i].Date < u.Days[j].Date })

	if err := r.each(ctx, "n."+token(account)+"."+month+".>", func(_ string, val []byte) {
		var n Notice
		if json.Unmarshal(val, &n) == nil {
			u.Notices = append(u.Notices, n)
		}
	}); err != nil {
		return u, err
	}
	sort.Slice(u.Notices, func(i, j int) bool {
		a, b := u.Notices[i], u.Notices[j]
		if !a.At.Equal(b.At) {
			return a.At.Before(b.At)
		}
		return a.Limit < b.Limit || a.Limit == b.Limit && a.Percent < b.Percent
	})
	return u, nil
}

func projectOf(byProject map[string]*ProjectUsage, id string) *ProjectUsage {
	p := byProject[id]
	if p == nil {
		p = &ProjectUsage{ID: id, Days: []Day{}, RefusedByReason: map[string]int64{}}
		byProject[id] = p
	}
	return p
}

// refusals adds the month's refusal counts to u and its projects, and decides whether
// the account is refusing now (u.Remaining must be set).
func (r *Reader) refusals(ctx context.Context, account, month string, limit int64, t time.Time, u *AccountUsage, byProject map[string]*ProjectUsage) error {
	prefix := "r." + token(account) + "." + month + "."
	var first, last time.Time
	err := r.each(ctx, prefix+">", func(key string, val []byte) {
		var v refusalValue
		if json.Unmarshal(val, &v) != nil {
			return
		}
		p := projectOf(byProject, untoken(strings.TrimPrefix(key, prefix)))
		for reason, n := range v.ByReason {
			if n <= 0 {
				continue
			}
			p.Refused += n
			p.RefusedByReason[reason] += n
			u.Refused += n
			u.RefusedByReason[reason] += n
		}
		// Only refusals under the limit in force now: a raised limit ends "refusing".
		if !v.QuotaFirst.IsZero() && limit > 0 && v.QuotaLimit == limit {
			if first.IsZero() || v.QuotaFirst.Before(first) {
				first = v.QuotaFirst
			}
			if v.QuotaLast.After(last) {
				last = v.QuotaLast
			}
		}
	})
	if err != nil {
		return err
	}
	if !first.IsZero() && (u.Remaining == 0 || t.Sub(last) < RefusingWindow) {
		since := first.UTC()
		u.RefusingSince = &since
	}
	return nil
}

// ProjectMonth is the answer of GET /api/v1/projects/{id}/usage (contract §9).
type ProjectMonth struct {
	Month  string `json:"month"`
	Events int64  `json:"events"`
	Limit  int64  `json:"limit"` // the account's
	Days   []Day  `json:"days"`
	// Refused: this project's own refused records (never another project's).
	Refused         int64            `json:"refused"`
	RefusedByReason map[string]int64 `json:"refused_by_reason"`
	// RefusingSince is the account's (AccountUsage.RefusingSince): its quota is shared
	// by all its projects, so this project's records are refused too.
	RefusingSince *time.Time `json:"refusing_since,omitempty"`
}

// Project returns one project's usage for the month of t, with its account's limit.
func (r *Reader) Project(ctx context.Context, account, project string, t time.Time) (ProjectMonth, error) {
	u, err := r.Account(ctx, account, t)
	if err != nil {
		return ProjectMonth{}, err
	}
	pm := ProjectMonth{Month: u.Month, Limit: u.Limit, Days: []Day{}, RefusedByReason: map[string]int64{}, RefusingSince: u.RefusingSince}
	for _, p := range u.Projects {
		if p.ID == project {
			pm.Events, pm.Days = p.Events, p.Days
			pm.Refused, pm.RefusedByReason = p.Refused, p.RefusedByReason
		}
	}
	return pm, nil
}

// each calls f for every key matching filter with its value.
func (r *Reader) each(ctx context.Context, filter string, f func(key string, val []byte)) error {
	w, err := r.kv.Watch(ctx, filter, jetstream.IgnoreDeletes())
	if err != nil {
		return err
	}
	defer w.Stop() //nolint:errcheck
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case e, ok := <-w.Updates():
			if !ok || e == nil {
				return nil
			}
			f(e.Key(), e.Value())
		}
	}
}
