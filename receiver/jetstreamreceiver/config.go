package jetstreamreceiver

import (
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/component"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/mirrorcache"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/natsclient"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
)

// What a receiver consumes.
const (
	// ConsumeRaw feeds the pipeline role: one consumer per project with an agent endpoint.
	ConsumeRaw = "raw"
	// ConsumeOutput feeds the sink role: one consumer per enabled destination of a
	// project, each with its own cursor, on the project's output stream.
	ConsumeOutput = "output"
)

// Config of the JetStream receiver.
type Config struct {
	NATS natsclient.Config `mapstructure:"nats"`
	// Mirror names the configmirror extension whose configuration mirror it reads.
	Mirror component.ID `mapstructure:"mirror"`
	// Consume is "raw" (records for the pipeline role) or "output" (agent results for the
	// sink role).
	Consume string `mapstructure:"consume"`
	// Stream holds the limits a raw stream is created with when a project is consumed
	// before its first record arrives (an existing stream is left as it is). Keep them
	// equal to the jetstream exporter's.
	Stream streams.Limits `mapstructure:"stream"`
	// Durable is the consumer name on every project's raw stream, or for output streams
	// the prefix of each destination's consumer ("<durable>-<sink id>"). Processes with
	// the same name share the work; a different name reads everything again.
	Durable string `mapstructure:"durable"`
	// BatchSize is the most records handed to the pipeline at once; up to 4 × BatchSize
	// (the consumer's MaxAckPending) are fetched ahead. In output mode results are handed
	// on one at a time (each acked when settled) and BatchSize only sets how many are
	// fetched ahead.
	BatchSize int `mapstructure:"batch_size"`
	// MaxInflightBatches (raw mode) is how many batches per consumer may be in the
	// pipeline at once, each acked on its own when settled: a batch whose agent call is
	// being retried then does not hold up the later batches' other groups. The next batch
	// starts only once the previous one's calls are queued in the agent exporter's
	// per-group lanes (internal/pipelinectx), so each group keeps the stream's order and
	// the processors still see one batch at a time. 1 is one batch at a time. Output mode
	// always takes one result at a time per destination.
	MaxInflightBatches int `mapstructure:"max_inflight_batches"`
	// Linger is how long a legacy-mode batch may wait to fill before it is processed, so a
	// lone event is not held back. Window-mode projects flush as soon as no more records
	// are waiting (their calls are one per trigger).
	Linger time.Duration `mapstructure:"linger"`
	// AckWait is how long JetStream waits for an ack before redelivering; while the
	// pipeline works on a batch (agent retries) the receiver keeps it alive.
	AckWait time.Duration `mapstructure:"ack_wait"`
	// RetryDelay is how long a batch the pipeline could not handle waits before it is
	// delivered again.
	RetryDelay time.Duration `mapstructure:"retry_delay"`
	// IdleTimeout is how long a consumer is pulled from without receiving a record before
	// it stops (when nothing is pending); a wake from the exporter starts it again.
	IdleTimeout time.Duration `mapstructure:"idle_timeout"`
	// SweepInterval is how often consumers that are not pulled from are checked for
	// records whose wake was lost (one consumer info each); 0 turns the sweep off.
	SweepInterval time.Duration `mapstructure:"sweep_interval"`
	// DrainTimeout is how long, once the collector stops (SIGTERM), the batches already in
	// the pipeline may take to finish; their exporters make no further retry meanwhile.
	// Records fetched ahead are handed back (nak'ed, for another process to take at once)
	// as soon as the stop begins, and batches still running after DrainTimeout are
	// interrupted and handed back the same way. 0 hands everything back at once.
	//
	// It bounds how long records a stopping process holds wait (a hung agent call or
	// webhook delivery waits all of it before another process retries it), so it is
	// short (1s, SVC_CONSUMER_DRAIN_TIMEOUT in the shipped configs) and separate from
	// the ingest receiver's and control plane's SVC_DRAIN_TIMEOUT, which bounds HTTP
	// requests. Each component gets a fixed bound of its own rather than a share of one
	// process-wide deadline: the collector shuts receivers down one after another, so a
	// process's worst case is the plain sum of its components' bounds (embedded:
	// drain_delay 2s + ingest drain_timeout 3s + 1s + 1s = 7s, under the 10 s every
	// role promises), each bound can be tested and reasoned about alone, and no
	// component's stop depends on how long the ones before it took.
	DrainTimeout time.Duration `mapstructure:"drain_timeout"`
	// Ledger (raw mode) counts each handled batch in the project's ledger before acking
	// it (internal/deliverylog): what was dropped by the trigger, sent to the agent or
	// dead-lettered, exactly once across crashes.
	Ledger bool `mapstructure:"ledger"`
}

// Validate checks the configuration.
func (c *Config) Validate() error {
	errs := mirrorcache.CheckConnection(c.NATS, c.Mirror)
	if err := c.Stream.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("stream: %w", err))
	}
	if c.Consume != ConsumeRaw && c.Consume != ConsumeOutput {
		errs = append(errs, fmt.Errorf(`consume must be "raw" or "output", got %q`, c.Consume))
	}
	if c.Durable == "" {
		errs = append(errs, errors.New("durable must name the consumer, e.g. svc-pipeline"))
	}
	if c.BatchSize < 1 || c.BatchSize > 10000 {
		errs = append(errs, fmt.Errorf("batch_size must be between 1 and 10000, got %d", c.BatchSize))
	}
	if c.MaxInflightBatches < 1 || c.MaxInflightBatches > 64 {
		errs = append(errs, fmt.Errorf("max_inflight_batches must be between 1 and 64, got %d", c.MaxInflightBatches))
	}
	if c.Linger < 0 {
		errs = append(errs, errors.New("linger must not be negative"))
	}
	if c.AckWait < time.Second {
		errs = append(errs, errors.New("ack_wait must be at least 1s"))
	}
	if c.RetryDelay <= 0 {
		errs = append(errs, errors.New("retry_delay must be positive"))
	}
	if c.IdleTimeout < time.Second {
		errs = append(errs, errors.New("idle_timeout must be at least 1s"))
	}
	if c.DrainTimeout < 0 {
		errs = append(errs, errors.New("drain_timeout must not be negative"))
	}
	if c.SweepInterval < 0 {
		errs = append(errs, errors.New("sweep_interval must not be negative"))
	}
	return errors.Join(errs...)
}
