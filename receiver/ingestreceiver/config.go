package ingestreceiver

import (
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/confmap"

	"github.com/otelcol-svc/otelcol-svc/receiver/ingestreceiver/internal/console"
)

// Config of the ingest receiver.
type Config struct {
	// The HTTP server: endpoint (default 0.0.0.0:4318), TLS, CORS, max_request_body_size
	// (answered with 413 past it), and auth, which must name the projectauth extension.
	confighttp.ServerConfig `mapstructure:",squash"`
	// RetryAfter is what 503 answers advertise in Retry-After.
	RetryAfter time.Duration `mapstructure:"retry_after"`
	// MaxObjectsPerRequest bounds the objects of one /v1/events/batch or push request: the
	// body limit alone lets 10 MiB of {} through, millions of records for one request.
	MaxObjectsPerRequest int `mapstructure:"max_objects_per_request"`
	// MaxRecordsPerRequest bounds the records (log records, spans, metric data points) of
	// one OTLP/HTTP request, counted from the body before it is decoded: decoding costs
	// hundreds of bytes per record, so 10 MB of tiny records would cost gigabytes.
	MaxRecordsPerRequest int `mapstructure:"max_records_per_request"`
	// MaxInflightBytes bounds the memory, as estimated from body sizes and record counts,
	// that requests being read and decoded may hold at once; past it requests get 503 with
	// Retry-After.
	MaxInflightBytes int64 `mapstructure:"max_inflight_bytes"`
	// MaxInflightBytesPerAccount is the most body bytes that one account's requests may
	// hold at once while they are read and decoded (a project's, when its key names no
	// account); past it that account's next request gets 503 with Retry-After and the
	// others' are not affected. It counts bodies, not MaxInflightBytes' decoding estimate
	// (about 5× a body), so that an account may send several large requests in parallel.
	// A request alone may still take the whole of MaxInflightBytes. 0 means a quarter of
	// MaxInflightBytes, or two bodies at max_request_body_size if more (within
	// MaxInflightBytes).
	MaxInflightBytesPerAccount int64 `mapstructure:"max_inflight_bytes_per_account"`
	// MinBodyRate is the rate, in bytes a second, at which a request's body must keep
	// arriving after its first second, measured over the last 3 seconds
	// (SVC_MIN_BODY_RATE): slower is answered 408 and disconnected, so that a client
	// cannot send most of a body at once and then hold its buffer for read_body_timeout.
	// It applies once the body holds more than its first 64 KiB buffer: a smaller body is
	// bounded by read_body_timeout alone. 0 means no minimum.
	MinBodyRate int64 `mapstructure:"min_body_rate"`
	// BodyHoldWindow makes the rate a body must keep arriving at grow with the buffer it
	// holds: at least that buffer's size every BodyHoldWindow (SVC_BODY_HOLD_WINDOW; 10s:
	// 1 MiB/s for a 10 MiB body), when that is more than MinBodyRate. Holding memory then
	// costs the sender bandwidth in proportion, so connections that send most of a large
	// body at once and trickle the rest are ended within seconds. 0 means MinBodyRate
	// alone.
	BodyHoldWindow time.Duration `mapstructure:"body_hold_window"`
	// ReadBodyTimeout bounds how long a request's body may take to arrive once its headers
	// have (SVC_READ_BODY_TIMEOUT): a client trickling its body is answered 408 and
	// disconnected instead of holding a connection, and memory, for as long as it likes.
	// 0 means no bound.
	ReadBodyTimeout time.Duration `mapstructure:"read_body_timeout"`
	// DrainDelay is how long, once the collector stops (SIGTERM), the receiver keeps its
	// listener open answering new requests 503 with Retry-After (SVC_DRAIN_DELAY): load
	// balancers and kube-proxy take a moment to stop sending to a stopping process (a
	// Kubernetes pod leaves its Service's endpoints at once, but the rest of the cluster
	// notices later), and meanwhile clients get an answer to retry rather than a refused
	// connection. Requests already being handled complete meanwhile.
	DrainDelay time.Duration `mapstructure:"drain_delay"`
	// DrainTimeout bounds how long, after DrainDelay, the requests still being handled
	// may take to complete (stored, answered) before their connections are closed
	// (SVC_DRAIN_TIMEOUT). A request cut off then was never answered 2xx, so its client
	// retries it. 3s by default: in the all-in-one process the jetstream receivers' own
	// drains (1s each) follow this one, and the whole stop stays under 10 s.
	DrainTimeout time.Duration `mapstructure:"drain_timeout"`
	// DeliveryLog names what the console's delivery-log endpoints read beside the log.
	DeliveryLog DeliveryLogConfig `mapstructure:"delivery_log"`
	// Console configures the console API the dashboard calls from the browser.
	Console ConsoleConfig `mapstructure:"console"`
}

// ConsoleConfig configures the console API (/console/v1/...).
type ConsoleConfig struct {
	// AllowedOrigins are the origins whose pages may call the console API from a browser
	// (CORS): the dashboard's, e.g. http://localhost:8080. A page of any other origin gets
	// no Access-Control-Allow-Origin. An entry may list several, separated by commas.
	AllowedOrigins []string `mapstructure:"allowed_origins"`
	// MaxRecordBytes bounds a record while a dry run transforms it, as the pipeline does
	// (SVC_MAX_RECORD_BYTES); 0 is the default, 1,000,000.
	MaxRecordBytes int `mapstructure:"max_record_bytes"`
}

// DeliveryLogConfig names the consumers whose backlog the console's ledger shows as
// pending; they must match the jetstream receivers' durable settings of the pipeline and
// sink roles.
type DeliveryLogConfig struct {
	// PipelineDurable is the pipeline's durable consumer on each raw stream.
	PipelineDurable string `mapstructure:"pipeline_durable"`
	// SinkDurable is the sink role's durable prefix ("<prefix>-<sink id>").
	SinkDurable string `mapstructure:"sink_durable"`
	// ReplayReplicas are the replicas of the replay queue when a replay is first to need
	// it (an existing queue is left as it is).
	ReplayReplicas int `mapstructure:"replay_replicas"`
}

// ownSettings are the keys of Config beside the HTTP server's.
type ownSettings struct {
	RetryAfter           time.Duration     `mapstructure:"retry_after"`
	MaxObjectsPerRequest int               `mapstructure:"max_objects_per_request"`
	MaxRecordsPerRequest int               `mapstructure:"max_records_per_request"`
	MaxInflightBytes     int64             `mapstructure:"max_inflight_bytes"`
	PerAccount           int64             `mapstructure:"max_inflight_bytes_per_account"`
	MinBodyRate          int64             `mapstructure:"min_body_rate"`
	BodyHoldWindow       time.Duration     `mapstructure:"body_hold_window"`
	ReadBodyTimeout      time.Duration     `mapstructure:"read_body_timeout"`
	DrainDelay           time.Duration     `mapstructure:"drain_delay"`
	DrainTimeout         time.Duration     `mapstructure:"drain_timeout"`
	DeliveryLog          DeliveryLogConfig `mapstructure:"delivery_log"`
	Console              ConsoleConfig     `mapstructure:"console"`
}

// Unmarshal is needed because confighttp.ServerConfig has an Unmarshal of its own that,
// promoted through the embedding, would otherwise decode only the server's keys and
// silently drop ours.
func (c *Config) Unmarshal(conf *confmap.Conf) error {
	if err := c.ServerConfig.Unmarshal(conf); err != nil {
		return err
	}
	own := ownSettings{RetryAfter: c.RetryAfter, MaxObjectsPerRequest: c.MaxObjectsPerRequest,
		MaxRecordsPerRequest: c.MaxRecordsPerRequest, MaxInflightBytes: c.MaxInflightBytes, PerAccount: c.MaxInflightBytesPerAccount, MinBodyRate: c.MinBodyRate, BodyHoldWindow: c.BodyHoldWindow, ReadBodyTimeout: c.ReadBodyTimeout, DeliveryLog: c.DeliveryLog, Console: c.Console,
		DrainDelay: c.DrainDelay, DrainTimeout: c.DrainTimeout}
	if err := conf.Unmarshal(&own, confmap.WithIgnoreUnused()); err != nil {
		return err
	}
	c.RetryAfter, c.MaxObjectsPerRequest = own.RetryAfter, own.MaxObjectsPerRequest
	c.MaxRecordsPerRequest, c.MaxInflightBytes = own.MaxRecordsPerRequest, own.MaxInflightBytes
	c.ReadBodyTimeout, c.MaxInflightBytesPerAccount, c.MinBodyRate = own.ReadBodyTimeout, own.PerAccount, own.MinBodyRate
	c.DeliveryLog, c.Console = own.DeliveryLog, own.Console
	c.BodyHoldWindow = own.BodyHoldWindow
	c.DrainDelay, c.DrainTimeout = own.DrainDelay, own.DrainTimeout
	return nil
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
	if c.MaxObjectsPerRequest <= 0 {
		errs = append(errs, errors.New("max_objects_per_request must be positive, e.g. 10000"))
	}
	if c.MaxRecordsPerRequest <= 0 {
		errs = append(errs, errors.New("max_records_per_request must be positive, e.g. 10000"))
	}
	if c.MaxInflightBytes < 1<<20 {
		errs = append(errs, errors.New("max_inflight_bytes must be at least 1 MiB, e.g. 134217728"))
	}
	if c.MaxInflightBytesPerAccount < 0 || c.MaxInflightBytesPerAccount > c.MaxInflightBytes {
		errs = append(errs, errors.New("max_inflight_bytes_per_account must be 0 (a quarter of max_inflight_bytes) or up to max_inflight_bytes, e.g. 33554432"))
	}
	if c.MinBodyRate < 0 {
		errs = append(errs, errors.New("min_body_rate must be 0 (no minimum) or more bytes a second, e.g. 65536"))
	}
	if c.BodyHoldWindow < 0 {
		errs = append(errs, errors.New("body_hold_window must be 0 (min_body_rate alone) or more, e.g. 10s"))
	}
	if c.ReadBodyTimeout < 0 {
		errs = append(errs, errors.New("read_body_timeout must be 0 (no bound) or more, e.g. 30s"))
	}
	if c.DrainDelay < 0 {
		errs = append(errs, errors.New("drain_delay must be 0 (close at once) or more, e.g. 2s"))
	}
	if c.DrainTimeout < 0 {
		errs = append(errs, errors.New("drain_timeout must be 0 (cut requests at once) or more, e.g. 5s"))
	}
	if c.DeliveryLog.PipelineDurable == "" || c.DeliveryLog.SinkDurable == "" {
		errs = append(errs, errors.New("delivery_log.pipeline_durable and delivery_log.sink_durable must name the pipeline's and the sinks' durable consumers, e.g. svc-pipeline and svc-sink"))
	}
	if _, err := console.ParseOrigins(c.Console.AllowedOrigins); err != nil {
		errs = append(errs, fmt.Errorf("console.allowed_origins: %w", err))
	}
	if c.DeliveryLog.ReplayReplicas < 0 {
		errs = append(errs, errors.New("delivery_log.replay_replicas must not be negative"))
	}
	return errors.Join(errs...)
}
