package agentexporter

import (
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/component"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/mirrorcache"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/natsclient"
	"github.com/otelcol-svc/otelcol-svc/internal/delivery"
)

// Config of the agent exporter.
type Config struct {
	// NATS is where the dead-letter streams live.
	NATS natsclient.Config `mapstructure:"nats"`
	// Mirror names the configmirror extension whose configuration mirror it reads.
	Mirror component.ID `mapstructure:"mirror"`
	// Settings are the delivery settings the sink exporter shares: timeout, retry,
	// allow_cidrs, dead_letter_stream, delivery_log, target, dashboard_url,
	// failure_notices, max_response_bytes.
	delivery.Settings `mapstructure:",squash"`
	// MaxCallBytes bounds an agent call's body (SVC_MAX_CALL_BYTES): a legacy batch
	// is sent in smaller arrays rather than pass it, and a body that cannot fit it (a
	// window call of a smaller limit than its window budget) is dead-lettered unsent.
	MaxCallBytes int `mapstructure:"max_call_bytes"`

	// now is the clock of the call budget's windows; nil is time.Now (tests move it).
	now func() time.Time
}

// DefaultMaxCallBytes (12 MiB) holds the largest window call the pipeline settings
// allow, window_max_bytes at most 10,000,000 plus a trigger of the default record limit
// (1,000,000), so no window call is refused at the defaults; legacy batches are split
// under it. minMaxCallBytes leaves room for one record of the default limit.
const (
	DefaultMaxCallBytes = 12 << 20
	minMaxCallBytes     = 1 << 20
)

func defaultConfig() *Config {
	return &Config{
		NATS:         natsclient.DefaultConfig(),
		Mirror:       mirrorcache.DefaultExtension,
		Settings:     delivery.DefaultSettings(),
		MaxCallBytes: DefaultMaxCallBytes,
	}
}

// Validate checks the configuration.
func (c *Config) Validate() error {
	errs := mirrorcache.CheckConnection(c.NATS, c.Mirror)
	if err := c.Settings.Check(); err != nil {
		errs = append(errs, err)
	}
	if c.MaxCallBytes < minMaxCallBytes {
		errs = append(errs, fmt.Errorf("max_call_bytes must be at least %d, e.g. %d", minMaxCallBytes, DefaultMaxCallBytes))
	}
	return errors.Join(errs...)
}
