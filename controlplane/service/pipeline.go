package service

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/otelcol-svc/otelcol-svc/controlplane/store"
	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/outbound"
	"github.com/otelcol-svc/otelcol-svc/internal/validation"
	"github.com/otelcol-svc/otelcol-svc/internal/webhooksig"
)

// WithDefaults fills the defaults of docs/contract.md#section-6.
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
	if p.Mode == mirror.ModeIncident {
		// Filled in as batch_size is, so what is saved (and shown) says what runs. The
		// durations stay as written: "300s" is not rewritten to "5m0s".
		for _, d := range []struct {
			field *string
			def   time.Duration
		}{{&p.GroupWait, mirror.DefaultGroupWait}, {&p.GroupInterval, mirror.DefaultGroupInterval},
			{&p.ResolveAfter, mirror.DefaultResolveAfter}, {&p.ReopenWithin, mirror.DefaultReopenWithin}} {
			if *d.field == "" {
				*d.field = durationText(d.def)
			}
		}
	}
	return p
}

// durationText writes a default the way a person would ("30s", "5m", "0s"), not as
// time.Duration.String does ("5m0s").
func durationText(d time.Duration) string {
	switch {
	case d == 0:
		return "0s"
	case d%time.Hour == 0:
		return strconv.FormatInt(int64(d/time.Hour), 10) + "h"
	case d%time.Minute == 0:
		return strconv.FormatInt(int64(d/time.Minute), 10) + "m"
	}
	return d.String()
}

// SetMode applies a body's mode (docs/contract.md#section-6) to p: a body with mode
// decides the mode; without it (mode "", what clients older than incident mode send)
// window_enabled decides, as it always did. Only incident mode is stored as a mode: legacy
// and window stay window_enabled false and true with mode "", so the mirror entries of
// pipelines that never chose incident mode stay what they were, byte for byte.
// windowEnabled is the body's window_enabled, nil when the body has none.
func SetMode(p *mirror.Pipeline, mode string, windowEnabled *bool) *apierror.Error {
	contradicts := func() *apierror.Error {
		return InvalidPipeline("mode", fmt.Sprintf("%q contradicts window_enabled true (true in window mode only): leave window_enabled out or set it false, or choose mode %q", mode, mirror.ModeWindow))
	}
	switch mode {
	case "":
		if windowEnabled != nil {
			p.WindowEnabled, p.Mode = *windowEnabled, ""
		}
	case mirror.ModeLegacy, mirror.ModeIncident:
		if windowEnabled != nil && *windowEnabled {
			return contradicts()
		}
		p.WindowEnabled, p.Mode = false, ""
		if mode == mirror.ModeIncident {
			p.Mode = mirror.ModeIncident
		}
	case mirror.ModeWindow:
		// window_enabled false beside it is what a form that shows the mode as a choice
		// sends for the checkbox it no longer shows: the mode decides.
		p.WindowEnabled, p.Mode = true, ""
	default:
		return InvalidPipeline("mode", fmt.Sprintf("must be %q, %q or %q, got %q", mirror.ModeLegacy, mirror.ModeWindow, mirror.ModeIncident, mode))
	}
	return nil
}

// NormalizeMode is SetMode for a whole pipeline as PUT and the check take it: its own
// mode and window_enabled (false and absent are one there).
func NormalizeMode(p *mirror.Pipeline) *apierror.Error {
	if p.Mode == "" {
		return nil
	}
	var we *bool
	if p.WindowEnabled {
		we = &p.WindowEnabled
	}
	return SetMode(p, p.Mode, we)
}

// InvalidPipeline is the contract's 400 invalid_pipeline naming the field.
func InvalidPipeline(field, msg string) *apierror.Error {
	return apierror.New(http.StatusBadRequest, apierror.InvalidPipeline, field+": "+msg)
}

// msgNoDataPlane is the 503 of a pipeline that could not be checked.
const msgNoDataPlane = "checking the pipeline's OTTL expressions needs the data plane (a running otelcol-svc collector), and none answered; nothing was changed, retry once a collector runs"

// ValidatePipeline checks a pipeline as the data plane will run it: the agent URL is one
// we may call, and every expression is compiled by a running collector
// (internal/validation: the control plane links no OTTL).
func (s *Service) ValidatePipeline(ctx context.Context, p mirror.Pipeline) error {
	_, err := s.validatePipeline(ctx, "", p)
	return err
}

// validatePipeline is ValidatePipeline for a pipeline of projectID (the caller checked the
// user may see the project), which also returns the check's warnings: fields the
// project's records never had, comparisons of a number field with a string.
// Warnings never refuse a pipeline.
func (s *Service) validatePipeline(ctx context.Context, projectID string, p mirror.Pipeline) ([]validation.Warning, error) {
	// What SetMode stores, and nothing else: an entry the data plane would read as
	// two modes at once is never saved.
	switch {
	case p.Mode != "" && p.Mode != mirror.ModeIncident:
		return nil, InvalidPipeline("mode", fmt.Sprintf("must be %q, %q or %q, got %q", mirror.ModeLegacy, mirror.ModeWindow, mirror.ModeIncident, p.Mode))
	case p.Mode == mirror.ModeIncident && p.WindowEnabled:
		return nil, InvalidPipeline("mode", `mode "incident" contradicts window_enabled true`)
	}
	if p.AgentEndpointURL != "" {
		if err := outbound.CheckURL(p.AgentEndpointURL); err != nil {
			return nil, InvalidPipeline("agent_endpoint_url", err.Error())
		}
	}
	check := func(ctx context.Context, p mirror.Pipeline) (validation.Result, error) {
		return validation.Result{}, validation.ErrUnavailable
	}
	switch {
	case s.CheckProjectPipeline != nil && projectID != "":
		check = func(ctx context.Context, p mirror.Pipeline) (validation.Result, error) {
			return s.CheckProjectPipeline(ctx, projectID, p)
		}
	case s.CheckPipeline != nil:
		check = s.CheckPipeline
	}
	res, err := check(ctx, p)
	if errors.Is(err, validation.ErrUnavailable) {
		return nil, Unavailable(msgNoDataPlane)
	}
	if err != nil {
		return nil, err
	}
	if !res.OK {
		return nil, InvalidPipeline(res.Field, res.Message)
	}
	return res.Warnings, nil
}

// checkForSave is what every save of a pipeline runs before its transaction: the data
// plane's check (with the warnings), then the agent URL the save sets, if any ("" none).
func (s *Service) checkForSave(ctx context.Context, id string, pl mirror.Pipeline, agentURL string) ([]validation.Warning, error) {
	warnings, err := s.validatePipeline(ctx, id, pl)
	if err != nil {
		return nil, err
	}
	if agentURL != "" {
		if err := s.CheckDestination(ctx, agentURL); err != nil {
			return nil, InvalidPipeline("agent_endpoint_url", err.Error())
		}
	}
	return warnings, nil
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
func (s *Service) ReplacePipeline(ctx context.Context, userID, id string, b mirror.Pipeline) (PipelineState, error) {
	if e := NormalizeMode(&b); e != nil {
		return PipelineState{}, e
	}
	pl := WithDefaults(b)
	// The user's access first: the check's warnings name fields of the project's records.
	if err := s.canChange(ctx, userID, id); err != nil {
		return PipelineState{}, err
	}
	warnings, err := s.checkForSave(ctx, id, pl, pl.AgentEndpointURL)
	if err != nil {
		return PipelineState{}, err
	}
	st, err := s.changePipeline(ctx, userID, id, 0, func(_ context.Context, pr *store.Project) error {
		pr.Pipeline = pl
		return nil
	})
	st.Warnings = warnings
	return st, err
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
	Mode                  *string
	Fingerprint           *string
	ResolveWhen           *string
	GroupWait             *string
	GroupInterval         *string
	ResolveAfter          *string
	ReopenWithin          *string
}

func (u PipelineUpdate) apply(pl *mirror.Pipeline) *apierror.Error {
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
	assign(&pl.Fingerprint, u.Fingerprint)
	assign(&pl.ResolveWhen, u.ResolveWhen)
	assign(&pl.GroupWait, u.GroupWait)
	assign(&pl.GroupInterval, u.GroupInterval)
	assign(&pl.ResolveAfter, u.ResolveAfter)
	assign(&pl.ReopenWithin, u.ReopenWithin)
	// window_enabled was assigned above: SetMode decides again with the mode, if any.
	mode := ""
	if u.Mode != nil {
		mode = *u.Mode
	}
	return SetMode(pl, mode, u.WindowEnabled)
}

// CodePipelineChanged (409) refuses a PATCH whose pipeline was saved by someone else
// while it was checked: what was checked is not what would be stored.
const CodePipelineChanged = "pipeline_changed"

// UpdatePipeline changes some of a project's pipeline fields, with the checks of
// ReplacePipeline on the result. The data plane's check (up to validation.Timeout: it
// reads the project's records for warnings) runs between two transactions, never inside
// one, where it would hold the database's writer (SQLite: every tenant's writes) or the
// project's row (PostgreSQL) meanwhile, as StartBacklog does: the write then stores the
// checked pipeline only if the one it was made from is still the project's.
func (s *Service) UpdatePipeline(ctx context.Context, userID, id string, u PipelineUpdate) (PipelineState, error) {
	var base mirror.Pipeline
	err := s.InProject(ctx, userID, id, Read, func(_ context.Context, _ *store.Tx, pr store.Project, role string, _ *mirror.Store) error {
		// The user's access first: the check's warnings name fields of the project's records.
		if role == store.RoleMember {
			return apierror.New(http.StatusForbidden, apierror.Forbidden, "only the project's owner and admins can change it")
		}
		base = pr.Pipeline
		return nil
	})
	if err != nil {
		return PipelineState{}, err
	}
	pl := base
	if e := u.apply(&pl); e != nil {
		return PipelineState{}, e
	}
	pl = WithDefaults(pl)
	// Only a URL the patch sets is checked: one saved before the check existed is still
	// guarded by the call-time check.
	newURL := ""
	if u.AgentEndpointURL != nil {
		newURL = *u.AgentEndpointURL
	}
	warnings, err := s.checkForSave(ctx, id, pl, newURL)
	if err != nil {
		return PipelineState{}, err
	}
	st, err := s.changePipeline(ctx, userID, id, 0, func(_ context.Context, pr *store.Project) error {
		if !samePipeline(pr.Pipeline, base) {
			return apierror.New(http.StatusConflict, CodePipelineChanged,
				"the pipeline was saved by someone else while this change was checked; nothing was changed: reload it and apply your change again")
		}
		pr.Pipeline = pl
		return nil
	})
	st.Warnings = warnings
	return st, err
}

// RotateSecret gives a project a new signing secret.
func (s *Service) RotateSecret(ctx context.Context, userID, id string) (PipelineState, error) {
	return s.changePipeline(ctx, userID, id, 0, func(_ context.Context, pr *store.Project) error {
		pr.SigningSecret = webhooksig.NewSecret()
		return nil
	})
}
