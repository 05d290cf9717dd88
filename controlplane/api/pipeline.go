package api

import (
	"context"
	"errors"
	"fmt"
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
	} else if pl.AgentEndpointURL != "" {
		// An agent URL may carry its credential in the query, as webhook URLs do.
		out["agent_endpoint_url"] = redactURL("webhook", pl.AgentEndpointURL)
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

// checkDestination refuses a URL that points where the data plane may not call
// (outbound.CheckDestination): the owner learns it now, not from dead letters they
// cannot see. It resolves names, so it runs before any transaction is opened. URLs saved
// before this check existed are still guarded by the call-time check.
func (s *Server) checkDestination(ctx context.Context, raw string) error {
	err := outbound.CheckDestination(ctx, raw, s.OutboundAllow, nil)
	if errors.Is(err, outbound.ErrForbiddenAddress) {
		return fmt.Errorf("%w (an operator setting, read by the control plane and the collector)", err)
	}
	return err
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
	if pl.AgentEndpointURL != "" {
		if err := s.checkDestination(r.Context(), pl.AgentEndpointURL); err != nil {
			fail(w, invalidPipeline("agent_endpoint_url", err.Error()))
			return
		}
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
