package projectauthextension

import (
	"fmt"

	"github.com/otelcol-svc/otelcol-svc/components/natsclient"
)

// Config of the project-aware authenticator.
type Config struct {
	// NATS is where the configuration mirror lives.
	NATS natsclient.Config `mapstructure:"nats"`
}

// Validate checks the NATS settings.
func (c *Config) Validate() error {
	if err := c.NATS.Validate(); err != nil {
		return fmt.Errorf("nats: %w", err)
	}
	return nil
}
