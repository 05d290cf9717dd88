package agentexporter

import (
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/component"

	"github.com/otelcol-svc/otelcol-svc/components/mirror/mirrorcache"
	"github.com/otelcol-svc/otelcol-svc/components/natsclient"
	"github.com/otelcol-svc/otelcol-svc/components/outbound"
	"github.com/otelcol-svc/otelcol-svc/components/streams"
)

// Config of the agent exporter.
type Config struct {
	// NATS is where the dead-letter streams live.
	NATS natsclient.Config `mapstructure:"nats"`
	// Mirror names the projectauth extension whose configuration mirror it reads.
	Mirror component.ID `mapstructure:"mirror"`
	// DeadLetterStream holds the limits of each project's dead-letter stream, applied when
	// the exporter first dead-letters a call of the project.
	DeadLetterStream streams.Limits `mapstructure:"dead_letter_stream"`
	// Timeout bounds one attempt: connecting, sending, and the agent's answer.
	Timeout time.Duration `mapstructure:"timeout"`
	// Retry is the backoff between attempts of one call and the call's retry budget.
	Retry RetryConfig `mapstructure:"retry"`
	// AllowCIDRs is the comma-separated SVC_OUTBOUND_ALLOW value: ranges the agent may be
	// in although they are loopback or private.
	AllowCIDRs string `mapstructure:"allow_cidrs"`
	// MaxResponseBytes is how much of an answer is read; the rest is discarded.
	MaxResponseBytes int64 `mapstructure:"max_response_bytes"`
}

// RetryConfig is exponential backoff with full jitter, within a budget per call.
type RetryConfig struct {
	// InitialInterval caps the wait after the first failed attempt; the cap doubles after
	// every further one. The wait itself is random between zero and the cap.
	InitialInterval time.Duration `mapstructure:"initial_interval"`
	// MaxInterval is the largest cap.
	MaxInterval time.Duration `mapstructure:"max_interval"`
	// MaxElapsedTime is the retry budget: no attempt starts later than this after the
	// first; then the call goes to the dead-letter stream.
	MaxElapsedTime time.Duration `mapstructure:"max_elapsed_time"`
}

func defaultConfig() *Config {
	return &Config{
		NATS:             natsclient.DefaultConfig(),
		Mirror:           mirrorcache.DefaultExtension,
		DeadLetterStream: streams.DefaultLimits(),
		Timeout:          10 * time.Second,
		Retry: RetryConfig{
			InitialInterval: 500 * time.Millisecond,
			MaxInterval:     30 * time.Second,
			MaxElapsedTime:  2 * time.Minute,
		},
		MaxResponseBytes: 64 << 10,
	}
}

// Validate checks the configuration.
func (c *Config) Validate() error {
	var errs []error
	if err := c.NATS.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("nats: %w", err))
	}
	if err := mirrorcache.CheckExtension(c.Mirror); err != nil {
		errs = append(errs, err)
	}
	if err := c.DeadLetterStream.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("dead_letter_stream: %w", err))
	}
	if c.Timeout <= 0 {
		errs = append(errs, errors.New("timeout must be positive (it bounds each attempt, e.g. 10s)"))
	}
	if err := c.Retry.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("retry: %w", err))
	}
	if _, err := outbound.ParseAllow(c.AllowCIDRs); err != nil {
		errs = append(errs, fmt.Errorf("allow_cidrs: %w", err))
	}
	if c.MaxResponseBytes < 1 {
		errs = append(errs, errors.New("max_response_bytes must be at least 1"))
	}
	return errors.Join(errs...)
}

// Validate checks the backoff settings.
func (r RetryConfig) Validate() error {
	var errs []error
	if r.InitialInterval <= 0 {
		errs = append(errs, errors.New("initial_interval must be positive"))
	}
	if r.MaxInterval < r.InitialInterval {
		errs = append(errs, errors.New("max_interval must not be less than initial_interval"))
	}
	if r.MaxElapsedTime <= 0 {
		errs = append(errs, errors.New("max_elapsed_time must be positive (it is the retry budget of each call)"))
	}
	return errors.Join(errs...)
}
