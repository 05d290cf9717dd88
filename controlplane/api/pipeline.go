package api

import (
	"net/http"

	"github.com/otelcol-svc/otelcol-svc/components/mirror"
	"github.com/otelcol-svc/otelcol-svc/controlplane/service"
	"github.com/otelcol-svc/otelcol-svc/controlplane/store"
)

func pipelineJSON(p store.Project, role string) map[string]any {
	pl := service.WithDefaults(p.Pipeline)
	out := map[string]any{
		"trigger": pl.Trigger, "transforms": pl.Transforms, "agent_endpoint_url": pl.AgentEndpointURL,
		"window_enabled": pl.WindowEnabled, "context_filter": pl.ContextFilter,
		"window_duration_seconds": pl.WindowDurationSeconds, "group_key": pl.GroupKey,
		"batch_size": pl.BatchSize, "version": p.Version, "updated_at": ts(p.UpdatedAt),
		"cooldown_seconds": pl.CooldownSeconds, "dedup_key": pl.DedupKey,
		"max_calls_per_minute": pl.MaxCallsPerMinute, "max_calls_per_day": pl.MaxCallsPerDay,
		"window_max_bytes": pl.WindowMaxBytes, "window_max_events": pl.WindowMaxEvents,
	}
	// Only roles that may change the project see its secret: a role added later reads
	// without it until it is named here.
	if role == store.RoleOwner || role == store.RoleAdmin {
		out["signing_secret"] = p.SigningSecret
	} else if pl.AgentEndpointURL != "" {
		// An agent URL may carry its credential in the query, as webhook URLs do.
		out["agent_endpoint_url"] = redactURL("webhook", pl.AgentEndpointURL)
	}
	return out
}

func (s *Server) getPipeline(w http.ResponseWriter, r *http.Request) {
	p, role, err := s.Svc.Project(r.Context(), currentUser(r).ID, r.PathValue("id"))
	s.respond(w, r, err, http.StatusOK, func() any { return pipelineJSON(p, role) })
}

func (s *Server) putPipeline(w http.ResponseWriter, r *http.Request) {
	// The body is contract section 6 exactly: mirror.Pipeline carries its JSON names.
	var b mirror.Pipeline
	if e := decode(r, &b); e != nil {
		fail(w, e)
		return
	}
	p, role, err := s.Svc.ReplacePipeline(r.Context(), currentUser(r).ID, r.PathValue("id"), b)
	s.respond(w, r, err, http.StatusOK, func() any { return pipelineJSON(p, role) })
}

func (s *Server) rotateSecret(w http.ResponseWriter, r *http.Request) {
	p, role, err := s.Svc.RotateSecret(r.Context(), currentUser(r).ID, r.PathValue("id"))
	s.respond(w, r, err, http.StatusOK, func() any { return pipelineJSON(p, role) })
}
