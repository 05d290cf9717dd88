// Package streams names the per-project JetStream streams and subjects that the contract
// fixes, and builds their configuration, so that every component (and the control plane,
// when it deletes a project) agrees on them.
package streams

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// NATS headers. Metadata travels here, never inside the record.
const (
	HeaderSignal    = "Svc-Signal"
	HeaderRequestID = "Svc-Request-Id"
	// HeaderUnmatched ("1") marks an agent result whose request id the service never
	// issued to the project (internal/requestid): stored and delivered all the same.
	HeaderUnmatched = "Svc-Unmatched"
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
// not loss: records older than MaxAge are removed whether consumed or not.
//
// MaxBytes is each project's storage ceiling per stream, but it is deliberately not the
// stream's JetStream max_bytes: nats-server reserves a stream's max_bytes in full against
// the server's store when the stream is created (reserveStreamResources), so 1 GiB per
// stream exhausted a 76 GB disk's share after a few dozen projects. Streams are created
// without max_bytes (nothing reserved, any number of projects fits) and the receiver
// enforces MaxBytes against each stream's real size instead (the jetstream exporter's
// storage guard). nats-server's own store limit (max_store) remains the hard ceiling of
// the whole server. A full stream refuses new records (503) so producers push back
// instead of unconsumed records being dropped silently.
type Limits struct {
	MaxAge          time.Duration `mapstructure:"max_age"`
	MaxBytes        int64         `mapstructure:"max_bytes"`
	Replicas        int           `mapstructure:"replicas"`
	DuplicateWindow time.Duration `mapstructure:"duplicate_window"`
}

// DefaultLimits keep a week of data, at most 1 GiB per project and stream (enforced by the
// receiver, not reserved: see Limits).
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
		Name:      name,
		Subjects:  []string{subject},
		Storage:   jetstream.FileStorage,
		Retention: jetstream.LimitsPolicy,
		Discard:   jetstream.DiscardNew,
		MaxAge:    l.MaxAge,
		// Unlimited here means "nothing reserved"; see Limits for where MaxBytes holds.
		MaxBytes:   -1,
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
	_, err := EnsureInfo(ctx, js, cfg)
	return err
}

// EnsureInfo is Ensure that also returns the stream's info (its configuration as the
// server keeps it, and its size).
//
// It reads the stream first and creates or updates it only when it is missing or its
// settings differ. nats-server checks a created or updated stream's subjects against
// every other stream of the account (subjectsOverlap, linear in the number of streams),
// so with 20,000 streams an update costs milliseconds of server CPU while a read does
// not: the first write to each project after a receiver's start would otherwise have
// updated every stream.
func EnsureInfo(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig) (*jetstream.StreamInfo, error) {
	existing, err := js.Stream(ctx, cfg.Name)
	if err == nil && Current(existing.CachedInfo().Config, cfg) {
		return existing.CachedInfo(), nil
	}
	if err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("create stream %s: %w", cfg.Name, err)
	}
	if err == nil {
		keepFlags(existing.CachedInfo().Config, &cfg)
	}
	s, err := js.CreateOrUpdateStream(ctx, cfg)
	// nats-server removes a deleted stream's files after answering the delete; a create
	// of the same name meanwhile fails with "error creating store for stream" (10049)
	// until they are gone, a matter of milliseconds.
	for wait := 20 * time.Millisecond; isCode(err, 10049) && wait <= 320*time.Millisecond && ctx.Err() == nil; wait *= 2 {
		time.Sleep(wait)
		s, err = js.CreateOrUpdateStream(ctx, cfg)
	}
	if err == nil {
		return s.CachedInfo(), nil
	}
	// An update the server refused (e.g. a replica change the cluster cannot make), or a
	// create that lost a race with another process creating the same stream ("already in
	// use", or "error creating store" when both reached the disk): the stream as it is
	// takes records.
	again, infoErr := js.Stream(ctx, cfg.Name)
	if infoErr != nil {
		return nil, fmt.Errorf("create stream %s: %w", cfg.Name, err)
	}
	if !Current(again.CachedInfo().Config, cfg) {
		// Created by the other with other settings: bring them to ours once.
		keepFlags(again.CachedInfo().Config, &cfg)
		if updated, err := js.UpdateStream(ctx, cfg); err == nil {
			return updated.CachedInfo(), nil
		}
	}
	return again.CachedInfo(), nil
}

// Current reports whether a stream's configuration on the server already has what want
// sets (the fields this package's configurations set; others are the server's). The batch
// publishing flags are wanted or not cared about, never wanted off: a stream that takes
// batches takes single publishes too, and receivers in different publish modes must not
// switch each other's flag off (nats-server drops a stream's open batches when it is).
func Current(have, want jetstream.StreamConfig) bool {
	return slices.Equal(have.Subjects, want.Subjects) && have.Storage == want.Storage &&
		have.Retention == want.Retention && have.Discard == want.Discard &&
		have.MaxAge == want.MaxAge && have.MaxBytes == want.MaxBytes &&
		max(have.Replicas, 1) == max(want.Replicas, 1) && have.Duplicates == want.Duplicates &&
		(have.AllowBatchPublish || !want.AllowBatchPublish) &&
		(have.AllowAtomicPublish || !want.AllowAtomicPublish)
}

// keepFlags carries the batch publishing flags of an existing stream into an update.
func keepFlags(have jetstream.StreamConfig, want *jetstream.StreamConfig) {
	want.AllowBatchPublish = want.AllowBatchPublish || have.AllowBatchPublish
	want.AllowAtomicPublish = want.AllowAtomicPublish || have.AllowAtomicPublish
}

// IsKVConflict reports whether a KV Create or Update lost a compare-and-set: the key
// exists, or its revision moved on since it was read. The caller reads again and retries.
// A replicated bucket reports an Update's conflict with another code (10164) than a
// single-replica one, which the client marks ErrKeyRevisionMismatch.
func IsKVConflict(err error) bool {
	return errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) ||
		isCode(err, jetstream.JSErrCodeStreamWrongLastSequence)
}

func isCode(err error, code jetstream.ErrorCode) bool {
	var e *jetstream.APIError
	return errors.As(err, &e) && e.ErrorCode == code
}

// IsStorageFull reports whether err is nats-server refusing for lack of storage: 10047
// (the server's or account's JetStream store is used up, also when a stream is created)
// or 10077 "maximum bytes/messages exceeded" (a DiscardNew stream at a limit of its own).
// Neither is a connection problem, and no retry succeeds before space is freed.
func IsStorageFull(err error) bool {
	var e *jetstream.APIError
	if !errors.As(err, &e) {
		return false
	}
	return e.ErrorCode == 10047 || e.ErrorCode == 10077 && strings.Contains(e.Description, "maximum")
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
	// Read first: a create of an existing stream costs the server a subject-overlap
	// check against every stream (see EnsureInfo), a read does not.
	if _, err := js.Stream(ctx, cfg.Name); err == nil {
		return nil
	}
	_, err := js.CreateStream(ctx, cfg)
	if err == nil || errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		return nil
	}
	if _, infoErr := js.Stream(ctx, cfg.Name); infoErr == nil {
		return nil
	}
	return fmt.Errorf("create stream %s: %w", cfg.Name, err)
}

// Wake subjects. Consumers of idle projects do not poll: a receiver that stored records
// for a project says so on the project's wake subject (core NATS, no payload, a few per
// second at most), and the pipeline or sink process starts pulling from that project's
// stream until it is idle again. They are not captured by any stream.
const (
	WakeRaw    = "raw"    // records on a raw stream, for the pipeline role
	WakeOutput = "output" // results on an output stream, for the sink role
)

// WakeSubject is the subject that wakes the consumers of a project's raw or output stream.
func WakeSubject(kind, projectID string) string { return "svc-wake." + kind + "." + projectID }

// WakeProject returns the project a wake subject names.
func WakeProject(subject string) string {
	i := strings.LastIndexByte(subject, '.')
	if i < 0 {
		return ""
	}
	return subject[i+1:]
}
