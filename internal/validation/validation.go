// Package validation is how the control plane has a pipeline checked by the data plane,
// over NATS request/reply (a NATS micro service, internal/collector/validationresponder).
//
// Why over NATS rather than in the control plane: OTTL (contrib pkg/ottl) is collector
// code (it imports the collector's component and pdata packages), and the control plane
// links no collector code. Asking a running collector has a second merit: what the control
// plane accepts is exactly what the collectors' OTTL version accepts, even while the two
// are upgraded separately. The price is that saving a pipeline needs a running collector;
// without one the control plane answers 503 with Retry-After, an honest "retry later".
//
// This package (subject, messages, client) is collector-free; the responder is not.
package validation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
)

const (
	// ServiceName is the micro service's name (`nats micro info svc-pipeline`).
	ServiceName = "svc-pipeline"
	// Version is the protocol's version, in the service's identity.
	Version = "1.0.0"
	// Subject is the validation endpoint's subject. The body is a mirror.Pipeline as JSON
	// (docs/contract.md#section-6), the answer a Result.
	Subject = "svc.pipeline.validate"
	// Timeout is how long a caller waits for a data-plane process to answer.
	Timeout = 2 * time.Second
)

// Result is the responder's answer: OK, or the first field that does not compile and why
// (the message is the one a 400 invalid_pipeline shows after "<field>: ").
type Result struct {
	OK      bool   `json:"ok"`
	Field   string `json:"field,omitempty"`
	Message string `json:"message,omitempty"`
	// Warnings (warnings.go) come with OK for a pipeline of a project (CheckProject).
	Warnings []Warning `json:"warnings,omitempty"`
}

// Limits of a pipeline's expressions. Each statement runs on every matching record in
// a process shared by every project, so their number and length are bounded where the
// pipeline is saved (the control plane, CheckLimits) and where it is compiled (the data
// plane, pipelinecfg.Compile, which also answers the control plane's Check). 100
// statements and 4,096 bytes an expression are many times what a readable pipeline
// uses; a longer one is almost surely generated, or an attack.
const (
	MaxStatements      = 100
	MaxExpressionBytes = 4096
)

// CheckLimits refuses a pipeline past the limits, naming the field as a 400
// invalid_pipeline does, before anything is compiled or sent.
func CheckLimits(p mirror.Pipeline) (Result, bool) {
	if n := len(p.Transforms); n > MaxStatements {
		return Result{Field: "transforms", Message: fmt.Sprintf("%d statements; a pipeline has at most %d", n, MaxStatements)}, false
	}
	for i, s := range p.Transforms {
		if len(s) > MaxExpressionBytes {
			return Result{Field: "transforms", Message: fmt.Sprintf("statement %d is %d bytes long; an expression has at most %d", i, len(s), MaxExpressionBytes)}, false
		}
	}
	for _, e := range []struct{ field, expr string }{
		{"trigger", p.Trigger}, {"context_filter", p.ContextFilter}, {"group_key", p.GroupKey}, {"dedup_key", p.DedupKey},
		{"fingerprint", p.Fingerprint}, {"resolve_when", p.ResolveWhen},
	} {
		if len(e.expr) > MaxExpressionBytes {
			return Result{Field: e.field, Message: fmt.Sprintf("%d bytes long; an expression has at most %d", len(e.expr), MaxExpressionBytes)}, false
		}
	}
	return Result{OK: true}, true
}

// ErrUnavailable is returned when no data-plane process answered in time (none is
// running, or NATS is away): the pipeline could not be checked, so it must not be saved.
var ErrUnavailable = errors.New("no data-plane process answered the pipeline check")

// Check asks any one running data-plane process (the micro service's queue group) to
// compile p. An error other than ErrUnavailable is a protocol failure.
func Check(ctx context.Context, nc *nats.Conn, p mirror.Pipeline) (Result, error) {
	return CheckProject(ctx, nc, "", p)
}

// CheckProject is Check for a pipeline of projectID, which the responder also answers
// with warnings from the project's recent records (warnings.go); "" asks for none.
func CheckProject(ctx context.Context, nc *nats.Conn, projectID string, p mirror.Pipeline) (Result, error) {
	// Refused here without asking: such a pipeline may not even fit in a NATS message.
	if res, ok := CheckLimits(p); !ok {
		return res, nil
	}
	var res Result
	body, err := json.Marshal(p)
	if err != nil {
		return res, err
	}
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	req := nats.NewMsg(Subject)
	req.Data = body
	if projectID != "" {
		req.Header.Set(HeaderProjectID, projectID)
	}
	msg, err := nc.RequestMsgWithContext(ctx, req)
	switch {
	case errors.Is(err, nats.ErrNoResponders), errors.Is(err, nats.ErrTimeout), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, nats.ErrConnectionClosed), errors.Is(err, nats.ErrInvalidConnection):
		return res, fmt.Errorf("%w: %v", ErrUnavailable, err)
	case err != nil:
		return res, err
	}
	if code := msg.Header.Get("Nats-Service-Error-Code"); code != "" {
		return res, fmt.Errorf("pipeline check failed: %s %s", code, msg.Header.Get("Nats-Service-Error"))
	}
	if err := json.Unmarshal(msg.Data, &res); err != nil {
		return res, fmt.Errorf("pipeline check: undecodable answer: %w", err)
	}
	return res, nil
}
