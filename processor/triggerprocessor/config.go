package triggerprocessor

import (
	"go.opentelemetry.io/collector/component"

	"github.com/otelcol-svc/otelcol-svc/components/mirror/mirrorcache"
)

// Config of the trigger processor. Everything it does is per project, from the
// configuration mirror (trigger and transforms, contract section 6).
type Config struct {
	// Mirror names the projectauth extension whose configuration mirror it reads.
	Mirror component.ID `mapstructure:"mirror"`
}

// Validate implements component.ConfigValidator.
func (c *Config) Validate() error { return mirrorcache.CheckExtension(c.Mirror) }
