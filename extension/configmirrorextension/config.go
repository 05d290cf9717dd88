package configmirrorextension

import (
	"fmt"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/natsclient"
)

// Config of the configuration mirror extension.
type Config struct {
	// NATS is where the configuration mirror lives (the KV buckets the control plane
	// writes), and where the control plane's pipeline checks are answered.
	NATS natsclient.Config `mapstructure:"nats"`
}

// Validate checks the settings.
func (c *Config) Validate() error {
	if err := c.NATS.Validate(); err != nil {
		return fmt.Errorf("nats: %w", err)
	}
	return nil
}
