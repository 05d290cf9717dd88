package ingestreceiver

import (
	"errors"
	"time"

	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/confmap"
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
}

// ownSettings are the keys of Config beside the HTTP server's.
type ownSettings struct {
	RetryAfter           time.Duration `mapstructure:"retry_after"`
	MaxObjectsPerRequest int           `mapstructure:"max_objects_per_request"`
	MaxRecordsPerRequest int           `mapstructure:"max_records_per_request"`
	MaxInflightBytes     int64         `mapstructure:"max_inflight_bytes"`
}

// Unmarshal is needed because confighttp.ServerConfig has an Unmarshal of its own that,
// promoted through the embedding, would otherwise decode only the server's keys and
// silently drop ours.
func (c *Config) Unmarshal(conf *confmap.Conf) error {
	if err := c.ServerConfig.Unmarshal(conf); err != nil {
		return err
	}
	own := ownSettings{RetryAfter: c.RetryAfter, MaxObjectsPerRequest: c.MaxObjectsPerRequest,
		MaxRecordsPerRequest: c.MaxRecordsPerRequest, MaxInflightBytes: c.MaxInflightBytes}
	if err := conf.Unmarshal(&own, confmap.WithIgnoreUnused()); err != nil {
		return err
	}
	c.RetryAfter, c.MaxObjectsPerRequest = own.RetryAfter, own.MaxObjectsPerRequest
	c.MaxRecordsPerRequest, c.MaxInflightBytes = own.MaxRecordsPerRequest, own.MaxInflightBytes
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
	return errors.Join(errs...)
}
