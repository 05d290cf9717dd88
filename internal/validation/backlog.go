package validation

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
)

// Backlogs. A project's pipeline starts from new records when it
// gets an agent URL; processing what is already stored is a choice its user makes, after
// a preview of how many records and agent calls it makes. The control plane never reads a
// record (it links no collector code), so it asks a data-plane process for the preview
// over NATS, as it asks for pipeline checks; the pipeline role runs a started backlog
// (mirror.Project.Backlog) and reports on it in BacklogsBucket.

const (
	// BacklogSubject is the preview endpoint's subject on the svc-pipeline service. The
	// body is a BacklogRequest, the answer a BacklogPreview.
	BacklogSubject = "svc.pipeline.backlog.preview"
	// BacklogTimeout is how long a caller waits for a preview: it reads and evaluates up
	// to MaxBacklogRecords records, which takes longer than a check.
	BacklogTimeout = 10 * time.Second
	// MaxBacklogRecords is the most records one backlog may process: every matched
	// record is part of an agent call someone pays for, and a preview reads them all.
	MaxBacklogRecords = 10_000
	// BacklogBatchRecords is how many raw records a backlog run hands the pipeline at
	// once, and so how the preview batches them: records FirstSeq+k·N ... FirstSeq+(k+1)·N-1
	// are batch k, whatever the pipeline role's batch_size, so that the preview's call
	// count is the run's (a legacy call never holds records of two batches). It is the
	// jetstream receiver's default batch_size.
	BacklogBatchRecords = 1000
	// BacklogsBucket is the KV bucket where the pipeline role reports each backlog's
	// progress, key BacklogKey(project, id), value a BacklogState.
	BacklogsBucket = "svc-backlogs"
	// CodeBacklogTooLarge refuses a preview (400) whose range holds more records, bytes
	// or evaluation time than a backlog may take; the message says how to narrow it.
	CodeBacklogTooLarge = "backlog_too_large"
)

// Backlog states in BacklogsBucket. A backlog without an entry has not started yet. A
// done or failed backlog is never run again, even while the mirror still carries it.
const (
	BacklogRunning = "running"
	BacklogDone    = "done"
	BacklogFailed  = "failed"
)

// BacklogState is an entry of BacklogsBucket.
type BacklogState struct {
	ID    string `json:"id"`
	State string `json:"state"`
	// Processed counts the records of the range handed through the pipeline and
	// acknowledged (summed over the pipeline processes that shared the run; a process
	// killed may leave its last second uncounted).
	Processed int       `json:"processed"`
	FirstSeq  uint64    `json:"first_seq"`
	LastSeq   uint64    `json:"last_seq"`
	UpdatedAt time.Time `json:"updated_at"`
	Error     string    `json:"error,omitempty"`
}

// BacklogKey is a backlog's key in BacklogsBucket.
func BacklogKey(projectID, backlogID string) string { return projectID + "." + backlogID }

// BacklogRequest asks what processing a project's stored records would do: the newest
// Last records, or those stored at or after Since (exactly one of the two), through
// Pipeline (the project's saved pipeline, defaults filled in). ProjectID is a project the
// caller has already authorized; the data plane only checks it is in its mirror.
type BacklogRequest struct {
	ProjectID string          `json:"project_id"`
	Pipeline  mirror.Pipeline `json:"pipeline"`
	Since     *time.Time      `json:"since"`
	Last      *int            `json:"last"`
}

// BacklogPreview is the answer: OK with the range and what it makes, or a refusal in the
// contract's terms (Code an apierror code or CodeBacklogTooLarge, Status its HTTP status).
type BacklogPreview struct {
	OK bool `json:"ok"`
	// Records in the range; Matched those the trigger selects (window mode: the
	// triggers); Calls the agent calls a backlog run over the range makes, before
	// cooldowns and call budgets, which can only hold some back.
	Records int `json:"records"`
	Matched int `json:"matched"`
	Calls   int `json:"calls"`
	// FirstSeq and LastSeq are the range on the project's raw stream, which a started
	// backlog names (mirror.Backlog): LastSeq is the stream's last sequence when the
	// preview was taken, so records arriving later are the live pipeline's, not the
	// backlog's. Both are 0 when the range is empty.
	FirstSeq uint64 `json:"first_seq"`
	LastSeq  uint64 `json:"last_seq"`
	// From and To are when the range's first and last records were stored.
	From *time.Time `json:"from,omitempty"`
	To   *time.Time `json:"to,omitempty"`

	Code    string `json:"code,omitempty"`
	Status  int    `json:"status,omitempty"`
	Message string `json:"message,omitempty"`
}

// Refuse is a preview's refusal.
func Refuse(status int, code, msg string) BacklogPreview {
	return BacklogPreview{Code: code, Status: status, Message: msg}
}

// maxBacklogRequest bounds a preview request: a pipeline past the limits of CheckLimits
// is refused before it is sent, so a request is far below this.
const maxBacklogRequest = 1 << 20

// ParseBacklogRequest reads a preview request (the responder's input). Unknown fields
// are ignored, as the pipeline check ignores them: a newer control plane may send what
// this process does not know. now bounds since.
func ParseBacklogRequest(data []byte, now time.Time) (BacklogRequest, *BacklogPreview) {
	refuse := func(status int, code, msg string) (BacklogRequest, *BacklogPreview) {
		r := Refuse(status, code, msg)
		return BacklogRequest{}, &r
	}
	if len(data) > maxBacklogRequest {
		return refuse(http.StatusRequestEntityTooLarge, apierror.PayloadTooLarge,
			fmt.Sprintf("the request is larger than %d bytes", maxBacklogRequest))
	}
	var req BacklogRequest
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&req); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return refuse(http.StatusBadRequest, apierror.InvalidJSON, `the request must be a JSON object: {"project_id", "pipeline", "since" | "last"}`)
		}
		return refuse(http.StatusBadRequest, apierror.InvalidBody, "the request does not fit {\"project_id\", \"pipeline\", \"since\" | \"last\"}: "+err.Error())
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return refuse(http.StatusBadRequest, apierror.InvalidJSON, "the request must hold one JSON object and nothing after it")
	}
	if !streams.ValidProjectID(req.ProjectID) {
		return refuse(http.StatusBadRequest, apierror.InvalidBody, "project_id must name a project")
	}
	switch {
	case req.Since == nil && req.Last == nil:
		return refuse(http.StatusBadRequest, apierror.InvalidBody,
			`say which stored records to process: "last" (a number of records) or "since" (an RFC 3339 time)`)
	case req.Since != nil && req.Last != nil:
		return refuse(http.StatusBadRequest, apierror.InvalidBody, `give "last" or "since", not both`)
	case req.Last != nil && (*req.Last < 1 || *req.Last > MaxBacklogRecords):
		return refuse(http.StatusBadRequest, apierror.InvalidBody,
			fmt.Sprintf(`"last" must be a whole number from 1 to %d, got %d`, MaxBacklogRecords, *req.Last))
	case req.Since != nil && req.Since.After(now):
		return refuse(http.StatusBadRequest, apierror.InvalidBody,
			fmt.Sprintf(`"since" (%s) is in the future; give a time in the past`, req.Since.UTC().Format(time.RFC3339)))
	}
	if res, ok := CheckLimits(req.Pipeline); !ok {
		return refuse(http.StatusBadRequest, apierror.InvalidPipeline, res.Field+": "+res.Message)
	}
	return req, nil
}

// PreviewBacklog asks any one running data-plane process what a backlog over req's range
// would do. ErrUnavailable when none answers within BacklogTimeout; a refusal is an
// answer (OK false), not an error.
func PreviewBacklog(ctx context.Context, nc *nats.Conn, req BacklogRequest) (BacklogPreview, error) {
	var ans BacklogPreview
	if res, ok := CheckLimits(req.Pipeline); !ok {
		return Refuse(http.StatusBadRequest, apierror.InvalidPipeline, res.Field+": "+res.Message), nil
	}
	body, err := json.Marshal(req)
	if err != nil {
		return ans, err
	}
	ctx, cancel := context.WithTimeout(ctx, BacklogTimeout)
	defer cancel()
	msg, err := nc.RequestWithContext(ctx, BacklogSubject, body)
	switch {
	case unavailable(err):
		return ans, fmt.Errorf("%w: %v", ErrUnavailable, err)
	case err != nil:
		return ans, err
	}
	if code := msg.Header.Get("Nats-Service-Error-Code"); code != "" {
		return ans, fmt.Errorf("backlog preview failed: %s %s", code, msg.Header.Get("Nats-Service-Error"))
	}
	if err := json.Unmarshal(msg.Data, &ans); err != nil {
		return ans, fmt.Errorf("backlog preview: undecodable answer: %w", err)
	}
	return ans, nil
}

func unavailable(err error) bool {
	return errors.Is(err, nats.ErrNoResponders) || errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, nats.ErrConnectionClosed) || errors.Is(err, nats.ErrInvalidConnection)
}
