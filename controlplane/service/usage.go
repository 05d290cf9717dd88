package service

import (
	"context"
	"strings"
	"time"

	"github.com/otelcol-svc/otelcol-svc/controlplane/store"
	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/usage"
)

// Usage answers (contract §9). The counts are the receivers' (internal/usage, in
// JetStream KV); the control plane only reads them and adds project names.

// Limit is an account's monthly limit as the API shows it. Unlimited is its own flag and
// a null count rather than 0 or -1, so a client comparing numbers cannot take "no limit"
// for "nothing left".
type Limit struct {
	Unlimited bool
	Limit     int64 // when !Unlimited
}

func limitOf(n int64) Limit { return Limit{Unlimited: n <= 0, Limit: n} }

// ProjectEvents is one owned project's month in the account's usage.
type ProjectEvents struct {
	ID     string
	Name   string
	Events int64
	// Refused: the project's records refused this month (any reason).
	Refused int64
	// Deleted: the project is gone, its records still count for the month.
	Deleted bool
}

// AccountUsage is GET /api/v1/usage: the signed-in account, over the projects it owns.
type AccountUsage struct {
	Month  string
	Events int64
	// Pending is records receivers have set aside and not yet settled (within a quarter
	// second of the last request): Events + Pending + Remaining is the limit.
	Pending   int64
	Limit     Limit
	Remaining int64 // when !Limit.Unlimited
	ResetAt   time.Time
	Projects  []ProjectEvents
	Days      []usage.Day
	Notices   []Notice
	Refusals
}

// Refusals are the records refused this month (internal/usage, Reason*): the count,
// by reason, and, while the account refuses for its quota, since when.
type Refusals struct {
	Refused         int64
	RefusedByReason map[string]int64
	RefusingSince   time.Time // zero: not refusing now
}

func refusalsOf(n int64, byReason map[string]int64, since *time.Time) Refusals {
	r := Refusals{Refused: n, RefusedByReason: byReason}
	if r.RefusedByReason == nil {
		r.RefusedByReason = map[string]int64{}
	}
	if since != nil {
		r.RefusingSince = *since
	}
	return r
}

// Notice is an 80% / 100% notice of the month.
type Notice struct {
	Percent int
	Limit   int64
	Used    int64
	At      time.Time
	ResetAt time.Time
	Message string
}

// ProjectUsage is GET /api/v1/projects/{id}/usage.
type ProjectUsage struct {
	Month  string
	Events int64
	Limit  Limit // the owning account's
	Days   []usage.Day
	// Refusals: Refused and RefusedByReason are this project's own; RefusingSince is the
	// owning account's (its quota is shared by all its projects).
	Refusals
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *Service) usageReader(ctx context.Context) (*usage.Reader, error) {
	if s.Usage == nil {
		return nil, Unavailable("usage is not available on this control plane")
	}
	r, err := s.Usage(ctx)
	if err != nil {
		s.Logger.Warn("usage not readable", "error", err)
		return nil, Unavailable("usage counts are kept in NATS, which is unreachable; retry shortly")
	}
	return r, nil
}

// AccountUsage is the user's account this month: every project it owns, deleted ones
// included while their records count.
func (s *Service) AccountUsage(ctx context.Context, userID string) (AccountUsage, error) {
	var owned []store.Project
	err := s.Store.InTx(ctx, func(tx *store.Tx) error {
		ps, roles, err := tx.ProjectsForUser(ctx, userID)
		ps, roles = LimitsOf(ctx).filter(ps, roles)
		for i, p := range ps {
			if roles[i] == store.RoleOwner {
				owned = append(owned, p)
			}
		}
		return err
	})
	if err != nil {
		return AccountUsage{}, err
	}
	rd, err := s.usageReader(ctx)
	if err != nil {
		return AccountUsage{}, err
	}
	now := s.now()
	u, err := rd.Account(ctx, userID, now)
	if err != nil {
		s.Logger.Warn("usage not readable", "error", err)
		return AccountUsage{}, Unavailable("usage counts could not be read from NATS; retry shortly")
	}
	out := AccountUsage{Month: u.Month, Events: u.Events, Pending: u.Pending, Limit: limitOf(u.Limit),
		Remaining: u.Remaining, ResetAt: usage.ResetAt(now), Days: u.Days, Projects: []ProjectEvents{}, Notices: []Notice{},
		Refusals: refusalsOf(u.Refused, u.RefusedByReason, u.RefusingSince)}
	counted := map[string]usage.ProjectUsage{}
	for _, p := range u.Projects {
		counted[p.ID] = p
	}
	for _, p := range owned {
		c := counted[p.ID]
		out.Projects = append(out.Projects, ProjectEvents{ID: p.ID, Name: p.Name, Events: c.Events, Refused: c.Refused})
		delete(counted, p.ID)
	}
	lim := LimitsOf(ctx)
	for _, p := range u.Projects {
		if _, gone := counted[p.ID]; gone && lim.Projects == nil {
			out.Projects = append(out.Projects, ProjectEvents{ID: p.ID, Events: p.Events, Refused: p.Refused, Deleted: true})
		}
	}
	for _, n := range u.Notices {
		out.Notices = append(out.Notices, Notice{Percent: n.Percent, Limit: n.Limit, Used: n.Used, At: n.At,
			ResetAt: n.ResetAt, Message: strings.TrimPrefix(n.Text(""), ": ")})
	}
	return out, nil
}

// ProjectUsage is one project's month for any of its members (others: not found), with
// the limit of the account that owns it.
func (s *Service) ProjectUsage(ctx context.Context, userID, id string) (ProjectUsage, error) {
	p, _, err := s.Project(ctx, userID, id)
	if err != nil {
		return ProjectUsage{}, err
	}
	rd, err := s.usageReader(ctx)
	if err != nil {
		return ProjectUsage{}, err
	}
	pm, err := rd.Project(ctx, p.OwnerID, p.ID, s.now())
	if err != nil {
		s.Logger.Warn("usage not readable", "error", err)
		return ProjectUsage{}, Unavailable("usage counts could not be read from NATS; retry shortly")
	}
	return ProjectUsage{Month: pm.Month, Events: pm.Events, Limit: limitOf(pm.Limit), Days: pm.Days,
		Refusals: refusalsOf(pm.Refused, pm.RefusedByReason, pm.RefusingSince)}, nil
}

// --- per-project ingest rate limit ---------------------------------------------------

// Bounds of a project's ingest rate: far above what one project can send, low enough
// that no arithmetic on them overflows.
const (
	maxRatePerSecond = 1e9
	maxRateBurst     = 1_000_000_000
)

// ProjectUpdate is a PATCH of a project; nil fields stay as they are.
type ProjectUpdate struct {
	Name *string
	// IngestRate, when SetIngestRate, replaces the project's own rate limit; its zero
	// value (JSON null, or per_second 0) returns the project to the deployment's default.
	SetIngestRate bool
	IngestRate    store.IngestRate
}

// ValidIngestRate checks a project's rate limit, naming the field at fault.
func ValidIngestRate(r store.IngestRate) *apierror.Error {
	switch {
	case r.PerSecond < 0 || r.PerSecond != r.PerSecond: // NaN cannot come from JSON, but a Go caller could
		return BadBody("ingest_rate_limit.per_second must be 0 (the deployment's default) or a positive number of records per second")
	case r.PerSecond > maxRatePerSecond:
		return BadBody("ingest_rate_limit.per_second must be at most 1000000000")
	case r.Burst < 0:
		return BadBody("ingest_rate_limit.burst must be 0 (one second's worth) or a positive number of records")
	case r.Burst > maxRateBurst:
		return BadBody("ingest_rate_limit.burst must be at most 1000000000")
	case r.PerSecond == 0 && r.Burst != 0:
		return BadBody("ingest_rate_limit.burst needs ingest_rate_limit.per_second: without a rate the project uses the deployment's default")
	}
	return nil
}

// UpdateProject changes a project's name and ingest rate limit (owner and admins). A
// PATCH naming nothing still stores a new version.
func (s *Service) UpdateProject(ctx context.Context, userID, id string, u ProjectUpdate) (p store.Project, role string, err error) {
	var name string
	if u.Name != nil {
		var e *apierror.Error
		if name, e = ValidName(*u.Name); e != nil {
			return p, "", e
		}
	}
	if u.SetIngestRate {
		if e := ValidIngestRate(u.IngestRate); e != nil {
			return p, "", e
		}
	}
	err = s.InProject(ctx, userID, id, Write, func(ctx context.Context, tx *store.Tx, pr store.Project, r string, ms *mirror.Store) error {
		before := projectSettings{Name: pr.Name, IngestRate: pr.IngestRate}
		defer func() { store.AuditOf(ctx).Change(before, projectSettings{Name: pr.Name, IngestRate: pr.IngestRate}) }()
		if u.Name != nil {
			pr.Name = name
		}
		if u.SetIngestRate {
			pr.IngestRate = u.IngestRate
		}
		if err := saveProject(ctx, tx, ms, &pr); err != nil {
			return err
		}
		p, role = pr, r
		return nil
	})
	return p, role, err
}
