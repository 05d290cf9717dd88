package service

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/otelcol-svc/otelcol-svc/controlplane/store"
	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
	"github.com/otelcol-svc/otelcol-svc/internal/validation"
)

// Pipeline history: the project's version counts every change
// (destinations, members, the secret) because the mirror needs it to; the pipeline has a
// version of its own, bumped only when its content changes, and each version is kept
// (store/versions.go) with who saved it, to compare and restore.

// PipelineState is a project's pipeline with the history entry of its version (who saved
// it, when), and the warnings of the check that saved it (none for reads).
type PipelineState struct {
	Project  store.Project
	Role     string
	Saved    store.PipelineVersion
	Warnings []validation.Warning
}

// canChange refuses a user who may not change the project (404 for a stranger, 403 for
// a member), before anything about the project is computed for them.
func (s *Service) canChange(ctx context.Context, userID, id string) error {
	return s.InProject(ctx, userID, id, Read, func(_ context.Context, _ *store.Tx, _ store.Project, role string, _ *mirror.Store) error {
		if role == store.RoleMember {
			return apierror.New(http.StatusForbidden, apierror.Forbidden, "only the project's owner and admins can change it")
		}
		return nil
	})
}

// samePipeline reports two pipelines of the same content (defaults filled in).
func samePipeline(a, b mirror.Pipeline) bool {
	ja, _ := json.Marshal(WithDefaults(a))
	jb, _ := json.Marshal(WithDefaults(b))
	return string(ja) == string(jb)
}

// changePipeline applies change to a project (owner and admins), stores it under a new
// version and publishes it. When the pipeline's content changed, that is a new pipeline
// version saved by userID (restoring restoredFrom, when not 0), and an agent URL set
// where there was none starts agent_since.
func (s *Service) changePipeline(ctx context.Context, userID, id string, restoredFrom int64, change func(context.Context, *store.Project) error) (st PipelineState, err error) {
	err = s.InProject(ctx, userID, id, Write, func(ctx context.Context, tx *store.Tx, pr store.Project, r string, ms *mirror.Store) error {
		old := pr.Pipeline
		if err := change(ctx, &pr); err != nil {
			return err
		}
		store.AuditOf(ctx).Change(old, pr.Pipeline)
		if !samePipeline(old, pr.Pipeline) {
			now := time.Now().UTC().Truncate(time.Millisecond)
			if old.AgentEndpointURL == "" && pr.Pipeline.AgentEndpointURL != "" {
				seq, err := s.rawLastSeq(ctx, pr.ID)
				if err != nil {
					return err
				}
				pr.AgentSince, pr.AgentSinceSeq = now, seq
			}
			pr.PipelineVersion++
			err := tx.AddPipelineVersion(ctx, store.PipelineVersion{ProjectID: pr.ID, Version: pr.PipelineVersion,
				Pipeline: pr.Pipeline, SavedBy: userID, SavedAt: now, RestoredFrom: restoredFrom})
			if errors.Is(err, store.ErrConflict) {
				// Another save took this version number first (two saves at once).
				return apierror.New(http.StatusConflict, apierror.Conflict, "the pipeline was saved by someone else at the same moment; reload it and save again")
			}
			if err != nil {
				return err
			}
		}
		if err := saveProject(ctx, tx, ms, &pr); err != nil {
			return err
		}
		saved, err := currentVersion(ctx, tx, pr)
		st = PipelineState{Project: pr, Role: r, Saved: saved}
		return err
	})
	return st, err
}

// rawLastSeq is the last sequence of project's raw stream now (stream info, no record is
// read): the pipeline starts right after it when the agent URL is set, so what was
// stored before the save is never sent, with no clock in between. 0 when the
// stream does not exist (NATS was wiped and not yet resynced): agent_since's time rules.
func (s *Service) rawLastSeq(ctx context.Context, project string) (uint64, error) {
	_, js, err := s.Mirror(ctx)
	if err != nil {
		return 0, Unavailable("the configuration store (NATS) is unreachable; nothing was changed, retry shortly")
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, streams.RawStream(project))
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return 0, nil
	}
	if err != nil {
		s.Logger.Error("agent URL not set: the project's raw stream could not be read", "project_id", project, "error", err)
		return 0, Unavailable("the data plane (NATS JetStream) could not be reached; nothing was changed, retry shortly")
	}
	return st.CachedInfo().State.LastSeq, nil
}

// currentVersion is the history entry of the project's pipeline version.
func currentVersion(ctx context.Context, tx *store.Tx, p store.Project) (store.PipelineVersion, error) {
	v, err := tx.PipelineVersionOf(ctx, p.ID, p.PipelineVersion)
	if errors.Is(err, store.ErrNotFound) {
		return store.PipelineVersion{ProjectID: p.ID, Version: p.PipelineVersion, Pipeline: p.Pipeline}, nil
	}
	return v, err
}

// GetPipeline is a project's pipeline with who saved its version and when (any member).
func (s *Service) GetPipeline(ctx context.Context, userID, id string) (st PipelineState, err error) {
	err = s.InProject(ctx, userID, id, Read, func(ctx context.Context, tx *store.Tx, p store.Project, role string, _ *mirror.Store) error {
		saved, err := currentVersion(ctx, tx, p)
		st = PipelineState{Project: p, Role: role, Saved: saved}
		return err
	})
	return st, err
}

// MaxVersionsPage is the most versions one listing answers.
const MaxVersionsPage = 100

// PipelineVersions lists a project's kept pipeline versions, newest first: at most limit
// (1 to MaxVersionsPage) older than before (0: from the newest). Any member may read
// them, as they read the pipeline; role is theirs, for what the answer may show.
func (s *Service) PipelineVersions(ctx context.Context, userID, id string, before int64, limit int) (vs []store.PipelineVersion, current store.Project, role string, err error) {
	limit = min(max(limit, 1), MaxVersionsPage)
	err = s.InProject(ctx, userID, id, Read, func(ctx context.Context, tx *store.Tx, p store.Project, r string, _ *mirror.Store) error {
		current, role = p, r
		vs, err = tx.PipelineVersions(ctx, p.ID, before, limit)
		return err
	})
	return vs, current, role, err
}

// PipelineVersion is one kept version of a project's pipeline (any member).
func (s *Service) PipelineVersion(ctx context.Context, userID, id string, n int64) (v store.PipelineVersion, role string, err error) {
	err = s.InProject(ctx, userID, id, Read, func(ctx context.Context, tx *store.Tx, p store.Project, r string, _ *mirror.Store) error {
		role = r
		v, err = tx.PipelineVersionOf(ctx, p.ID, n)
		if errors.Is(err, store.ErrNotFound) {
			return NotFound("pipeline version")
		}
		return err
	})
	return v, role, err
}

// RestorePipeline makes version n the project's pipeline again, as a new version saved
// by userID that names n (owners and admins). It is checked as a save is: a version
// that no longer compiles (the collectors were upgraded) or whose agent URL may no
// longer be called is refused. Restoring the content the pipeline has changes nothing.
func (s *Service) RestorePipeline(ctx context.Context, userID, id string, n int64) (PipelineState, error) {
	if err := s.canChange(ctx, userID, id); err != nil {
		return PipelineState{}, err
	}
	v, _, err := s.PipelineVersion(ctx, userID, id, n)
	if err != nil {
		return PipelineState{}, err
	}
	pl := WithDefaults(v.Pipeline)
	warnings, err := s.checkForSave(ctx, id, pl, pl.AgentEndpointURL)
	if err != nil {
		return PipelineState{}, err
	}
	st, err := s.changePipeline(ctx, userID, id, n, func(_ context.Context, pr *store.Project) error {
		pr.Pipeline = pl
		return nil
	})
	st.Warnings = warnings
	return st, err
}
