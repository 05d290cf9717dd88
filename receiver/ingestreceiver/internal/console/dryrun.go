package console

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/ottlevent"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelinecfg"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
)

// POST /console/v1/projects/{project_id}/pipeline/dry-run with {"pipeline": {the fields of
// docs/contract.md#section-6}, "limit": N}: the pipeline, saved or not, evaluated over the
// project's newest N records as the data plane would run it (docs/contract.md#section-12), with
// nothing sent and nothing stored. In incident mode the answer also says how many
// incidents would open ("incidents"), and its calls are those their lifecycle would make
// over the records' stored times. Any credential that reads the project may ask: it
// learns nothing a read of the records would not show. See dryrun_eval.go for the
// evaluation.

const (
	defaultDryRunLimit = 100
	maxDryRunLimit     = 1000
	// maxDryRunBody bounds the request: a pipeline is a few expressions, far below it.
	maxDryRunBody = 256 << 10
)

// dryRunRequest is the body. The pipeline is mirror.Pipeline, the very type the
// control plane saves and the data plane compiles.
type dryRunRequest struct {
	Pipeline *mirror.Pipeline `json:"pipeline"`
	Limit    *int             `json:"limit"`
}

// parseDryRun reads the body: a JSON object with a pipeline (unknown fields refused, as
// the control plane's PUT does) and an optional limit.
func parseDryRun(body []byte) (mirror.Pipeline, int, *apierror.Error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var r dryRunRequest
	if err := dec.Decode(&r); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return mirror.Pipeline{}, 0, apierror.New(http.StatusBadRequest, apierror.InvalidJSON,
				`the body must be a JSON object: {"pipeline": {...}, "limit": N}`)
		}
		return mirror.Pipeline{}, 0, apierror.New(http.StatusBadRequest, apierror.InvalidBody,
			"the body does not fit {\"pipeline\": {contract section 6 fields}, \"limit\": N}: "+err.Error())
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return mirror.Pipeline{}, 0, apierror.New(http.StatusBadRequest, apierror.InvalidJSON, "the body must hold one JSON object and nothing after it")
	}
	if r.Pipeline == nil {
		return mirror.Pipeline{}, 0, apierror.New(http.StatusBadRequest, apierror.InvalidBody,
			`pipeline is required: the pipeline to try, as PUT .../pipeline takes it`)
	}
	limit := defaultDryRunLimit
	if r.Limit != nil {
		if *r.Limit < 1 || *r.Limit > maxDryRunLimit {
			return mirror.Pipeline{}, 0, apierror.New(http.StatusBadRequest, apierror.InvalidBody,
				fmt.Sprintf("limit must be a whole number from 1 to %d, got %d", maxDryRunLimit, *r.Limit))
		}
		limit = *r.Limit
	}
	return *r.Pipeline, limit, nil
}

func (a *API) dryRunEndpoint() endpoint {
	return endpoint{name: "pipeline/dry-run", post: true, parseDetailed: func(req *http.Request) (readFunc, *refusal) {
		body, err := io.ReadAll(io.LimitReader(req.Body, maxDryRunBody+1))
		if err != nil {
			return nil, &refusal{Error: apierror.New(http.StatusBadRequest, apierror.InvalidBody, "the body could not be read: "+err.Error())}
		}
		if len(body) > maxDryRunBody {
			return nil, &refusal{Error: apierror.New(http.StatusRequestEntityTooLarge, apierror.PayloadTooLarge,
				fmt.Sprintf("the body is larger than %d bytes; a pipeline is far smaller", maxDryRunBody))}
		}
		p, limit, e := parseDryRun(body)
		if e != nil {
			return nil, &refusal{Error: e}
		}
		// The compiler the pipeline runs, before a read slot is taken: a mistake is
		// answered at once, whatever storage is doing.
		c, err := pipelinecfg.Compile(p)
		if err != nil {
			return nil, invalidPipeline(err)
		}
		return func(ctx context.Context, js jetstream.JetStream, projectID string) (any, error) {
			v := &eventsView{limit: limit, maxBytes: maxReadBytes}
			if err := readRecent(ctx, js, projectID, "", v); err != nil {
				return nil, err
			}
			recs := make([]storedRecord, 0, len(v.out))
			for i := len(v.out) - 1; i >= 0; i-- { // oldest first, as the pipeline sees them
				recs = append(recs, v.out[i])
			}
			ans := evaluate(ctx, c, recs, dryRunLimits{evalTime: dryRunEvalTime, callBytes: maxDryRunCallBytes, recordBytes: maxDryRunRecordBytes,
				errors: maxDryRunErrors, maxRecordBytes: a.set.MaxRecordBytes, heldBytes: maxDryRunHeldBytes})
			ans.Truncated = v.truncated
			return ans, nil
		}, nil
	}}
}

// invalidPipeline is the 400 the control plane's PUT gives (message "field: parser's
// message"), with the field, the statement's index and the position beside it, as the
// control plane's validation names them.
func invalidPipeline(err error) *refusal {
	r := &refusal{Error: apierror.New(http.StatusBadRequest, apierror.InvalidPipeline, err.Error()), details: map[string]any{}}
	if fe, ok := pipelinecfg.IsFieldError(err); ok {
		r.details["field"] = fe.Field
	}
	var ce *ottlevent.CompileError
	if errors.As(err, &ce) {
		if ce.Index >= 0 {
			r.details["index"] = ce.Index
		}
		if ce.Line > 0 && ce.Column > 0 {
			r.details["position"] = map[string]int{"line": ce.Line, "column": ce.Column}
		}
	}
	return r
}
