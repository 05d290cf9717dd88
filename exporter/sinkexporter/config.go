package sinkexporter

import (
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/mirrorcache"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/natsclient"
	"github.com/otelcol-svc/otelcol-svc/internal/delivery"
)

// Config of the sink exporter.
type Config struct {
	// NATS is where the output and dead-letter streams live.
	NATS natsclient.Config `mapstructure:"nats"`
	// Mirror names the configmirror extension whose configuration mirror it reads (the
	// projects' destinations).
	Mirror component.ID `mapstructure:"mirror"`
	// Settings are the delivery settings the agent exporter shares: timeout, retry,
	// allow_cidrs, dead_letter_stream, delivery_log, target, dashboard_url,
	// failure_notices, max_response_bytes.
	delivery.Settings `mapstructure:",squash"`
}

// agentOnlyKeys are the agent exporter's settings that mean nothing for results: a
// block copied from the agent exporter is refused saying so, rather than with the
// collector's bare "invalid keys".
var agentOnlyKeys = []string{"max_call_bytes"}

// Unmarshal refuses the agent exporter's own settings by name.
func (c *Config) Unmarshal(conf *confmap.Conf) error {
	for _, k := range agentOnlyKeys {
		if conf.IsSet(k) {
			return fmt.Errorf("%s is a setting of the agent exporter (it bounds agent calls); the sink exporter delivers agent results and has none: remove it here", k)
		}
	}
	return conf.Unmarshal(c)
}

func defaultConfig() *Config {
	s := delivery.DefaultSettings()
	// A destination is given longer than an agent: a result has nowhere else to go, and
	// a chat platform's outage lasts minutes (configs/sink.yaml: SVC_SINK_RETRY_BUDGET).
	s.Retry.MaxElapsedTime = 10 * time.Minute
	return &Config{
		NATS:     natsclient.DefaultConfig(),
		Mirror:   mirrorcache.DefaultExtension,
		Settings: s,
	}
}

// Validate checks the configuration.
func (c *Config) Validate() error {
	errs := mirrorcache.CheckConnection(c.NATS, c.Mirror)
	if err := c.Settings.Check(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
