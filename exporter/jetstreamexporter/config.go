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
	// MaxPending is how many unconfirmed publishes may be in flight per process (async
	// publishing).
	MaxPending int `mapstructure:"max_pending"`
	// Publish is how a request's records are published: PublishAsync (one async publish
	// and one ack per record) or PublishFastBatch (the request's records as one JetStream
	// fast batch, acknowledged as a whole; nats-server 2.14 or later). Either way the
	// request is answered only once every record is stored.
	Publish string `mapstructure:"publish"`
	// MaxRecordBytes is the largest record (one NATS message body) the exporter publishes.
	// Every record of a request is checked before the first is published, so a request
	// holding one larger record is refused whole (413) instead of being stored in part and
	// failing on every retry. It must stay below the NATS server's max_payload (1 MiB by
	// default) minus room for headers; the server's own limit, when lower, wins.
	MaxRecordBytes int `mapstructure:"max_record_bytes"`
}

// Publish modes.
const (
	PublishAsync     = "async"
	PublishFastBatch = "fast_batch"
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
	switch c.Publish {
	case PublishAsync, PublishFastBatch:
	default:
		errs = append(errs, fmt.Errorf("publish must be %q or %q, got %q", PublishAsync, PublishFastBatch, c.Publish))
	}
	return errors.Join(errs...)
}
