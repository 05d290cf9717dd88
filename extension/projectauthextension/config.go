package projectauthextension

import (
	"errors"
	"fmt"
	"strings"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configopaque"
	"go.opentelemetry.io/collector/confmap"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/mirrorcache"
)

// Config of the project-aware authenticator.
type Config struct {
	// Mirror names the configmirror extension whose copy of the configuration mirror
	// resolves keys, sources, projects and console tokens; its NATS connection also
	// carries key-use reports and the ingest receiver's console reads.
	Mirror component.ID `mapstructure:"mirror"`
	// PushIngest is how POSTs to push sources' ingest URLs are authenticated
	// (docs/contract.md#section-5).
	PushIngest PushIngestConfig `mapstructure:"push_ingest"`
	// GRPC limits what OTLP/gRPC requests may hold, for the receivers that list this
	// extension under `middlewares` (see grpclimits.go).
	GRPC GRPCLimitsConfig `mapstructure:"grpc"`
}

// GRPCLimitsConfig bounds OTLP/gRPC requests before they are decoded.
type GRPCLimitsConfig struct {
	// MaxRecordsPerRequest is the most records (log records, spans, metric data points)
	// one export request may hold; 0 = no limit.
	MaxRecordsPerRequest int `mapstructure:"max_records_per_request"`
	// MaxInflightBytes is the memory (estimated) that requests being decoded and stored
	// may hold at once; past it requests get UNAVAILABLE with retry info. 0 = no bound.
	MaxInflightBytes int64 `mapstructure:"max_inflight_bytes"`
}

// errNATSMoved refuses a config written when this extension dialled NATS itself.
var errNATSMoved = errors.New("projectauth no longer connects to NATS: move its `nats` settings to the configmirror extension (extensions: configmirror: nats: ...), list configmirror in service.extensions, and set mirror: configmirror here")

// Unmarshal refuses the `nats` settings projectauth had while it held the configuration
// mirror, with the new form, instead of the collector's bare "invalid keys: nats".
func (c *Config) Unmarshal(conf *confmap.Conf) error {
	if conf.IsSet("nats") {
		return errNATSMoved
	}
	type plain Config // without this method, so Unmarshal does not recurse
	return conf.Unmarshal((*plain)(c))
}

// PushIngestConfig authenticates push ingest (POST /ingest/<ingest_key>).
type PushIngestConfig struct {
	// Auth is "on" (default): a request needs the source's ingest-scoped key or the
	// service token; "off" accepts every POST to a known ingest URL (the ingest key in
	// the URL is then the only secret). Off is logged as a warning at start.
	Auth string `mapstructure:"auth"`
	// ServiceToken, when set, is a shared token (SERVICE_INGEST_TOKEN) accepted for every
	// source as X-Service-Token or Authorization: Bearer.
	ServiceToken configopaque.String `mapstructure:"service_token"`
}

// Unmarshal accepts auth as a YAML boolean too (auth: false, or SVC_INGEST_AUTH=false,
// which the collector reads as a boolean).
func (c *PushIngestConfig) Unmarshal(conf *confmap.Conf) error {
	if v, ok := conf.Get("auth").(bool); ok {
		s := "off"
		if v {
			s = "on"
		}
		// Merge replaces only auth: the other values keep what the collector knows about
		// them (an env value of digits still decodes as the string it was).
		if err := conf.Merge(confmap.NewFromStringMap(map[string]any{"auth": s})); err != nil {
			return err
		}
	}
	type plain PushIngestConfig // without this method, so Unmarshal does not recurse
	return conf.Unmarshal((*plain)(c))
}

// authOff reports whether push-ingest authentication is turned off.
func (c PushIngestConfig) authOff() bool {
	switch strings.ToLower(strings.TrimSpace(c.Auth)) {
	case "off", "false", "disabled", "none":
		return true
	}
	return false
}

// minServiceToken is the shortest service token accepted: shorter ones can be guessed.
const minServiceToken = 16

// Validate checks the settings.
func (c *Config) Validate() error {
	var errs []error
	if err := mirrorcache.CheckExtension(c.Mirror); err != nil {
		errs = append(errs, err)
	}
	switch strings.ToLower(strings.TrimSpace(c.PushIngest.Auth)) {
	case "", "on", "true", "enabled", "off", "false", "disabled", "none":
	default:
		errs = append(errs, fmt.Errorf("push_ingest.auth must be on or off, got %q", c.PushIngest.Auth))
	}
	if c.GRPC.MaxInflightBytes < 0 {
		errs = append(errs, fmt.Errorf("grpc.max_inflight_bytes must be 0 (no bound) or more, got %d", c.GRPC.MaxInflightBytes))
	}
	if c.GRPC.MaxRecordsPerRequest < 0 {
		errs = append(errs, fmt.Errorf("grpc.max_records_per_request must be 0 (no limit) or more, got %d", c.GRPC.MaxRecordsPerRequest))
	}
	if n := len(strings.TrimSpace(string(c.PushIngest.ServiceToken))); n > 0 && n < minServiceToken {
		errs = append(errs, fmt.Errorf("push_ingest.service_token (SERVICE_INGEST_TOKEN) must be at least %d characters; use a long random value, e.g. `openssl rand -hex 32`", minServiceToken))
	}
	return errors.Join(errs...)
}
