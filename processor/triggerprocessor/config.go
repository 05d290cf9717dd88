package triggerprocessor

import (
	"errors"
	"net/url"

	"go.opentelemetry.io/collector/component"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/mirrorcache"
)

// Config of the trigger processor. Everything it does is per project, from the
// configuration mirror (trigger, transforms and guardrails, docs/contract.md#section-6).
type Config struct {
	// RedisURL selects Redis for the cooldowns of cooldown_seconds, shared by every
	// pipeline process (configs pass ${env:REDIS_URL:-}, as to the window processor).
	// Empty: cooldowns are kept in this process's memory.
	RedisURL string `mapstructure:"redis_url"`
	// Mirror names the configmirror extension whose configuration mirror it reads.
	Mirror component.ID `mapstructure:"mirror"`
	// MaxRecordBytes bounds a record while the project's transforms run on it
	// (SVC_MAX_RECORD_BYTES, as the receiver stores no larger one): a statement that
	// would pass it fails the record, which is dead-lettered with the error.
	MaxRecordBytes int `mapstructure:"max_record_bytes"`
}

// Validate implements component.ConfigValidator.
func (c *Config) Validate() error {
	var errs []error
	if c.RedisURL != "" {
		if u, err := url.Parse(c.RedisURL); err != nil || (u.Scheme != "redis" && u.Scheme != "rediss" && u.Scheme != "unix") {
			errs = append(errs, errors.New("redis_url must look like redis://host:6379/0 (or rediss://, unix://)"))
		}
	}
	if err := mirrorcache.CheckExtension(c.Mirror); err != nil {
		errs = append(errs, err)
	}
	if c.MaxRecordBytes < 1 {
		errs = append(errs, errors.New("max_record_bytes must be positive, e.g. 1000000"))
	}
	return errors.Join(errs...)
}
