// Package streams names the per-project JetStream streams and subjects that the contract
// fixes, and builds their configuration, so that every component (and the control plane,
// when it deletes a project) agrees on them.
package streams

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// NATS headers. Metadata travels here, never inside the record.
const (
	HeaderSignal    = "Svc-Signal"
	HeaderRequestID = "Svc-Request-Id"
	HeaderMsgID     = "Nats-Msg-Id"
)

// RawStream is the stream the receiver writes a project's records to.
func RawStream(projectID string) string { return "svc-ai-raw-" + projectID }

// RawSubject is the only subject of RawStream.
func RawSubject(projectID string) string { return "svc-ai-raw." + projectID + ".in" }

// OutputStream holds a project's agent results.
func OutputStream(projectID string) string { return "svc-ai-output-" + projectID }

// OutputSubject is the only subject of OutputStream.
func OutputSubject(projectID string) string { return "svc-ai-output." + projectID + ".out" }

// ValidProjectID reports whether id can be embedded in stream names and subjects.
func ValidProjectID(id string) bool { return ValidToken(id) }

// ValidToken reports whether s can be part of a stream, subject or consumer name: NATS
// treats '.', '*', '>' and whitespace specially, so ids are restricted to a safe alphabet.
func ValidToken(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// Limits are the per-project retention settings of a stream. Age-based expiry is retention,
// not loss: records older than MaxAge are removed whether consumed or not. MaxBytes is a
// hard ceiling: a full stream refuses new records (DiscardNew) so producers push back
// instead of unconsumed records being dropped silently.
type Limits struct {
	MaxAge          time.Duration `mapstructure:"max_age"`
	MaxBytes        int64         `mapstructure:"max_bytes"`
	Replicas        int           `mapstructure:"replicas"`
	DuplicateWindow time.Duration `mapstructure:"duplicate_window"`
}

// DefaultLimits keep a week of data, at most 1 GiB per project and stream.
func DefaultLimits() Limits {
	return Limits{MaxAge: 7 * 24 * time.Hour, MaxBytes: 1 << 30, Replicas: 1, DuplicateWindow: 2 * time.Minute}
}

// Validate checks the limits an operator configured.
func (l Limits) Validate() error {
	var errs []error
	if l.MaxAge < 0 {
		errs = append(errs, errors.New("max_age must not be negative"))
	}
	if l.MaxBytes < 0 {
		errs = append(errs, errors.New("max_bytes must not be negative"))
	}
	if l.Replicas < 1 || l.Replicas > 5 {
		errs = append(errs, fmt.Errorf("replicas must be between 1 and 5, got %d", l.Replicas))
	}
	if l.DuplicateWindow < 0 {
		errs = append(errs, errors.New("duplicate_window must not be negative"))
	}
	if l.MaxAge > 0 && l.DuplicateWindow > l.MaxAge {
		errs = append(errs, errors.New("duplicate_window must not exceed max_age"))
	}
	return errors.Join(errs...)
}

func config(name, subject string, l Limits) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:       name,
		Subjects:   []string{subject},
		Storage:    jetstream.FileStorage,
		Retention:  jetstream.LimitsPolicy,
		Discard:    jetstream.DiscardNew,
		MaxAge:     l.MaxAge,
		MaxBytes:   l.MaxBytes,
		Replicas:   l.Replicas,
		Duplicates: l.DuplicateWindow,
	}
}

// RawConfig is the configuration of a project's raw stream.
func RawConfig(projectID string, l Limits) jetstream.StreamConfig {
	return config(RawStream(projectID), RawSubject(projectID), l)
}

// OutputConfig is the configuration of a project's output stream.
func OutputConfig(projectID string, l Limits) jetstream.StreamConfig {
	return config(OutputStream(projectID), OutputSubject(projectID), l)
}

// Ensure creates the stream or brings its limits up to date. When an update is refused
// (for example a replica change the cluster cannot do) an existing stream is still usable,
// so that is not an error.
func Ensure(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig) error {
	_, err := js.CreateOrUpdateStream(ctx, cfg)
	if err == nil {
		return nil
	}
	if _, infoErr := js.Stream(ctx, cfg.Name); infoErr == nil {
		return nil
	}
	return fmt.Errorf("create stream %s: %w", cfg.Name, err)
}

// DeadLetterStream holds what could not be delivered for a project (agent calls, and
// later sink deliveries), with the reason in headers, so it is visible and replayable.
func DeadLetterStream(projectID string) string { return "svc-ai-dlq-" + projectID }

// DeadLetterSubject is the subject of one kind of dead letter ("agent", "sink").
func DeadLetterSubject(projectID, kind string) string {
	return "svc-ai-dlq." + projectID + "." + kind
}

// DeadLetterConfig is the configuration of a project's dead-letter stream: every kind of
// dead letter of the project, the same limits as its other streams.
func DeadLetterConfig(projectID string, l Limits) jetstream.StreamConfig {
	return config(DeadLetterStream(projectID), "svc-ai-dlq."+projectID+".*", l)
}

// Dead-letter headers.
const (
	HeaderDLQReason   = "Svc-Dlq-Reason"
	HeaderDLQStatus   = "Svc-Dlq-Status"
	HeaderDLQAttempts = "Svc-Dlq-Attempts"
	HeaderDLQTarget   = "Svc-Dlq-Target"
	HeaderDLQKind     = "Svc-Dlq-Kind" // a sink's kind: webhook or chat
	HeaderDLQSink     = "Svc-Dlq-Sink" // the sink a result was for
)

// Create creates the stream when it does not exist and leaves an existing one as it is:
// for readers, which must not fight the writer over limits.
func Create(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig) error {
	_, err := js.CreateStream(ctx, cfg)
	if err == nil || errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		return nil
	}
	if _, infoErr := js.Stream(ctx, cfg.Name); infoErr == nil {
		return nil
	}
	return fmt.Errorf("create stream %s: %w", cfg.Name, err)
}
