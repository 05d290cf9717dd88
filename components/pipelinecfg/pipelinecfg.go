// Package pipelinecfg compiles a project's pipeline configuration (contract section 6)
// into ready-to-run OTTL expressions. Compiling is the expensive part, so the data plane
// does it once per configuration version per process (Get), and the control plane uses the
// same code (Compile) to refuse an invalid expression when it is saved.
package pipelinecfg

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/metric/noop"
	nooptrace "go.opentelemetry.io/otel/trace/noop"
	"go.uber.org/zap"

	"github.com/otelcol-svc/otelcol-svc/components/mirror"
	"github.com/otelcol-svc/otelcol-svc/components/mirror/mirrorcache"
	"github.com/otelcol-svc/otelcol-svc/components/ottlevent"
	"github.com/otelcol-svc/otelcol-svc/components/tenant"
)

// Defaults of contract section 6.
const (
	DefaultBatchSize      = 10
	DefaultWindowDuration = 300 * time.Second
)

// Compiled is a project's pipeline, ready to run. Safe for concurrent use.
type Compiled struct {
	Version int64
	Trigger *ottlevent.Condition // matches every record when the trigger is empty
	// TriggerFields are the top-level fields the trigger reads, when it reads named
	// fields only: records are then decoded in part to evaluate it.
	TriggerFields  map[string]bool
	Transforms     *ottlevent.Statements // nil when there are none
	ContextFilter  *ottlevent.Condition  // window mode; matches every record when empty
	GroupKey       *ottlevent.ValueExpr  // window mode; nil: one group per project
	Window         bool
	WindowDuration time.Duration
	BatchSize      int
}

// FieldError says which configuration field is wrong, for a 400 invalid_pipeline.
type FieldError struct {
	Field string // trigger, transforms, context_filter, group_key, batch_size, window_duration_seconds
	Err   error
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Err.Error() }
func (e *FieldError) Unwrap() error { return e.Err }

// settings for OTTL: the parser logs nothing we need, and compiled expressions are shared
// by every component of the process.
var settings = component.TelemetrySettings{
	Logger:         zap.NewNop(),
	MeterProvider:  noop.NewMeterProvider(),
	TracerProvider: nooptrace.NewTracerProvider(),
}

// Compile compiles every expression of a pipeline configuration, reporting the first
// field that does not compile.
func Compile(p mirror.Pipeline) (*Compiled, error) {
	c := &Compiled{Window: p.WindowEnabled, BatchSize: p.BatchSize, WindowDuration: time.Duration(p.WindowDurationSeconds) * time.Second}
	if c.BatchSize == 0 {
		c.BatchSize = DefaultBatchSize
	}
	if c.WindowDuration == 0 {
		c.WindowDuration = DefaultWindowDuration
	}
	if p.BatchSize < 0 || p.BatchSize > 1000 {
		return nil, &FieldError{"batch_size", fmt.Errorf("must be between 1 and 1000, got %d", p.BatchSize)}
	}
	if p.WindowDurationSeconds < 0 || p.WindowDurationSeconds > 7*24*3600 {
		return nil, &FieldError{"window_duration_seconds", fmt.Errorf("must be between 1 and 604800, got %d", p.WindowDurationSeconds)}
	}
	var err error
	if c.Trigger, err = ottlevent.CompileCondition(p.Trigger, settings); err != nil {
		return nil, &FieldError{"trigger", err}
	}
	if fields, ok := c.Trigger.Reads(); ok {
		c.TriggerFields = fields
	}
	if len(p.Transforms) > 0 {
		if c.Transforms, err = ottlevent.CompileStatements(p.Transforms, settings); err != nil {
			return nil, &FieldError{"transforms", err}
		}
	}
	if c.ContextFilter, err = ottlevent.CompileCondition(p.ContextFilter, settings); err != nil {
		return nil, &FieldError{"context_filter", err}
	}
	if p.GroupKey != "" {
		if c.GroupKey, err = ottlevent.CompileValue(p.GroupKey, settings); err != nil {
			return nil, &FieldError{"group_key", err}
		}
	}
	return c, nil
}

type entry struct {
	version  int64
	compiled *Compiled
	err      error
}

var cache sync.Map // project id -> *entry

// Get returns the compiled pipeline of a project, compiling it when its version changed.
func Get(p mirror.Project) (*Compiled, error) {
	if e, ok := cache.Load(p.ID); ok && e.(*entry).version == p.Version {
		return e.(*entry).compiled, e.(*entry).err
	}
	c, err := Compile(p.Pipeline)
	if c != nil {
		c.Version = p.Version
	}
	cache.Store(p.ID, &entry{version: p.Version, compiled: c, err: err})
	return c, err
}

// Check reports whether a project's pipeline compiles (the JetStream receiver pauses a
// project that does not).
func Check(p mirror.Project) error {
	_, err := Get(p)
	return err
}

// IsFieldError reports whether err names a configuration field.
func IsFieldError(err error) (*FieldError, bool) {
	var fe *FieldError
	ok := errors.As(err, &fe)
	return fe, ok
}

// ErrNoProject is returned for a request of a project the mirror does not know (deleted
// meanwhile): retryable, the receiver stops consuming it at its next reconcile.
var ErrNoProject = errors.New("project not in the configuration mirror")

// ForRequest returns the project of a pipeline-role request and its compiled pipeline.
// ok is false when the request carries no project (not from the JetStream receiver).
func ForRequest(ctx context.Context, cache *mirrorcache.Cache) (p mirror.Project, c *Compiled, ok bool, err error) {
	pr, ok := tenant.FromContext(ctx)
	if !ok {
		return mirror.Project{}, nil, false, nil
	}
	p, found := cache.Project(pr.ProjectID)
	if !found {
		return mirror.Project{}, nil, true, fmt.Errorf("%w: %s", ErrNoProject, pr.ProjectID)
	}
	c, err = Get(p)
	return p, c, true, err
}
