package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/otelcol-svc/otelcol-svc/controlplane/store"
	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/validation"
)

// Backlogs. A project's pipeline starts from new records when it gets an agent
// URL: sending what is already stored is a choice the user makes here, after a preview
// that says how many records and calls it will be. The data plane counts (the control
// plane never reads a record, docs/contract.md#section-13); the control plane stores the request
// and publishes it in the project's mirror entry, where the pipeline role finds it, runs
// it, and reports progress in the svc-backlogs bucket.

// MaxBacklogLast is the most records "the last N" may name (validation.MaxBacklogRecords):
// each matched record is part of an agent call someone pays for.
const MaxBacklogLast = validation.MaxBacklogRecords

// Codes of the 409s a start can meet, each with its own remedy.
const (
	CodeNoAgentURL       = "no_agent_url"
	CodeBacklogRunning   = "backlog_running"
	CodeNothingToProcess = "nothing_to_process"
	CodePreviewChanged   = "preview_changed"
)

// Backlog states: queued until the pipeline role reports on it (validation.BacklogState).
const (
	BacklogQueued  = "queued"
	BacklogRunning = validation.BacklogRunning
	BacklogDone    = validation.BacklogDone
	BacklogFailed  = validation.BacklogFailed
)

// BacklogRequest is what to process: the records stored since a time, or the last N.
type BacklogRequest struct {
	Since *time.Time
	Last  *int
	// ExpectCalls, when set, is the number of calls the user was shown: a start whose
	// range now makes another number is refused (409 preview_changed), so what is sent is
	// what was announced.
	ExpectCalls *int
}

// Validate refuses a request before anything is asked or stored (400 invalid_body).
func (r BacklogRequest) Validate(now time.Time) error {
	switch {
	case r.Since == nil && r.Last == nil:
		return BadBody(`say which stored records to process: "last" (a number of records) or "since" (an RFC 3339 time)`)
	case r.Since != nil && r.Last != nil:
		return BadBody(`give "last" or "since", not both`)
	case r.Last != nil && (*r.Last < 1 || *r.Last > MaxBacklogLast):
		return BadBody(fmt.Sprintf(`"last" must be between 1 and %d records`, MaxBacklogLast))
	case r.Since != nil && r.Since.After(now):
		return BadBody(`"since" is in the future; give a time in the past`)
	case r.ExpectCalls != nil && *r.ExpectCalls < 0:
		return BadBody(`"expect_calls" must be 0 or more`)
	}
	return nil
}

// BacklogPreview is what a backlog over the request's range would do, by the data plane's
// count over the saved pipeline.
type BacklogPreview struct {
	Records  int        `json:"records"`
	Matched  int        `json:"matched"`
	Calls    int        `json:"calls"`
	FirstSeq uint64     `json:"first_seq"`
	LastSeq  uint64     `json:"last_seq"`
	From     *time.Time `json:"from"`
	To       *time.Time `json:"to"`
}

// BacklogView is a started backlog with its progress.
type BacklogView struct {
	ID          string    `json:"id"`
	State       string    `json:"state"`
	Records     int       `json:"records"`
	Matched     int       `json:"matched"`
	Calls       int       `json:"calls"`
	FirstSeq    uint64    `json:"first_seq"`
	LastSeq     uint64    `json:"last_seq"`
	Processed   int       `json:"processed"`
	RequestedAt time.Time `json:"requested_at"`
	RequestedBy string    `json:"requested_by"`
	// UpdatedAt is the pipeline role's last report (nil while queued); Error says why a
	// backlog failed.
	UpdatedAt *time.Time `json:"updated_at"`
	Error     string     `json:"error,omitempty"`
}

// PreviewBacklog says what processing the request's records would send (any member).
func (s *Service) PreviewBacklog(ctx context.Context, userID, projectID string, req BacklogRequest) (BacklogPreview, error) {
	if err := req.Validate(time.Now()); err != nil {
		return BacklogPreview{}, err
	}
	p, _, err := s.Project(ctx, userID, projectID)
	if err != nil {
		return BacklogPreview{}, err
	}
	return s.previewBacklog(ctx, p, req)
}

// previewBacklog asks a data-plane process to count the range with the project's saved
// pipeline; outside any transaction, since counting thousands of records takes a while.
func (s *Service) previewBacklog(ctx context.Context, p store.Project, req BacklogRequest) (BacklogPreview, error) {
	_, js, err := s.Mirror(ctx)
	if err != nil {
		return BacklogPreview{}, Unavailable(msgNoDataPlaneBacklog)
	}
	ans, err := validation.PreviewBacklog(ctx, js.Conn(), validation.BacklogRequest{
		ProjectID: p.ID, Pipeline: WithDefaults(p.Pipeline), Since: req.Since, Last: req.Last})
	if errors.Is(err, validation.ErrUnavailable) {
		return BacklogPreview{}, Unavailable(msgNoDataPlaneBacklog)
	}
	if err != nil {
		return BacklogPreview{}, err
	}
	if !ans.OK {
		status := ans.Status
		if status < 400 || status > 599 || ans.Code == "" {
			return BacklogPreview{}, fmt.Errorf("backlog preview refused without a usable status: %d %q %q", ans.Status, ans.Code, ans.Message)
		}
		if status == http.StatusNotFound {
			// The project is ours (checked above) but not yet in that process's copy of the
			// mirror: a moment's delay, not a missing project.
			return BacklogPreview{}, Unavailable(ans.Message)
		}
		e := apierror.New(status, ans.Code, ans.Message)
		if status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests {
			e.RetryAfter = 5 * time.Second
		}
		return BacklogPreview{}, e
	}
	return BacklogPreview{Records: ans.Records, Matched: ans.Matched, Calls: ans.Calls,
		FirstSeq: ans.FirstSeq, LastSeq: ans.LastSeq, From: ans.From, To: ans.To}, nil
}

// msgNoDataPlaneBacklog is the 503 of a preview no data-plane process answered.
const msgNoDataPlaneBacklog = "counting the stored records needs the data plane (a running otelcol-svc collector), and none answered; nothing was started, retry once a collector runs"

// StartBacklog previews the request's range and, when there is something to send,
// stores the request with exactly the preview's numbers and publishes it to the mirror
// (owners and admins). The pipeline role sends it from there.
func (s *Service) StartBacklog(ctx context.Context, userID, projectID string, req BacklogRequest) (BacklogView, error) {
	// Checked at Read below (it publishes after the preview, not in InProject's
	// transaction), so a read-only token is refused here: sending records is a change.
	if LimitsOf(ctx).ReadOnly {
		return BacklogView{}, ReadOnlyRefusal
	}
	if err := req.Validate(time.Now()); err != nil {
		return BacklogView{}, err
	}
	// First what the user may do and whether another backlog is in the way, without the
	// data plane: a refusal costs no count.
	var p store.Project
	var prev *store.Backlog
	err := s.InProject(ctx, userID, projectID, Read, func(ctx context.Context, tx *store.Tx, pr store.Project, role string, _ *mirror.Store) error {
		if role != store.RoleOwner && role != store.RoleAdmin {
			return apierror.New(http.StatusForbidden, apierror.Forbidden, "only the project's owner and admins can send stored records to the agent; members may preview")
		}
		p = pr
		b, err := tx.LatestBacklog(ctx, pr.ID)
		if err == nil {
			prev = &b
		} else if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		return nil
	})
	if err != nil {
		return BacklogView{}, err
	}
	if p.Pipeline.AgentEndpointURL == "" {
		return BacklogView{}, apierror.New(http.StatusConflict, CodeNoAgentURL,
			"the project has no agent endpoint URL: set one in the pipeline first, then process stored records")
	}
	if prev != nil {
		v, err := s.backlogView(ctx, *prev)
		if err != nil {
			return BacklogView{}, err
		}
		if v.State == BacklogQueued || v.State == BacklogRunning {
			return BacklogView{}, apierror.New(http.StatusConflict, CodeBacklogRunning,
				fmt.Sprintf("backlog %s is still %s (%d of %d records); start another once it is done", v.ID, v.State, v.Processed, v.Records))
		}
	}
	pv, err := s.previewBacklog(ctx, p, req)
	if err != nil {
		return BacklogView{}, err
	}
	if req.ExpectCalls != nil && *req.ExpectCalls != pv.Calls {
		return BacklogView{}, apierror.New(http.StatusConflict, CodePreviewChanged,
			fmt.Sprintf("the range now makes %d calls (%d records), not the %d you were shown; preview again", pv.Calls, pv.Records, *req.ExpectCalls))
	}
	if pv.Calls == 0 {
		return BacklogView{}, apierror.New(http.StatusConflict, CodeNothingToProcess,
			fmt.Sprintf("none of the %d stored records in that range match the trigger: there is nothing to send", pv.Records))
	}
	b := store.Backlog{ID: NewID("bl_"), ProjectID: p.ID, FirstSeq: pv.FirstSeq, LastSeq: pv.LastSeq,
		Records: pv.Records, Matched: pv.Matched, Calls: pv.Calls, RequestedAt: time.Now().UTC().Truncate(time.Millisecond),
		RequestedBy: userID}
	if prev != nil {
		b.PrevID = prev.ID
	}
	err = s.InProject(ctx, userID, projectID, Write, func(ctx context.Context, tx *store.Tx, pr store.Project, _ string, ms *mirror.Store) error {
		// The count was made with the pipeline read above: if it changed meanwhile, the
		// numbers shown would not be what is sent.
		if !reflect.DeepEqual(WithDefaults(pr.Pipeline), WithDefaults(p.Pipeline)) {
			return apierror.New(http.StatusConflict, CodePreviewChanged, "the pipeline was changed while the records were counted; preview again")
		}
		gen, err := ms.Generation(ctx)
		if err != nil {
			return fmt.Errorf("%w: %w", mirror.ErrUnavailable, err)
		}
		b.Generation = gen
		if err := tx.CreateBacklog(ctx, b); errors.Is(err, store.ErrConflict) {
			return apierror.New(http.StatusConflict, CodeBacklogRunning, "another backlog was started meanwhile; see its progress before starting one")
		} else if err != nil {
			return err
		}
		store.AuditOf(ctx).SetTarget(b.ID)
		store.AuditOf(ctx).Change(nil, map[string]any{"first_seq": b.FirstSeq, "last_seq": b.LastSeq, "records": b.Records})
		// Stored under a new version as any change is, which also orders it with the
		// project's other changes (the row's update) and publishes it (backlogOf).
		return saveProject(ctx, tx, ms, &pr)
	})
	if err != nil {
		return BacklogView{}, err
	}
	return viewOf(b), nil
}

// LatestBacklog is the project's most recent backlog with its progress; nil when it has
// had none (any member).
func (s *Service) LatestBacklog(ctx context.Context, userID, projectID string) (*BacklogView, error) {
	var b *store.Backlog
	err := s.InProject(ctx, userID, projectID, Read, func(ctx context.Context, tx *store.Tx, pr store.Project, _ string, _ *mirror.Store) error {
		got, err := tx.LatestBacklog(ctx, pr.ID)
		if err == nil {
			b = &got
		} else if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		return nil
	})
	if err != nil || b == nil {
		return nil, err
	}
	v, err := s.backlogView(ctx, *b)
	return &v, err
}

func viewOf(b store.Backlog) BacklogView {
	return BacklogView{ID: b.ID, State: BacklogQueued, Records: b.Records, Matched: b.Matched, Calls: b.Calls,
		FirstSeq: b.FirstSeq, LastSeq: b.LastSeq, RequestedAt: b.RequestedAt, RequestedBy: b.RequestedBy}
}

// backlogView reads a backlog's progress from the pipeline role's reports.
func (s *Service) backlogView(ctx context.Context, b store.Backlog) (BacklogView, error) {
	v := viewOf(b)
	ms, js, err := s.Mirror(ctx)
	if err != nil {
		return v, Unavailable("the progress of backlogs is kept in NATS, which is unreachable; retry shortly")
	}
	if gen, err := ms.Generation(ctx); err != nil {
		return v, fmt.Errorf("%w: %w", mirror.ErrUnavailable, err)
	} else if gen != b.Generation {
		v.State, v.Error = BacklogFailed, "NATS was reset after this backlog was asked for: the records it named are gone, and it was not sent"
		return v, nil
	}
	kv, err := js.KeyValue(ctx, validation.BacklogsBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return v, nil // no pipeline role has reported on any backlog yet
	}
	if err != nil {
		return v, fmt.Errorf("%w: %w", mirror.ErrUnavailable, err)
	}
	e, err := kv.Get(ctx, validation.BacklogKey(b.ProjectID, b.ID))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return v, nil
	}
	if err != nil {
		return v, fmt.Errorf("%w: %w", mirror.ErrUnavailable, err)
	}
	var pr validation.BacklogState
	if err := json.Unmarshal(e.Value(), &pr); err != nil {
		return v, fmt.Errorf("backlog %s: undecodable progress: %w", b.ID, err)
	}
	switch pr.State {
	case BacklogRunning, BacklogDone, BacklogFailed:
		v.State = pr.State
	}
	v.Processed, v.Error = pr.Processed, pr.Error
	if !pr.UpdatedAt.IsZero() {
		at := pr.UpdatedAt.UTC()
		v.UpdatedAt = &at
	}
	return v, nil
}

// backlogOf is the project's latest backlog as its mirror entry carries it: none when it
// has had none, or when it was asked for on another incarnation of NATS (gen, the
// mirror's generation; "" reads it), whose stream sequence numbers name other records.
func backlogOf(ctx context.Context, tx *store.Tx, ms *mirror.Store, projectID, gen string) (*mirror.Backlog, error) {
	b, err := tx.LatestBacklog(ctx, projectID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return mirrorBacklog(ctx, ms, b, gen)
}

func mirrorBacklog(ctx context.Context, ms *mirror.Store, b store.Backlog, gen string) (*mirror.Backlog, error) {
	if gen == "" {
		var err error
		if gen, err = ms.Generation(ctx); err != nil {
			return nil, fmt.Errorf("%w: %w", mirror.ErrUnavailable, err)
		}
	}
	if gen != b.Generation {
		return nil, nil
	}
	return &mirror.Backlog{ID: b.ID, FirstSeq: b.FirstSeq, LastSeq: b.LastSeq, Records: b.Records, Calls: b.Calls,
		RequestedAt: b.RequestedAt, RequestedBy: b.RequestedBy}, nil
}
