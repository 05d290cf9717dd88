// Package pipelinecfg compiles a project's pipeline configuration (docs/contract.md#section-6)
// into ready-to-run OTTL expressions. Compiling is the expensive part, so each data-plane
// component does it once per configuration version (Cache), and the control plane uses the
// same code (Compile) to refuse an invalid expression when it is saved.
package pipelinecfg

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/metric/noop"
	nooptrace "go.opentelemetry.io/otel/trace/noop"
	"go.uber.org/zap"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/mirrorcache"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/ottlevent"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/principal"
	"github.com/otelcol-svc/otelcol-svc/internal/incident"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/validation"
)

// Compiled is a project's pipeline, ready to run. Safe for concurrent use.
type Compiled struct {
	Version int64
	// Mode is mirror.ModeLegacy, ModeWindow or ModeIncident; Window is Mode ==
	// ModeWindow, as it was before there were three.
	Mode    string
	Trigger *ottlevent.Condition // matches every record when the trigger is empty
	// TriggerFields are the top-level fields the trigger reads, when it reads named
	// fields only: records are then decoded in part to evaluate it.
	TriggerFields  map[string]bool
	Transforms     *ottlevent.Statements // nil when there are none
	ContextFilter  *ottlevent.Condition  // window and incident modes; matches every record when empty
	GroupKey       *ottlevent.ValueExpr  // window mode; nil: one group per project
	Window         bool
	WindowDuration time.Duration
	BatchSize      int

	// Incident mode (compiled in every mode, used in incident mode). Fingerprint names
	// a record's incident (nil: one incident per project); ResolveWhen resolves the open
	// incident of a record's fingerprint (nil: only resolve_after and people resolve).
	// Incident holds the timings, defaults applied.
	Fingerprint *ottlevent.ValueExpr
	ResolveWhen *ottlevent.Condition
	Incident    incident.Settings
	// IncidentFields are the top-level fields incident mode reads (trigger,
	// resolve_when, fingerprint and context_filter together) when they read named
	// fields only and no transform runs before them: records are then decoded in part.
	IncidentFields map[string]bool

	// Guardrails. Cooldown 0 is off. DedupKey is nil when not set: the group key in
	// window mode, one key per project in legacy mode.
	Cooldown time.Duration
	DedupKey *ottlevent.ValueExpr
	// WindowMaxBytes and WindowMaxEvents are the window budget, defaults applied.
	WindowMaxBytes  int
	WindowMaxEvents int
	// MaxCallsPerMinute and MaxCallsPerDay (0 off) are enforced by the agent exporter.
	MaxCallsPerMinute int
	MaxCallsPerDay    int
}

// FieldError says which configuration field is wrong, for a 400 invalid_pipeline.
type FieldError struct {
	Field string // the field's JSON name (docs/contract.md#section-6), e.g. trigger or cooldown_seconds
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
	mode, err := modeOf(p)
	if err != nil {
		return nil, err
	}
	c := &Compiled{Mode: mode, Window: mode == mirror.ModeWindow, BatchSize: p.BatchSize,
		WindowDuration: time.Duration(p.WindowDurationSeconds) * time.Second}
	if c.BatchSize == 0 {
		c.BatchSize = mirror.DefaultBatchSize
	}
	if c.WindowDuration == 0 {
		c.WindowDuration = mirror.DefaultWindowDurationSeconds * time.Second
	}
	if p.BatchSize < 0 || p.BatchSize > 1000 {
		return nil, &FieldError{"batch_size", fmt.Errorf("must be between 1 and 1000, got %d", p.BatchSize)}
	}
	if p.WindowDurationSeconds < 0 || p.WindowDurationSeconds > 7*24*3600 {
		return nil, &FieldError{"window_duration_seconds", fmt.Errorf("must be between 1 and 604800, got %d", p.WindowDurationSeconds)}
	}
	if err := c.guardrails(p); err != nil {
		return nil, err
	}
	if res, ok := validation.CheckLimits(p); !ok {
		return nil, &FieldError{res.Field, &limitError{res.Message}}
	}
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
	if strings.TrimSpace(p.DedupKey) != "" {
		if c.DedupKey, err = ottlevent.CompileValue(p.DedupKey, settings); err != nil {
			return nil, &FieldError{"dedup_key", err}
		}
	}
	// Incident mode's fields are checked in every mode, as group_key is: a mistake is
	// said when it is saved, not when the mode changes.
	if err := c.incident(p); err != nil {
		return nil, err
	}
	return c, nil
}

// modeOf is the pipeline's mode, mirror.Pipeline.EffectiveMode, refusing a mode this
// version does not know and a legacy mode that also asks for windows.
func modeOf(p mirror.Pipeline) (string, error) {
	switch m := p.EffectiveMode(); m {
	case mirror.ModeWindow, mirror.ModeIncident:
		return m, nil
	case mirror.ModeLegacy:
		if p.WindowEnabled {
			return "", &FieldError{"mode", errors.New(`"legacy" sends records without windows, but window_enabled is true: ` +
				`set mode to "window", or window_enabled to false`)}
		}
		return m, nil
	default:
		if len(m) > 40 {
			m = strings.ToValidUTF8(m[:40], "") + "…"
		}
		return "", &FieldError{"mode", fmt.Errorf(`must be "legacy", "window" or "incident", got %q`, m)}
	}
}

// incident compiles incident mode's fields. Cooldowns do not apply in incident mode:
// group_interval paces an incident's calls.
func (c *Compiled) incident(p mirror.Pipeline) error {
	incidentMode := c.Mode == mirror.ModeIncident
	for _, f := range []struct {
		field string
		p     mirror.Pipeline
	}{
		{"group_wait", mirror.Pipeline{GroupWait: p.GroupWait}},
		{"group_interval", mirror.Pipeline{GroupInterval: p.GroupInterval}},
		{"resolve_after", mirror.Pipeline{ResolveAfter: p.ResolveAfter}},
		{"reopen_within", mirror.Pipeline{ReopenWithin: p.ReopenWithin}},
	} {
		// One duration at a time, so the error names its field whatever its wording.
		if _, err := incident.SettingsOf(f.p); err != nil {
			msg := strings.TrimPrefix(err.Error(), f.field+": ")
			return &FieldError{f.field, errors.New(msg)}
		}
	}
	var err error
	if c.Incident, err = incident.SettingsOf(p); err != nil {
		return &FieldError{"mode", err} // each field passed alone: not reached
	}
	if incidentMode {
		c.Cooldown = 0
	}
	if strings.TrimSpace(p.Fingerprint) != "" {
		if c.Fingerprint, err = ottlevent.CompileValue(p.Fingerprint, settings); err != nil {
			return &FieldError{"fingerprint", err}
		}
	}
	if strings.TrimSpace(p.ResolveWhen) != "" {
		if c.ResolveWhen, err = ottlevent.CompileCondition(p.ResolveWhen, settings); err != nil {
			return &FieldError{"resolve_when", err}
		}
	}
	if !incidentMode || c.Transforms != nil {
		return nil // no incident mode, or its expressions read the transformed record: decoded whole
	}
	fields := map[string]bool{}
	reads := []func() (map[string]bool, bool){c.Trigger.Reads, c.ContextFilter.Reads}
	if c.Fingerprint != nil {
		reads = append(reads, c.Fingerprint.Reads)
	}
	if c.ResolveWhen != nil {
		reads = append(reads, c.ResolveWhen.Reads)
	}
	for _, r := range reads {
		f, ok := r()
		if !ok {
			return nil
		}
		for k := range f {
			fields[k] = true
		}
	}
	c.IncidentFields = fields
	return nil
}

// ErrOverLimits is what a pipeline past the limits of this version fails with
// (errors.Is): too many statements, an expression too long (internal/validation), or
// a function or argument the allow-list refuses (ottlevent.ErrFunctionRefused). Such a
// pipeline may have been saved before an upgrade brought the limits: its project pauses
// until it is edited, and Cache logs it once per version (SetLogger).
var ErrOverLimits = errors.New("pipeline over the limits of this version")

type limitError struct{ msg string }

func (e *limitError) Error() string        { return e.msg }
func (e *limitError) Is(target error) bool { return target == ErrOverLimits }

// IsOverLimits reports whether err is a pipeline past this version's limits.
func IsOverLimits(err error) bool {
	return errors.Is(err, ErrOverLimits) || errors.Is(err, ottlevent.ErrFunctionRefused)
}

// Once answers true the first time it is asked about a project's configuration
// version, so that a tenant's mistake is logged at WARN once per version, not once per
// record, while each record is still counted in a metric. Safe for concurrent use; it
// holds one entry per project asked about.
type Once struct{ seen sync.Map }

// First reports whether this is the first call for project at version.
func (o *Once) First(project string, version int64) bool {
	prev, loaded := o.seen.Swap(project, version)
	return !loaded || prev.(int64) != version
}

// Forget drops a project (deleted).
func (o *Once) Forget(project string) { o.seen.Delete(project) }

type entry struct {
	version  int64
	compiled *Compiled
	err      error
}

// Cache holds the compiled pipelines of one component instance, each compiled once per
// configuration version. It belongs to its component (not the process), so two
// collectors in one process, or tests, never share or leak entries, and it follows the
// mirror so that a project deleted there is dropped here too.
type Cache struct {
	mirror  *mirrorcache.Cache
	entries sync.Map // project id -> *entry; read on every batch, written on changes
	stop    func()
	logger  atomic.Pointer[zap.Logger]
	warned  Once // two batches may compile one version at once; one says it
}

// SetLogger has the cache log, at WARN, each project whose pipeline is past this
// version's limits (IsOverLimits), once per configuration version, naming the project
// and the limit: after an upgrade that brought a limit, such a project pauses until its
// pipeline is edited, and the operator should know which and why. The component that
// pauses projects on Check sets it.
func (c *Cache) SetLogger(l *zap.Logger) { c.logger.Store(l) }

// NewCache returns a cache that drops the entries of projects deleted from m. Close it
// when its component shuts down.
func NewCache(m *mirrorcache.Cache) *Cache {
	c := &Cache{mirror: m}
	c.stop = m.Subscribe(func(ch mirrorcache.Change) {
		if ch.Bucket == mirror.BucketProjects && ch.Deleted {
			c.prune(ch.Key)
		}
	})
	return c
}

// Close stops following the mirror.
func (c *Cache) Close() {
	if c != nil && c.stop != nil {
		c.stop()
	}
}

// prune drops a deleted project, and any other entry whose project is gone: a batch of a
// project read from the mirror just before its deletion may have stored its entry after
// the deletion was seen.
func (c *Cache) prune(id string) {
	c.entries.Delete(id)
	c.entries.Range(func(k, _ any) bool {
		if _, ok := c.mirror.Project(k.(string)); !ok {
			c.entries.Delete(k)
		}
		return true
	})
}

// Len is how many projects have an entry.
func (c *Cache) Len() int {
	n := 0
	c.entries.Range(func(any, any) bool { n++; return true })
	return n
}

// Get returns the compiled pipeline of a project, compiling it when its version changed.
func (c *Cache) Get(p mirror.Project) (*Compiled, error) {
	if e, ok := c.entries.Load(p.ID); ok && e.(*entry).version == p.Version {
		return e.(*entry).compiled, e.(*entry).err
	}
	compiled, err := Compile(p.Pipeline)
	if compiled != nil {
		compiled.Version = p.Version
	}
	if l := c.logger.Load(); l != nil && IsOverLimits(err) && c.warned.First(p.ID, p.Version) {
		l.Warn("project paused until its pipeline is edited: it is past the limits of this version",
			zap.String("project_id", p.ID), zap.Int64("config_version", p.Version), zap.Error(err))
	}
	c.entries.Store(p.ID, &entry{version: p.Version, compiled: compiled, err: err})
	return compiled, err
}

// Check reports whether a project's pipeline compiles (the JetStream receiver pauses a
// project that does not).
func (c *Cache) Check(p mirror.Project) error {
	_, err := c.Get(p)
	return err
}

// ErrNoProject is returned for a request of a project the mirror does not know (deleted
// meanwhile): retryable, the receiver stops consuming it at its next reconcile.
var ErrNoProject = errors.New("project not in the configuration mirror")

// ForRequest returns the project of a pipeline-role request and its compiled pipeline.
// ok is false when the request carries no project (not from the JetStream receiver).
func (c *Cache) ForRequest(ctx context.Context) (p mirror.Project, compiled *Compiled, ok bool, err error) {
	pr, ok := principal.FromContext(ctx)
	if !ok {
		return mirror.Project{}, nil, false, nil
	}
	p, found := c.mirror.Project(pr.ProjectID)
	if !found {
		return mirror.Project{}, nil, true, fmt.Errorf("%w: %s", ErrNoProject, pr.ProjectID)
	}
	compiled, err = c.Get(p)
	return p, compiled, true, err
}

// IsFieldError reports whether err names a configuration field.
func IsFieldError(err error) (*FieldError, bool) {
	var fe *FieldError
	ok := errors.As(err, &fe)
	return fe, ok
}
