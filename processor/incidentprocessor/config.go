package incidentprocessor

import (
	"errors"
	"fmt"
	"net/url"
	"time"

	"go.opentelemetry.io/collector/component"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/mirrorcache"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/natsclient"
)

// Config of the incident processor. What makes an event, its fingerprint and the
// timings (group_wait, group_interval, resolve_after, reopen_within) are per project, from
// the configuration mirror.
type Config struct {
	// Mirror names the configmirror extension whose configuration mirror it reads.
	Mirror component.ID `mapstructure:"mirror"`
	// NATS is where the incident bucket (svc-incidents) and the projects' output streams
	// (the incident notices) live.
	NATS natsclient.Config `mapstructure:"nats"`
	// Replicas of the incident bucket and of an output stream a notice creates.
	Replicas int `mapstructure:"replicas"`
	// RedisURL shares the incidents' events and their fingerprints' context windows
	// between pipeline processes (configs pass ${env:REDIS_URL:-}). Empty: they are kept
	// in this process's memory, and a call made by another process carries only the
	// events this one stored.
	RedisURL string `mapstructure:"redis_url"`
	// MaxRecordBytes bounds a record while the project's transforms run on it
	// (SVC_MAX_RECORD_BYTES): a record grown past it is dead-lettered with the error.
	MaxRecordBytes int `mapstructure:"max_record_bytes"`
	// Tick is how often the due incidents are looked at (SVC_INCIDENT_TICK): the
	// precision of group_wait, group_interval and resolve_after.
	Tick time.Duration `mapstructure:"tick"`
	// ClaimTimeout is how long a claimed call whose process stopped heartbeating (killed)
	// waits before another process takes it over, under the same request id
	// (SVC_INCIDENT_CLAIM_TIMEOUT). A live process heartbeats every third of it.
	ClaimTimeout time.Duration `mapstructure:"claim_timeout"`
	// MaxConcurrentCalls bounds this process's incident calls in flight, across
	// incidents and projects; one incident's calls never overlap.
	MaxConcurrentCalls int `mapstructure:"max_concurrent_calls"`
	// MemoryMaxProjectBytes and MemoryMaxBytes bound the in-memory store (no Redis), as
	// the window processor's settings of the same names do.
	MemoryMaxProjectBytes int `mapstructure:"memory_max_project_bytes"`
	MemoryMaxBytes        int `mapstructure:"memory_max_bytes"`
}

// Validate checks the configuration.
func (c *Config) Validate() error {
	errs := mirrorcache.CheckConnection(c.NATS, c.Mirror)
	if c.RedisURL != "" {
		if u, err := url.Parse(c.RedisURL); err != nil || (u.Scheme != "redis" && u.Scheme != "rediss" && u.Scheme != "unix") {
			errs = append(errs, errors.New("redis_url must look like redis://host:6379/0 (or rediss://, unix://)"))
		}
	}
	if c.Replicas < 1 || c.Replicas > 5 {
		errs = append(errs, fmt.Errorf("replicas must be between 1 and 5, got %d", c.Replicas))
	}
	if c.MaxRecordBytes < 1 {
		errs = append(errs, errors.New("max_record_bytes must be positive, e.g. 1000000"))
	}
	if c.Tick < 10*time.Millisecond || c.Tick > time.Minute {
		errs = append(errs, fmt.Errorf("tick must be between 10ms and 1m, e.g. 1s, got %s", c.Tick))
	}
	if c.ClaimTimeout < 3*c.Tick || c.ClaimTimeout < 3*time.Second {
		// A claim must outlive a few heartbeats (every third of it) and ticks, or a
		// live call is taken over and made twice.
		errs = append(errs, fmt.Errorf("claim_timeout must be at least 3s and 3 ticks, e.g. 30s, got %s", c.ClaimTimeout))
	}
	if c.MaxConcurrentCalls < 1 {
		errs = append(errs, errors.New("max_concurrent_calls must be positive, e.g. 16"))
	}
	if c.MemoryMaxProjectBytes < 1 {
		errs = append(errs, errors.New("memory_max_project_bytes must be positive, e.g. 67108864"))
	}
	if c.MemoryMaxBytes < 1 {
		errs = append(errs, errors.New("memory_max_bytes must be positive, e.g. 268435456"))
	}
	return errors.Join(errs...)
}
