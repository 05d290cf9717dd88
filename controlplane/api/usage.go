package api

import (
	"net/http"

	"github.com/otelcol-svc/otelcol-svc/controlplane/service"
	"github.com/otelcol-svc/otelcol-svc/internal/usage"
)

// limitJSON sets "limit" and "remaining" in out. An unlimited account shows
// "unlimited": true with both null: no number stands for "no limit", so a client that
// compares remaining with 0 cannot read it as "used up" (null is not a count), and one
// that checks unlimited is told plainly.
func limitJSON(out map[string]any, l service.Limit, remaining *int64) {
	out["unlimited"] = l.Unlimited
	if l.Unlimited {
		out["limit"] = nil
		if remaining != nil {
			out["remaining"] = nil
		}
		return
	}
	out["limit"] = l.Limit
	if remaining != nil {
		out["remaining"] = *remaining
	}
}

func daysJSON(days []usage.Day) []map[string]any {
	out := make([]map[string]any, 0, len(days))
	for _, d := range days {
		out = append(out, map[string]any{"date": d.Date, "events": d.Events})
	}
	return out
}

// refusalsJSON sets "refused" (records refused this month), "refused_by_reason" and,
// only while the account refuses for its quota, "refusing_since" (RFC 3339).
func refusalsJSON(out map[string]any, r service.Refusals) {
	out["refused"] = r.Refused
	out["refused_by_reason"] = r.RefusedByReason
	if !r.RefusingSince.IsZero() {
		out["refusing_since"] = ts(r.RefusingSince)
	}
}

// accountUsageJSON is GET /api/v1/usage's answer (also the MCP get_usage tool's).
func accountUsageJSON(u service.AccountUsage) map[string]any {
	projects := make([]map[string]any, 0, len(u.Projects))
	for _, p := range u.Projects {
		pj := map[string]any{"id": p.ID, "name": p.Name, "events": p.Events, "refused": p.Refused}
		if p.Deleted {
			pj["name"], pj["deleted"] = nil, true
		}
		projects = append(projects, pj)
	}
	notices := make([]map[string]any, 0, len(u.Notices))
	for _, n := range u.Notices {
		notices = append(notices, map[string]any{"percent": n.Percent, "limit": n.Limit, "used": n.Used,
			"at": ts(n.At), "reset_at": ts(n.ResetAt), "message": n.Message})
	}
	out := map[string]any{"month": u.Month, "events": u.Events, "pending": u.Pending, "reset_at": ts(u.ResetAt),
		"projects": projects, "days": daysJSON(u.Days), "notices": notices}
	limitJSON(out, u.Limit, &u.Remaining)
	refusalsJSON(out, u.Refusals)
	return out
}

// projectUsageJSON is GET /api/v1/projects/{id}/usage's answer.
func projectUsageJSON(u service.ProjectUsage) map[string]any {
	out := map[string]any{"month": u.Month, "events": u.Events, "days": daysJSON(u.Days)}
	limitJSON(out, u.Limit, nil)
	refusalsJSON(out, u.Refusals)
	return out
}

func (s *Server) accountUsage(w http.ResponseWriter, r *http.Request) {
	u, err := s.Svc.AccountUsage(r.Context(), currentUser(r).ID)
	s.respond(w, r, err, http.StatusOK, func() any { return accountUsageJSON(u) })
}

func (s *Server) projectUsage(w http.ResponseWriter, r *http.Request) {
	u, err := s.Svc.ProjectUsage(r.Context(), currentUser(r).ID, r.PathValue("id"))
	s.respond(w, r, err, http.StatusOK, func() any { return projectUsageJSON(u) })
}
