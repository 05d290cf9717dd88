package service

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/otelcol-svc/otelcol-svc/components/apierror"
	"github.com/otelcol-svc/otelcol-svc/components/mirror"
	"github.com/otelcol-svc/otelcol-svc/components/outbound"
	"github.com/otelcol-svc/otelcol-svc/components/validation"
	"github.com/otelcol-svc/otelcol-svc/components/webhooksig"
	"github.com/otelcol-svc/otelcol-svc/controlplane/store"
)

// WithDefaults fills contract section 6's defaults.
func WithDefaults(p mirror.Pipeline) mirror.Pipeline {
	if p.BatchSize == 0 {
		p.BatchSize = mirror.DefaultBatchSize
	}
	if p.WindowDurationSeconds == 0 {
		p.WindowDurationSeconds = mirror.DefaultWindowDurationSeconds
	}
	if p.Transforms == nil {
		p.Transforms = []string{}
	}
	return p
}

// InvalidPipeline is the contract's 400 invalid_pipeline naming the field.
func InvalidPipeline(field, msg string) *apierror.Error {
	return apierror.New(http.StatusBadRequest, apierror.InvalidPipeline, field+": "+msg)
}

// msgNoDataPlane is the 503 of a pipeline that could not be checked.
const msgNoDataPlane = "checking the pipeline's OTTL expressions needs the data plane (a running otelcol-svc collector), and none answered; nothing was changed, retry once a collector runs"

// ValidatePipeline checks a pipeline as the data plane will run it: the agent URL is one
// we may call, and every expression is compiled by a running collector
// (components/validation: the control plane links no OTTL).
func (s *Service) ValidatePipeline(ctx context.Context, p mirror.Pipeline) error {
	if p.AgentEndpointURL != "" {
		if err := outbound.CheckURL(p.AgentEndpointURL); err != nil {
			return InvalidPipeline("agent_endpoint_url", err.Error())
		}
	}
	check := s.CheckPipeline
	if check == nil {
		check = func(context.Context, mirror.Pipeline) (validation.Result, error) {
			return validation.Result{}, validation.ErrUnavailable
		}
	}
	res, err := check(ctx, p)
	if errors.Is(err, validation.ErrUnavailable) {
		return Unavailable(msgNoDataPlane)
	}
	if err != nil {
		return err
	}
	if !res.OK {
		return InvalidPipeline(res.Field, res.Message)
	}
	return nil
}

// CheckDestination refuses a URL that points where the data plane may not call
// (outbound.CheckDestination): the owner learns it now, not from dead letters they
// cannot see. It resolves names, so it runs before any transaction is opened. URLs saved
// before this check existed are still guarded by the call-time check.
func (s *Service) CheckDestination(ctx context.Context, raw string) error {
	err := outbound.CheckDestination(ctx, raw, s.OutboundAllow, nil)
	if errors.Is(err, outbound.ErrForbiddenAddress) {
		return fmt.Errorf("%w (an operator setting, read by the control plane and the collector)", err)
	}
	return err
}

// ReplacePipeline sets a project's whole pipeline (PUT): fields left out take their
// defaults.
func (s *Service) ReplacePipeline(ctx context.Context, userID, id string, b mirror.Pipeline) (p store.Project, role string, err error) {
	pl := WithDefaults(b)
	if err := s.ValidatePipeline(ctx, pl); err != nil {
		return p, "", err
	}
	if pl.AgentEndpointURL != "" {
		if err := s.CheckDestination(ctx, pl.AgentEndpointURL); err != nil {
			return p, "", InvalidPipeline("agent_endpoint_url", err.Error())
		}
	}
	return s.changeProject(ctx, userID, id, func(_ context.Context, pr *store.Project) error {
		pr.Pipeline = pl
		return nil
	})
}

// PipelineUpdate changes the fields it carries (not nil) and keeps the others.
type PipelineUpdate struct {
	Trigger               *string
	Transforms            *[]string
	AgentEndpointURL      *string
	WindowEnabled         *bool
	ContextFilter         *string
	WindowDurationSeconds *int
	GroupKey              *string
	BatchSize             *int
	CooldownSeconds       *int
	DedupKey              *string
	MaxCallsPerMinute     *int
	MaxCallsPerDay        *int
	WindowMaxBytes        *int
	WindowMaxEvents       *int
}

func (u PipelineUpdate) apply(pl *mirror.Pipeline) {
	assign(&pl.Trigger, u.Trigger)
	assign(&pl.AgentEndpointURL, u.AgentEndpointURL)
	assign(&pl.ContextFilter, u.ContextFilter)
	assign(&pl.GroupKey, u.GroupKey)
	assign(&pl.Transforms, u.Transforms)
	assign(&pl.WindowEnabled, u.WindowEnabled)
	assign(&pl.WindowDurationSeconds, u.WindowDurationSeconds)
	assign(&pl.BatchSize, u.BatchSize)
	assign(&pl.CooldownSeconds, u.CooldownSeconds)
	assign(&pl.DedupKey, u.DedupKey)
	assign(&pl.MaxCallsPerMinute, u.MaxCallsPerMinute)
	assign(&pl.MaxCallsPerDay, u.MaxCallsPerDay)
	assign(&pl.WindowMaxBytes, u.WindowMaxBytes)
	assign(&pl.WindowMaxEvents, u.WindowMaxEvents)
}

// UpdatePipeline changes some of a project's pipeline fields, with the checks of
// ReplacePipeline on the result.
func (s *Service) UpdatePipeline(ctx context.Context, userID, id string, u PipelineUpdate) (p store.Project, role string, err error) {
	if u.AgentEndpointURL != nil && *u.AgentEndpointURL != "" {
		if err := s.CheckDestination(ctx, *u.AgentEndpointURL); err != nil {
			return p, "", InvalidPipeline("agent_endpoint_url", err.Error())
		}
	}
	return s.changeProject(ctx, userID, id, func(ctx context.Context, pr *store.Project) error {
		pl := pr.Pipeline
		u.apply(&pl)
		pl = WithDefaults(pl)
		if err := s.ValidatePipeline(ctx, pl); err != nil {
			return err
		}
		pr.Pipeline = pl
		return nil
	})
}

// RotateSecret gives a project a new signing secret.
func (s *Service) RotateSecret(ctx context.Context, userID, id string) (store.Project, string, error) {
	return s.changeProject(ctx, userID, id, func(_ context.Context, pr *store.Project) error {
		pr.SigningSecret = webhooksig.NewSecret()
		return nil
	})
}

// changeProject applies change to a project (owner and admins), stores it under a new
// version and publishes it.
func (s *Service) changeProject(ctx context.Context, userID, id string, change func(context.Context, *store.Project) error) (p store.Project, role string, err error) {
	err = s.InProject(ctx, userID, id, Write, func(ctx context.Context, tx *store.Tx, pr store.Project, r string, ms *mirror.Store) error {
		if err := change(ctx, &pr); err != nil {
			return err
		}
		if err := saveProject(ctx, tx, ms, &pr); err != nil {
			return err
		}
		p, role = pr, r
		return nil
	})
	return p, role, err
}
