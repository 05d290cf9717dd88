package sinkexporter

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/mirrorcache"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/natsclient"
	"github.com/otelcol-svc/otelcol-svc/internal/delivery"
	"github.com/otelcol-svc/otelcol-svc/internal/outbound"
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
	// SlackAPIURL is the base of Slack's Web API, which slack_app destinations are posted
	// through (chat.postMessage, chat.update); the outbound rules (allow_cidrs, refused
	// addresses) apply to it as to any destination.
	SlackAPIURL string `mapstructure:"slack_api_url"`
	// Incidents is the incidents' state (internal/incident's bucket), where the sink keeps
	// each slack_app destination's thread of an incident and finds the incident of a result.
	Incidents IncidentsConfig `mapstructure:"incidents"`
}

// IncidentsConfig is the sink's access to the incidents' bucket.
type IncidentsConfig struct {
	// Replicas of the bucket when the sink is the first to create it: 0 follows
	// dead_letter_stream.replicas, as the delivery log does.
	Replicas int `mapstructure:"replicas"`
}

// DefaultSlackAPIURL is Slack's Web API.
const DefaultSlackAPIURL = "https://slack.com/api/"

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
		NATS:        natsclient.DefaultConfig(),
		Mirror:      mirrorcache.DefaultExtension,
		Settings:    s,
		SlackAPIURL: DefaultSlackAPIURL,
	}
}

// incidentReplicas is the replica count the incidents' bucket is opened with.
func (c *Config) incidentReplicas() int {
	if c.Incidents.Replicas > 0 {
		return c.Incidents.Replicas
	}
	return max(c.DeadLetterStream.Replicas, 1)
}

// Validate checks the configuration.
func (c *Config) Validate() error {
	errs := mirrorcache.CheckConnection(c.NATS, c.Mirror)
	if err := c.Settings.Check(); err != nil {
		errs = append(errs, err)
	}
	if err := validSlackAPIURL(c.SlackAPIURL); err != nil {
		errs = append(errs, fmt.Errorf("slack_api_url: %w", err))
	}
	if c.Incidents.Replicas < 0 || c.Incidents.Replicas > 5 {
		errs = append(errs, fmt.Errorf("incidents: replicas must be between 0 (as dead_letter_stream) and 5, got %d", c.Incidents.Replicas))
	}
	return errors.Join(errs...)
}

// validSlackAPIURL checks slack_api_url: an http(s) base that method names
// (chat.postMessage) are appended to, so it ends with "/".
func validSlackAPIURL(raw string) error {
	if err := outbound.CheckURL(raw); err != nil {
		return err
	}
	u, _ := url.Parse(raw)
	switch {
	case u.RawQuery != "" || u.Fragment != "":
		return fmt.Errorf("%q must be the API's base alone, without a query or fragment", raw)
	case !strings.HasSuffix(u.Path, "/"):
		return fmt.Errorf("%q must end with \"/\" (method names are appended to it), like %s", raw, DefaultSlackAPIURL)
	}
	return nil
}
