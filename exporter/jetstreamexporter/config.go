package jetstreamexporter

import (
	"errors"
	"fmt"
	"time"

	"github.com/otelcol-svc/otelcol-svc/components/natsclient"
	"github.com/otelcol-svc/otelcol-svc/components/streams"
)

// Config of the JetStream exporter.
type Config struct {
	NATS natsclient.Config `mapstructure:"nats"`
	// Stream holds the limits of each project's raw stream, applied when the exporter
	// first publishes for a project.
	Stream streams.Limits `mapstructure:"stream"`
	// PublishTimeout bounds how long a request waits for JetStream to confirm its records
	// before it is answered 503: no request hangs while NATS is slow or away.
	PublishTimeout time.Duration `mapstructure:"publish_timeout"`
	// MaxPending is how many unconfirmed publishes may be in flight per process.
	MaxPending int `mapstructure:"max_pending"`
}

// Validate checks the configuration.
func (c *Config) Validate() error {
	var errs []error
	if err := c.NATS.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("nats: %w", err))
	}
	if err := c.Stream.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("stream: %w", err))
	}
	if c.PublishTimeout <= 0 {
		errs = append(errs, errors.New("publish_timeout must be positive"))
	}
	if c.MaxPending < 1 {
		errs = append(errs, errors.New("max_pending must be at least 1"))
	}
	return errors.Join(errs...)
}
