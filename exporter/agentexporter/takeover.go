package agentexporter

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/otelcol-svc/otelcol-svc/internal/streams"
)

// An incident call taken over from another process (the incident processor retries a
// claim whose owner stopped heartbeating, under the same request id) is one call to the
// agent, so it is charged to the call budget once and counted in the ledger once. Which
// it already was is kept beside the budget entries, in the budget bucket, one small key
// per request id and what was done: "<project>.b.<id>" (charged) and "<project>.l.<id>"
// (counted). The bucket's TTL (a day) outlives any takeover, which happens within the
// processor's claim timeout.
//
// Each mark is written after what it marks is stored, never before: a process that dies
// in between leaves the call to be charged or counted again by the one taking it over
// (the rare case, and the old behaviour), whereas a mark written first and a crash before
// the count was stored would lose the call from the ledger altogether (and the usual
// reason for a takeover is exactly such a crash).
const (
	markCharged = "b"
	markCounted = "l"
)

// markKey is the key of what (markCharged, markCounted) for project's call requestID.
// Project ids are tokens without dots, so these never meet a budget entry's key.
func markKey(project, what, requestID string) string {
	if !streams.ValidToken(requestID) {
		// The processor's ids are tokens; anything else still gets one key of its own.
		h := sha256.Sum256([]byte(requestID))
		requestID = hex.EncodeToString(h[:16])
	}
	return project + "." + what + "." + requestID
}

// marked reports whether project's call requestID was already charged or counted (what).
// An error means it cannot be told (NATS away).
func (b *callBudget) marked(ctx context.Context, project, what, requestID string) (bool, error) {
	kv, err := b.bucket(ctx)
	if err != nil {
		return false, err
	}
	_, err = kv.Get(ctx, markKey(project, what, requestID))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return false, nil
	}
	return false, err
}

// mark records that project's call requestID was charged or counted (what). A failure
// is only a repeat charged or counted again should the call be taken over.
func (b *callBudget) mark(ctx context.Context, project, what, requestID string) {
	kv, err := b.bucket(ctx)
	if err != nil {
		return
	}
	_, _ = kv.Create(ctx, markKey(project, what, requestID), []byte(b.now().UTC().Format(time.RFC3339)))
}
