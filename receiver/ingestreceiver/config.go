package ingestreceiver

import (
	"errors"
	"time"

	"go.opentelemetry.io/collector/config/confighttp"
)

// Config of the ingest receiver.
type Config struct {
	// The HTTP server: endpoint (default 0.0.0.0:4318), TLS, CORS, max_request_body_size
	// (answered with 413 past it), and auth, which must name the projectauth extension.
	confighttp.ServerConfig `mapstructure:",squash"`
	// RetryAfter is what 503 answers advertise in Retry-After.
	RetryAfter time.Duration `mapstructure:"retry_after"`
}

// Validate checks the configuration.
func (c *Config) Validate() error {
	var errs []error
	if c.NetAddr.Endpoint == "" {
		errs = append(errs, errors.New("endpoint is required, e.g. 0.0.0.0:4318"))
	}
	if !c.Auth.HasValue() {
		errs = append(errs, errors.New("auth.authenticator is required: name the projectauth extension, e.g. `auth: {authenticator: projectauth}`"))
	}
	if c.MaxRequestBodySize < 0 {
		errs = append(errs, errors.New("max_request_body_size must not be negative"))
	}
	if c.RetryAfter <= 0 {
		errs = append(errs, errors.New("retry_after must be positive"))
	}
	return errors.Join(errs...)
}
