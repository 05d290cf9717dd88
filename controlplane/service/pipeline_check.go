package service

import (
	"context"
	"errors"
	"regexp"
	"strconv"
	"strings"

	"github.com/otelcol-svc/otelcol-svc/controlplane/store"
	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/validation"
)

// Position locates a problem in an expression (1-based, as OTTL's parser counts).
type Position struct {
	Line   int `json:"line"`
	Column int `json:"column"`
}

// PipelineProblem is one reason a pipeline would be refused.
type PipelineProblem struct {
	Field   string `json:"field"`
	Message string `json:"message"`
	// Index is the statement's place in transforms (0-based); nil for other fields.
	Index    *int      `json:"index,omitempty"`
	Position *Position `json:"position,omitempty"`
}

// PipelineCheck is the answer of a dry validation.
type PipelineCheck struct {
	Valid  bool              `json:"valid"`
	Errors []PipelineProblem `json:"errors"`
	// Warnings are about a valid pipeline (a field the project's records never had):
	// shown, never a reason to refuse it.
	Warnings []PipelineProblem `json:"warnings"`
}

// Warnings are the check's warnings in the answers' shape (contract: "warnings").
func Warnings(ws []validation.Warning) []PipelineProblem {
	out := make([]PipelineProblem, 0, len(ws))
	for _, w := range ws {
		p := PipelineProblem{Field: w.Field, Message: w.Message, Index: w.Index}
		if w.Position != nil {
			p.Position = &Position{Line: w.Position.Line, Column: w.Position.Column}
		}
		out = append(out, p)
	}
	return out
}

// CheckPipelineDraft runs the checks PUT makes on a pipeline and saves nothing, so the
// dashboard can show a mistake while it is typed. Any member may ask (it reveals
// nothing they cannot read); the data plane's absence is the same 503 as PUT's.
func (s *Service) CheckPipelineDraft(ctx context.Context, userID, id string, b mirror.Pipeline) (PipelineCheck, error) {
	err := s.InProject(ctx, userID, id, Read, func(context.Context, *store.Tx, store.Project, string, *mirror.Store) error { return nil })
	if err != nil {
		return PipelineCheck{}, err
	}
	var warnings []validation.Warning
	if e := NormalizeMode(&b); e != nil {
		err = e
	} else {
		warnings, err = s.validatePipeline(ctx, id, WithDefaults(b))
	}
	pl := WithDefaults(b)
	if err == nil && pl.AgentEndpointURL != "" {
		if derr := s.CheckDestination(ctx, pl.AgentEndpointURL); derr != nil {
			err = InvalidPipeline("agent_endpoint_url", derr.Error())
		}
	}
	if err == nil {
		return PipelineCheck{Valid: true, Errors: []PipelineProblem{}, Warnings: Warnings(warnings)}, nil
	}
	var ae *apierror.Error
	if !errors.As(err, &ae) || ae.Code != apierror.InvalidPipeline {
		return PipelineCheck{}, err
	}
	field, msg, _ := strings.Cut(ae.Message, ": ")
	return PipelineCheck{Errors: []PipelineProblem{problemOf(field, msg)}, Warnings: []PipelineProblem{}}, nil
}

// compileHead is how the data plane's compiler starts an expression's error
// (ottlevent.CompileError): its kind, a statement's index, then the expression quoted.
var compileHead = regexp.MustCompile(`^(condition|statement|value)(?: (\d+))? `)

// posAt is the position OTTL's parser (participle) or our compiler writes as "at L:C".
var posAt = regexp.MustCompile(`\bat (\d+):(\d+)\b`)

// problemOf reads the statement index and position out of the data plane's message,
// which carries them only as text (validation.Result has field and message), and
// drops the quoted expression the page already shows in the field.
func problemOf(field, msg string) PipelineProblem {
	p := PipelineProblem{Field: field, Message: msg}
	m := compileHead.FindStringSubmatch(msg)
	if m == nil {
		return p
	}
	rest := msg[len(m[0]):]
	quoted, err := strconv.QuotedPrefix(rest)
	if err != nil {
		return p
	}
	rest = strings.TrimPrefix(rest[len(quoted):], " ")
	if m[2] != "" {
		if i, err := strconv.Atoi(m[2]); err == nil && i >= 0 {
			p.Index = &i
		}
	}
	if pm := posAt.FindStringSubmatch(rest); pm != nil {
		line, _ := strconv.Atoi(pm[1])
		col, _ := strconv.Atoi(pm[2])
		if line > 0 && col > 0 {
			p.Position = &Position{Line: line, Column: col}
		}
	}
	// " at 1:1: invalid path ..." or ": condition has invalid syntax at 1:20 ...".
	rest = strings.TrimPrefix(rest, ": ")
	if strings.HasPrefix(rest, "at ") {
		if _, after, ok := strings.Cut(rest, ": "); ok {
			rest = after
		}
	}
	if rest != "" {
		p.Message = rest
	}
	return p
}
