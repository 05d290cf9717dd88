package api

import (
	"net/http"
	"strconv"

	"github.com/otelcol-svc/otelcol-svc/controlplane/service"
	"github.com/otelcol-svc/otelcol-svc/controlplane/store"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
)

// pipelineFields are the fields (docs/contract.md#section-6) of pl as a member of role may see them.
func pipelineFields(pl mirror.Pipeline, role string) map[string]any {
	pl = service.WithDefaults(pl)
	out := map[string]any{
		"trigger": pl.Trigger, "transforms": pl.Transforms, "agent_endpoint_url": pl.AgentEndpointURL,
		"window_enabled": pl.WindowEnabled, "context_filter": pl.ContextFilter,
		"window_duration_seconds": pl.WindowDurationSeconds, "group_key": pl.GroupKey,
		"batch_size":       pl.BatchSize,
		"cooldown_seconds": pl.CooldownSeconds, "dedup_key": pl.DedupKey,
		"max_calls_per_minute": pl.MaxCallsPerMinute, "max_calls_per_day": pl.MaxCallsPerDay,
		"window_max_bytes": pl.WindowMaxBytes, "window_max_events": pl.WindowMaxEvents,
		// Always there, whatever the mode: the incident fields with their defaults in
		// incident mode, as kept otherwise (a switch of mode back and forth loses none).
		"mode": pl.EffectiveMode(), "fingerprint": pl.Fingerprint, "resolve_when": pl.ResolveWhen,
		"group_wait": pl.GroupWait, "group_interval": pl.GroupInterval,
		"resolve_after": pl.ResolveAfter, "reopen_within": pl.ReopenWithin,
	}
	if role != store.RoleOwner && role != store.RoleAdmin && pl.AgentEndpointURL != "" {
		// An agent URL may carry its credential in the query, as webhook URLs do.
		out["agent_endpoint_url"] = redactURL("webhook", pl.AgentEndpointURL)
	}
	return out
}

// pipelineJSON is a project's pipeline as its answers show it. version is the
// project's (every change, as it always was); pipeline_version counts changes of the
// pipeline's content, saved_by and saved_at tell who saved that version and when.
func pipelineJSON(st service.PipelineState) map[string]any {
	p := st.Project
	out := pipelineFields(p.Pipeline, st.Role)
	out["version"], out["updated_at"] = p.Version, ts(p.UpdatedAt)
	out["pipeline_version"] = p.PipelineVersion
	out["saved_by"], out["saved_at"] = savedBy(st.Saved), ts(st.Saved.SavedAt)
	if !p.AgentSince.IsZero() {
		out["agent_since"] = ts(p.AgentSince)
	}
	// Only roles that may change the project see its secret: a role added later reads
	// without it until it is named here.
	if st.Role == store.RoleOwner || st.Role == store.RoleAdmin {
		out["signing_secret"] = p.SigningSecret
	}
	return out
}

// savedBy names who saved a version: their email, null when unknown (the pipeline a
// project had before versions were kept) or the account is gone.
func savedBy(v store.PipelineVersion) any {
	if v.SavedByEmail == "" {
		return nil
	}
	return v.SavedByEmail
}

// savedJSON is pipelineJSON of a save, with the check's warnings (contract: "warnings").
func savedJSON(st service.PipelineState) map[string]any {
	out := pipelineJSON(st)
	out["warnings"] = service.Warnings(st.Warnings)
	return out
}

func (s *Server) getPipeline(w http.ResponseWriter, r *http.Request) {
	st, err := s.Svc.GetPipeline(r.Context(), currentUser(r).ID, r.PathValue("id"))
	s.respond(w, r, err, http.StatusOK, func() any { return pipelineJSON(st) })
}

func (s *Server) putPipeline(w http.ResponseWriter, r *http.Request) {
	// The body is docs/contract.md#section-6 exactly: mirror.Pipeline carries its JSON names.
	var b mirror.Pipeline
	if e := decode(r, &b); e != nil {
		fail(w, e)
		return
	}
	st, err := s.Svc.ReplacePipeline(r.Context(), currentUser(r).ID, r.PathValue("id"), b)
	s.respond(w, r, err, http.StatusOK, func() any { return savedJSON(st) })
}

// pipelinePatch is PATCH's body: section 6's fields, each changed only when sent.
type pipelinePatch struct {
	Trigger               *string   `json:"trigger"`
	Transforms            *[]string `json:"transforms"`
	AgentEndpointURL      *string   `json:"agent_endpoint_url"`
	WindowEnabled         *bool     `json:"window_enabled"`
	ContextFilter         *string   `json:"context_filter"`
	WindowDurationSeconds *int      `json:"window_duration_seconds"`
	GroupKey              *string   `json:"group_key"`
	BatchSize             *int      `json:"batch_size"`
	CooldownSeconds       *int      `json:"cooldown_seconds"`
	DedupKey              *string   `json:"dedup_key"`
	MaxCallsPerMinute     *int      `json:"max_calls_per_minute"`
	MaxCallsPerDay        *int      `json:"max_calls_per_day"`
	WindowMaxBytes        *int      `json:"window_max_bytes"`
	WindowMaxEvents       *int      `json:"window_max_events"`
	Mode                  *string   `json:"mode"`
	Fingerprint           *string   `json:"fingerprint"`
	ResolveWhen           *string   `json:"resolve_when"`
	GroupWait             *string   `json:"group_wait"`
	GroupInterval         *string   `json:"group_interval"`
	ResolveAfter          *string   `json:"resolve_after"`
	ReopenWithin          *string   `json:"reopen_within"`
}

// patchPipeline changes the fields the body carries and keeps the others (as MCP's
// set_pipeline does), with PUT's checks on the result and its answer.
func (s *Server) patchPipeline(w http.ResponseWriter, r *http.Request) {
	var b pipelinePatch
	if e := decode(r, &b); e != nil {
		fail(w, e)
		return
	}
	st, err := s.Svc.UpdatePipeline(r.Context(), currentUser(r).ID, r.PathValue("id"), service.PipelineUpdate(b))
	s.respond(w, r, err, http.StatusOK, func() any { return savedJSON(st) })
}

func (s *Server) rotateSecret(w http.ResponseWriter, r *http.Request) {
	st, err := s.Svc.RotateSecret(r.Context(), currentUser(r).ID, r.PathValue("id"))
	s.respond(w, r, err, http.StatusOK, func() any { return pipelineJSON(st) })
}

// versionJSON is a history entry; with the pipeline's fields when full.
func versionJSON(v store.PipelineVersion, role string, current int64, full bool) map[string]any {
	out := map[string]any{"version": v.Version, "saved_by": savedBy(v), "saved_at": ts(v.SavedAt), "current": v.Version == current}
	if v.RestoredFrom > 0 {
		out["restored_from"] = v.RestoredFrom
	}
	if full {
		out["pipeline"] = pipelineFields(v.Pipeline, role)
	}
	return out
}

// GET /api/v1/projects/{id}/pipeline/versions?before=N&limit=M: newest first, at most
// limit (default 20, at most 100) older than version before; next_before pages on.
func (s *Server) listPipelineVersions(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	before, limit := int64(0), 20
	if v := q.Get("before"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			fail(w, service.BadBody("before must be a pipeline version (a whole number from 1)"))
			return
		}
		before = n
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > service.MaxVersionsPage {
			fail(w, service.BadBody("limit must be a whole number from 1 to "+strconv.Itoa(service.MaxVersionsPage)))
			return
		}
		limit = n
	}
	vs, p, role, err := s.Svc.PipelineVersions(r.Context(), currentUser(r).ID, r.PathValue("id"), before, limit)
	s.respond(w, r, err, http.StatusOK, func() any {
		items := make([]map[string]any, 0, len(vs))
		for _, v := range vs {
			items = append(items, versionJSON(v, role, p.PipelineVersion, false))
		}
		out := map[string]any{"versions": items, "pipeline_version": p.PipelineVersion, "kept": store.MaxPipelineVersions}
		if len(vs) == limit && vs[len(vs)-1].Version > 1 {
			out["next_before"] = vs[len(vs)-1].Version
		}
		return out
	})
}

// versionParam reads {n}; a path that names no version is 404, as a missing one is.
func versionParam(w http.ResponseWriter, r *http.Request) (int64, bool) {
	n, err := strconv.ParseInt(r.PathValue("n"), 10, 64)
	if err != nil || n < 1 {
		fail(w, service.NotFound("pipeline version"))
		return 0, false
	}
	return n, true
}

func (s *Server) getPipelineVersion(w http.ResponseWriter, r *http.Request) {
	n, ok := versionParam(w, r)
	if !ok {
		return
	}
	v, role, err := s.Svc.PipelineVersion(r.Context(), currentUser(r).ID, r.PathValue("id"), n)
	s.respond(w, r, err, http.StatusOK, func() any { return versionJSON(v, role, 0, true) })
}

// POST .../pipeline/versions/{n}/restore: the version becomes the pipeline again, as a
// new version (owners and admins); the answer is the pipeline's, as a save's.
func (s *Server) restorePipelineVersion(w http.ResponseWriter, r *http.Request) {
	n, ok := versionParam(w, r)
	if !ok {
		return
	}
	st, err := s.Svc.RestorePipeline(r.Context(), currentUser(r).ID, r.PathValue("id"), n)
	s.respond(w, r, err, http.StatusOK, func() any { return savedJSON(st) })
}
