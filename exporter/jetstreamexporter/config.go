package jetstreamexporter

import (
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/component"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/mirrorcache"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/natsclient"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
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
	// MaxPending is how many unconfirmed publishes may be in flight per process (async
	// publishing).
	MaxPending int `mapstructure:"max_pending"`
	// Publish is how a request's records are published: PublishAsync (one async publish
	// and one ack per record) or PublishFastBatch (the request's records as one JetStream
	// fast batch, acknowledged as a whole; nats-server 2.14 or later) or
	// PublishAtomicBatch (the request's records as JetStream atomic batches of up to 1000:
	// each stored whole or not at all, so a failed or unanswered request leaves nothing
	// half-stored for a retry to duplicate; nats-server 2.12 or later). Either way the
	// request is answered only once every record is stored.
	Publish string `mapstructure:"publish"`
	// MaxRecordBytes is the largest record (one NATS message body) the exporter publishes.
	// Every record of a request is checked before the first is published, so a request
	// holding one larger record is refused whole (413) instead of being stored in part and
	// failing on every retry. It must stay below the NATS server's max_payload (1 MiB by
	// default) minus room for headers; the server's own limit, when lower, wins.
	MaxRecordBytes int `mapstructure:"max_record_bytes"`
	// Usage meters each request's raw records against its account's monthly limit and its
	// project's ingest rate (internal/usage; docs/contract.md#section-9 and #section-10).
	Usage UsageConfig `mapstructure:"usage"`
	// Results bounds each project's agent results (results.go).
	Results ResultsConfig `mapstructure:"results"`
}

// UsageConfig is the free tier and the ingest rate limit, enforced where records are
// published so that every ingest surface (OTLP/HTTP, OTLP/gRPC, events, push sources)
// counts the same way. Agent results are never counted.
type UsageConfig struct {
	// Enabled meters and limits; false turns the whole block off (no counts, no usage
	// API figures, no limits): the reference of bench/ingest's metered phase.
	Enabled bool `mapstructure:"enabled"`
	// FreeTierEvents is each account's monthly limit unless `accounts set-limit` gave it
	// its own (SVC_FREE_TIER_EVENTS); 0 means unlimited (still counted).
	FreeTierEvents int64 `mapstructure:"free_tier_events"`
	// RateLimit is the deployment's per-project ingest rate, per receiver process; a
	// project's own (the mirror's ingest_rate) replaces it. per_second 0 is off.
	RateLimit RateLimitConfig `mapstructure:"rate_limit"`
	// Mirror names the configmirror extension whose configuration mirror names each
	// account's projects (for the 80%/100% notices to their sinks) and their own rates.
	Mirror component.ID `mapstructure:"mirror"`
}

// RateLimitConfig is records per second with a burst (0: per_second rounded up).
type RateLimitConfig struct {
	PerSecond float64 `mapstructure:"per_second"`
	Burst     int     `mapstructure:"burst"`
}

// Validate checks the usage block.
func (c *UsageConfig) Validate() error {
	if !c.Enabled {
		return nil
	}
	var errs []error
	if c.FreeTierEvents < 0 {
		errs = append(errs, fmt.Errorf("free_tier_events must be 0 (unlimited) or more, got %d", c.FreeTierEvents))
	}
	if c.RateLimit.PerSecond < 0 || c.RateLimit.PerSecond != c.RateLimit.PerSecond {
		errs = append(errs, fmt.Errorf("rate_limit.per_second must be 0 (off) or more, got %v", c.RateLimit.PerSecond))
	}
	if c.RateLimit.Burst < 0 {
		errs = append(errs, fmt.Errorf("rate_limit.burst must be 0 (per_second rounded up) or more, got %d", c.RateLimit.Burst))
	}
	if err := mirrorcache.CheckExtension(c.Mirror); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Publish modes.
const (
	PublishAsync     = "async"
	PublishFastBatch = "fast_batch"
	// PublishAtomicBatch: see Config.Publish and internal/atomicbatch.
	PublishAtomicBatch = "atomic_batch"
)

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
	if c.MaxRecordBytes < 1 {
		errs = append(errs, errors.New("max_record_bytes must be positive, e.g. 1000000"))
	}
	if err := c.Usage.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("usage: %w", err))
	}
	if err := c.Results.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("results: %w", err))
	}
	switch c.Publish {
	case PublishAsync, PublishFastBatch, PublishAtomicBatch:
	default:
		errs = append(errs, fmt.Errorf("publish must be %q, %q or %q, got %q", PublishAsync, PublishFastBatch, PublishAtomicBatch, c.Publish))
	}
	return errors.Join(errs...)
}
