package pipelinectx

import (
	"context"
	"strconv"
	"time"
)

type ingestKey struct{}

// Ingest describes the records of one request: the ingest receiver writes it, the
// jetstream exporter reads it (and fills Quota, which the receiver answers).
type Ingest struct {
	// Prebuilt is the record kind (records.SignalEvent, records.SignalSource) when each log
	// record's body already holds the flat record's JSON bytes, published as they are.
	// Empty for OTLP data, which the exporter flattens. Only our receiver sets it, so an
	// OTLP client cannot make the exporter publish arbitrary bytes.
	Prebuilt string
	// IdempotencyKey, from the Idempotency-Key header, becomes the Nats-Msg-Id of the
	// request's records (suffixed ":<index>" when the request holds more than one), so a
	// retried request is stored once within the stream's duplicate window. For a push
	// source the receiver scopes it to the source ("src:<source id>:<key>"), as dedup is
	// per project stream and sources number their deliveries independently.
	IdempotencyKey string
	// RecordIDs, when set, holds one message id per record (same length as the records;
	// "" for a record without one): the sender's own delivery id of each record, which a
	// push source's preset reads (internal/sourcepreset), scoped to the source. A record
	// with an id is published with it as its Nats-Msg-Id, so a provider's retry of the
	// same delivery is stored once; a record without one falls back to IdempotencyKey.
	RecordIDs []string
	// RequestDigest identifies the request that carried IdempotencyKey (its surface, the
	// headers that shape its records, its body): the exporter binds the key to it, so the
	// same key with another request is refused (Throttled, 422 idempotency_key_reused)
	// instead of being answered "accepted" while its records are dropped as duplicates.
	RequestDigest string
	// Output sends the records to the project's output stream (agent results) instead of
	// its raw stream; each record is then one result, with RequestID in Svc-Request-Id.
	Output    bool
	RequestID string
	// Unmatched marks a result whose RequestID the service never issued to the project
	// (internal/requestid); it is stored with Svc-Unmatched: 1 all the same.
	Unmatched bool
	// SourceID is the push source of the request's records (Prebuilt records.SignalSource);
	// it becomes the Svc-Source-Id header of each record.
	SourceID string
	// Quota, when the receiver sets it, is filled by the exporter for an accepted request
	// of a metered account: the receiver answers it as RateLimit-* headers. A pointer so
	// that the exporter can hand it back up the synchronous pipeline.
	Quota *Quota
}

// Quota is an account's month after an accepted request, as the exporter's meter knew it.
type Quota struct {
	// Limit is the account's monthly limit; 0 means unlimited (no headers are sent).
	Limit int64
	// Remaining is what the account has left (an estimate across receivers: exact within
	// a lease, see internal/usage).
	Remaining int64
	// Reset is when the count starts again (00:00 UTC on the 1st).
	Reset time.Time
}

// MsgID is the Nats-Msg-Id of the i-th of n records: RecordIDs[i] when set, else
// IdempotencyKey (suffixed ":<i>" when the request holds more than one record), else "".
func (info Ingest) MsgID(i, n int) string {
	if i < len(info.RecordIDs) && info.RecordIDs[i] != "" {
		return info.RecordIDs[i]
	}
	if info.IdempotencyKey == "" {
		return ""
	}
	if n > 1 {
		return info.IdempotencyKey + ":" + strconv.Itoa(i)
	}
	return info.IdempotencyKey
}

// HasMsgIDs reports whether any of the request's records has a message id, so that a
// retry of it may find some of them stored already.
func (info Ingest) HasMsgIDs() bool {
	if info.IdempotencyKey != "" {
		return true
	}
	for _, id := range info.RecordIDs {
		if id != "" {
			return true
		}
	}
	return false
}

// WithIngest returns ctx carrying info.
func WithIngest(ctx context.Context, info Ingest) context.Context {
	return context.WithValue(ctx, ingestKey{}, info)
}

// IngestFrom returns the Ingest in ctx, or the zero Ingest.
func IngestFrom(ctx context.Context) Ingest {
	info, _ := ctx.Value(ingestKey{}).(Ingest)
	return info
}
