package windowprocessor

import (
	"errors"
	"net/url"
	"time"

	"go.opentelemetry.io/collector/component"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/mirrorcache"
)

// Config of the window processor. The window itself (transforms, trigger, context filter,
// group key, duration) is per project, from the configuration mirror.
type Config struct {
	// RedisURL selects the Redis window store, shared by every pipeline process
	// (configs pass ${env:REDIS_URL:-}). Empty: windows are kept in this process's memory.
	RedisURL string `mapstructure:"redis_url"`
	// SweepInterval is how often the in-memory store drops expired windows.
	SweepInterval time.Duration `mapstructure:"sweep_interval"`
	// Mirror names the configmirror extension whose configuration mirror it reads.
	Mirror component.ID `mapstructure:"mirror"`
	// MaxRecordBytes bounds a record while the project's transforms run on it
	// (SVC_MAX_RECORD_BYTES): a statement that would pass it fails the record, which is
	// dead-lettered with the error and neither triggers nor joins a window.
	MaxRecordBytes int `mapstructure:"max_record_bytes"`
	// MemoryMaxProjectBytes bounds what one project's windows hold in this process's
	// memory (the in-memory store; Redis is bounded by its own maxmemory). Each group
	// is held to 50,000 records, but a project may make any number of groups; past
	// this bound its oldest entries are evicted first, whatever their group.
	MemoryMaxProjectBytes int `mapstructure:"memory_max_project_bytes"`
	// MemoryMaxBytes bounds what all projects' windows hold in this process's memory
	// together (SVC_WINDOW_MAX_BYTES): one account may own several projects, each at its
	// own bound. Past it the oldest entries of the project holding the most are evicted
	// first, so the tenants that filled the memory lose context, not the small ones.
	MemoryMaxBytes int `mapstructure:"memory_max_bytes"`
}

// Validate checks the configuration.
func (c *Config) Validate() error {
	var errs []error
	if c.RedisURL != "" {
		if u, err := url.Parse(c.RedisURL); err != nil || (u.Scheme != "redis" && u.Scheme != "rediss" && u.Scheme != "unix") {
			errs = append(errs, errors.New("redis_url must look like redis://host:6379/0 (or rediss://, unix://)"))
		}
	}
	if c.SweepInterval <= 0 {
		errs = append(errs, errors.New("sweep_interval must be positive"))
	}
	if err := mirrorcache.CheckExtension(c.Mirror); err != nil {
		errs = append(errs, err)
	}
	if c.MemoryMaxProjectBytes < 1 {
		errs = append(errs, errors.New("memory_max_project_bytes must be positive, e.g. 67108864"))
	}
	if c.MemoryMaxBytes < 1 {
		errs = append(errs, errors.New("memory_max_bytes must be positive, e.g. 268435456"))
	}
	if c.MaxRecordBytes < 1 {
		errs = append(errs, errors.New("max_record_bytes must be positive, e.g. 1000000"))
	}
	return errors.Join(errs...)
}
