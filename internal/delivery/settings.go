package delivery

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"time"

	"github.com/otelcol-svc/otelcol-svc/internal/deliverylog"
	"github.com/otelcol-svc/otelcol-svc/internal/outbound"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
)

// Settings are what the agent and sink exporters share about delivering: each embeds
// them (mapstructure squash), so both are configured with the same keys.
type Settings struct {
	// DeadLetterStream holds the limits of each project's dead-letter stream, applied when
	// the exporter first dead-letters a delivery of the project.
	DeadLetterStream streams.Limits `mapstructure:"dead_letter_stream"`
	// Timeout bounds one attempt: connecting, sending, and the other side's answer.
	Timeout time.Duration `mapstructure:"timeout"`
	// Retry is the backoff between attempts of one delivery and its retry budget.
	Retry RetryConfig `mapstructure:"retry"`
	// AllowCIDRs is the comma-separated SVC_OUTBOUND_ALLOW value: ranges the agent or a
	// destination may be in although they are loopback or private.
	AllowCIDRs string `mapstructure:"allow_cidrs"`
	// MaxResponseBytes is how much of an answer is read; the rest is discarded.
	MaxResponseBytes int64 `mapstructure:"max_response_bytes"`
	// DeliveryLog records every call and sink delivery for the console
	// (docs/contract.md#section-11) and runs the replays it asks for.
	DeliveryLog DeliveryLogConfig `mapstructure:"delivery_log"`
	// Target paces the requests of each project to each origin it sends to (target.go).
	Target TargetConfig `mapstructure:"target"`
	// DashboardURL is the dashboard's address (the control plane's SVC_PUBLIC_URL), for
	// the link to its delivery each chat message and failure notice carries. Empty: no
	// link, rather than a wrong one.
	DashboardURL string `mapstructure:"dashboard_url"`
	// FailureNotices tell the project's destinations of dead-lettered deliveries and
	// open circuits (notices.go).
	FailureNotices FailureNoticesConfig `mapstructure:"failure_notices"`
}

// DefaultSettings are the defaults both exporters start from; retry is the agent's
// (the sink role's configs set their own).
func DefaultSettings() Settings {
	return Settings{
		DeadLetterStream: streams.DefaultLimits(),
		Timeout:          10 * time.Second,
		Retry: RetryConfig{
			InitialInterval: 500 * time.Millisecond,
			MaxInterval:     30 * time.Second,
			MaxElapsedTime:  2 * time.Minute,
		},
		MaxResponseBytes: 64 << 10,
		DeliveryLog: DeliveryLogConfig{
			Enabled:            true,
			MaxPerProject:      deliverylog.DefaultMaxPerProject,
			MaxBytesPerProject: deliverylog.DefaultMaxBytesPerProject,
			Stream:             DeliveryStreamConfig{MaxBytes: 8 << 30},
			Replay:             ReplayConfig{Enabled: true},
		},
		// No cap by default; the circuit needs a target failing for 30s, ten times in a
		// row, which a brief outage or a slow deploy does not reach.
		Target:         TargetConfig{Circuit: CircuitConfig{Failures: 10, MinDuration: 30 * time.Second, ProbeInterval: 30 * time.Second}},
		FailureNotices: FailureNoticesConfig{Enabled: true, Interval: 10 * time.Minute},
	}
}

// Check checks the settings; each exporter's Config.Validate calls it. It is not named
// Validate: the collector validates every field that has one, and the exporter's own
// Validate already reports these, with their keys.
func (s *Settings) Check() error {
	var errs []error
	if err := s.DeadLetterStream.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("dead_letter_stream: %w", err))
	}
	if s.Timeout <= 0 {
		errs = append(errs, errors.New("timeout must be positive (it bounds each attempt, e.g. 10s)"))
	}
	if err := s.Retry.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("retry: %w", err))
	}
	if _, err := outbound.ParseAllow(s.AllowCIDRs); err != nil {
		errs = append(errs, fmt.Errorf("allow_cidrs: %w", err))
	}
	if s.MaxResponseBytes < 1 {
		errs = append(errs, errors.New("max_response_bytes must be at least 1"))
	}
	if err := s.DeliveryLog.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("delivery_log: %w", err))
	}
	if err := s.Target.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("target: %w", err))
	}
	if err := validDashboardURL(s.DashboardURL); err != nil {
		errs = append(errs, fmt.Errorf("dashboard_url: %w", err))
	}
	if s.FailureNotices.Enabled && s.FailureNotices.Interval < time.Second {
		errs = append(errs, errors.New("failure_notices: interval must be at least 1s (at most one notice per project and interval), e.g. 10m"))
	}
	return errors.Join(errs...)
}

// FailureNoticesConfig switches failure notices and sets how often a project's
// destinations may be told: at most once per Interval, the failures after a notice
// counted in the next.
type FailureNoticesConfig struct {
	Enabled  bool          `mapstructure:"enabled"`
	Interval time.Duration `mapstructure:"interval"`
}

// validDashboardURL checks dashboard_url: empty, or an http(s) address with nothing a
// link is appended to could not take (a query, a fragment, credentials).
func validDashboardURL(raw string) error {
	if raw == "" {
		return nil
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return err
	case u.Scheme != "http" && u.Scheme != "https" || u.Host == "":
		return fmt.Errorf("%q is not an http(s) address such as https://cp.example.com", raw)
	case u.RawQuery != "" || u.Fragment != "" || u.User != nil:
		return fmt.Errorf("%q must be the dashboard's address alone, without a query, fragment or credentials", raw)
	case len(raw) > 512:
		return errors.New("is longer than 512 bytes")
	}
	return nil
}

// TargetConfig is the pace of one project's requests to one target (scheme, host, port).
type TargetConfig struct {
	// MaxRate caps requests per second; 0 sets no cap (a target's 429 and Retry-After
	// still slow it).
	MaxRate float64 `mapstructure:"max_rate"`
	// Circuit stops sending to a target that keeps failing.
	Circuit CircuitConfig `mapstructure:"circuit"`
}

// CircuitConfig opens a target's circuit after Failures consecutive retryable failures
// spanning at least MinDuration; while open, one probe is sent every ProbeInterval and
// the first answer closes it.
type CircuitConfig struct {
	// Failures: 0 turns the circuit off.
	Failures      int           `mapstructure:"failures"`
	MinDuration   time.Duration `mapstructure:"min_duration"`
	ProbeInterval time.Duration `mapstructure:"probe_interval"`
}

// Validate checks the pacing settings.
func (t TargetConfig) Validate() error {
	var errs []error
	if math.IsNaN(t.MaxRate) || math.IsInf(t.MaxRate, 0) || t.MaxRate < 0 {
		errs = append(errs, errors.New("max_rate must be 0 (no cap) or a positive number of requests per second"))
	}
	c := t.Circuit
	if c.Failures < 0 {
		errs = append(errs, errors.New("circuit: failures must be 0 (no circuit) or positive"))
	}
	if c.MinDuration < 0 {
		errs = append(errs, errors.New("circuit: min_duration must not be negative"))
	}
	if c.Failures > 0 && c.ProbeInterval <= 0 {
		errs = append(errs, errors.New("circuit: probe_interval must be positive (an open circuit lets one request through per interval)"))
	}
	return errors.Join(errs...)
}

// DeliveryLogConfig is the delivery log's part in the exporter (internal/deliverylog).
type DeliveryLogConfig struct {
	Enabled bool `mapstructure:"enabled"`
	// MaxPerProject is how many deliveries a project keeps; older ones are purged.
	MaxPerProject int `mapstructure:"max_per_project"`
	// MaxBytesPerProject is about how many bytes of the shared log a project keeps;
	// older deliveries are purged, so one busy project cannot push out the others'.
	MaxBytesPerProject int64 `mapstructure:"max_bytes_per_project"`
	// Stream bounds the log's one shared stream (svc-deliveries).
	Stream DeliveryStreamConfig `mapstructure:"stream"`
	// Replay runs the replays the console queues. It needs the log (it reads the
	// delivery to send again from it).
	Replay ReplayConfig `mapstructure:"replay"`
}

// DeliveryStreamConfig holds the shared stream's limits.
type DeliveryStreamConfig struct {
	MaxBytes int64 `mapstructure:"max_bytes"`
	// Replicas: 0 follows dead_letter_stream.replicas, so one setting replicates every
	// stream the exporter writes.
	Replicas int `mapstructure:"replicas"`
}

// ReplayConfig switches the replay loop.
type ReplayConfig struct {
	Enabled bool `mapstructure:"enabled"`
}

// LogReplicas is the shared streams' replica count.
func (s *Settings) LogReplicas() int {
	if s.DeliveryLog.Stream.Replicas > 0 {
		return s.DeliveryLog.Stream.Replicas
	}
	return max(s.DeadLetterStream.Replicas, 1)
}

// Validate checks the delivery log settings.
func (d DeliveryLogConfig) Validate() error {
	var errs []error
	if d.MaxPerProject < 1 {
		errs = append(errs, errors.New("max_per_project must be at least 1"))
	}
	if d.MaxBytesPerProject < 1<<20 {
		errs = append(errs, errors.New("max_bytes_per_project must be at least 1048576"))
	}
	if d.Stream.MaxBytes < 1<<20 {
		errs = append(errs, errors.New("stream: max_bytes must be at least 1048576 (it bounds the whole log, every project's)"))
	}
	if d.Stream.Replicas < 0 || d.Stream.Replicas > 5 {
		errs = append(errs, fmt.Errorf("stream: replicas must be between 0 (as dead_letter_stream) and 5, got %d", d.Stream.Replicas))
	}
	return errors.Join(errs...)
}

// RetryConfig is exponential backoff with full jitter, within a budget per call.
type RetryConfig struct {
	// InitialInterval caps the wait after the first failed attempt; the cap doubles after
	// every further one. The wait itself is random between zero and the cap.
	InitialInterval time.Duration `mapstructure:"initial_interval"`
	// MaxInterval is the largest cap.
	MaxInterval time.Duration `mapstructure:"max_interval"`
	// MaxElapsedTime is the retry budget: no attempt starts later than this after the
	// first; then the call goes to the dead-letter stream.
	MaxElapsedTime time.Duration `mapstructure:"max_elapsed_time"`
}

// Validate checks the backoff settings.
func (r RetryConfig) Validate() error {
	var errs []error
	if r.InitialInterval <= 0 {
		errs = append(errs, errors.New("initial_interval must be positive"))
	}
	if r.MaxInterval < r.InitialInterval {
		errs = append(errs, errors.New("max_interval must not be less than initial_interval"))
	}
	if r.MaxElapsedTime <= 0 {
		errs = append(errs, errors.New("max_elapsed_time must be positive (it is the retry budget of each call)"))
	}
	return errors.Join(errs...)
}
