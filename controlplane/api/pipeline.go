package api

import (
	"context"
	"net/http"
	"time"

	"github.com/otelcol-svc/otelcol-svc/components/apierror"
	"github.com/otelcol-svc/otelcol-svc/components/mirror"
	"github.com/otelcol-svc/otelcol-svc/components/outbound"
	"github.com/otelcol-svc/otelcol-svc/components/pipelinecfg"
	"github.com/otelcol-svc/otelcol-svc/components/webhooksig"
	"github.com/otelcol-svc/otelcol-svc/controlplane/store"
)

func pipelineJSON(p store.Project, role string) map[string]any {
	pl := withDefaults(p.Pipeline)
	out := map[string]any{
		"trigger": pl.Trigger, "transforms": pl.Transforms, "agent_endpoint_url": pl.AgentEndpointURL,
		"window_enabled": pl.WindowEnabled, "context_filter": pl.ContextFilter,
		"window_duration_seconds": pl.WindowDurationSeconds, "group_key": pl.GroupKey,
		"batch_size": pl.BatchSize, "version": p.Version, "updated_at": ts(p.UpdatedAt),
	}
	if role != store.RoleMember {
		out["signing_secret"] = p.SigningSecret
	}
	return out
}

func invalidPipeline(field, msg string) *apierror.Error {
	return apierror.New(http.StatusBadRequest, apierror.InvalidPipeline, field+": "+msg)
}

// ValidatePipeline checks a pipeline as the data plane will run it: every expression is
// compiled with the same OTTL event context, and the agent URL is one we may call.
func ValidatePipeline(p mirror.Pipeline) *apierror.Error {
	if p.AgentEndpointURL != "" {
		if err := outbound.CheckURL(p.AgentEndpointURL); err != nil {
			return invalidPipeline("agent_endpoint_url", err.Error())
		}
	}
	if _, err := pipelinecfg.Compile(p); err != nil {
		if fe, ok := pipelinecfg.IsFieldError(err); ok {
			return invalidPipeline(fe.Field, fe.Err.Error())
		}
		return invalidPipeline("pipeline", err.Error())
	}
	return nil
}

func (s *Server) getPipeline(w http.ResponseWriter, r *http.Request) {
	s.onProject(w, r, read, func(_ context.Context, _ *store.Tx, p store.Project, role string, _ *mirror.Store, rep *reply) error {
		rep.set(http.StatusOK, pipelineJSON(p, role))
		return nil
	})
}

func (s *Server) putPipeline(w http.ResponseWriter, r *http.Request) {
	// The body is contract section 6 exactly: mirror.Pipeline carries its JSON names.
	var b mirror.Pipeline
	if e := decode(r, &b); e != nil {
		fail(w, e)
		return
	}
	pl := withDefaults(b)
	if e := ValidatePipeline(pl); e != nil {
		fail(w, e)
		return
	}
	s.onProject(w, r, write, func(ctx context.Context, tx *store.Tx, p store.Project, role string, ms *mirror.Store, rep *reply) error {
		p.Pipeline = pl
		return s.saveProject(ctx, tx, ms, p, func(saved store.Project) { rep.set(http.StatusOK, pipelineJSON(saved, role)) })
	})
}

func (s *Server) rotateSecret(w http.ResponseWriter, r *http.Request) {
	s.onProject(w, r, write, func(ctx context.Context, tx *store.Tx, p store.Project, role string, ms *mirror.Store, rep *reply) error {
		p.SigningSecret = webhooksig.NewSecret()
		return s.saveProject(ctx, tx, ms, p, func(saved store.Project) { rep.set(http.StatusOK, pipelineJSON(saved, role)) })
	})
}

// saveProject stores a changed project under a new version, publishes it, then answers.
func (s *Server) saveProject(ctx context.Context, tx *store.Tx, ms *mirror.Store, p store.Project, respond func(saved store.Project)) error {
	p.Version++
	p.UpdatedAt = time.Now().UTC()
	if err := tx.UpdateProject(ctx, p); err != nil {
		return err
	}
	if err := publish(ctx, tx, ms, p); err != nil {
		return err
	}
	respond(p)
	return nil
}
