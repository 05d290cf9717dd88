package deliverylog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/otelcol-svc/otelcol-svc/components/streams"
)

// A destination's figures are derived from its cursor (issue 22): counts each sink
// process kept in memory and wrote once a second were lost when the process was killed,
// and a ledger once showed 2,929 of 3,000 results delivered, none pending. The cursor
// (the destination's durable consumer on the output stream) knows exactly how far it
// got; what it cannot tell is where it started, nor which of the results it settled
// were dead-lettered. Both are kept in a start entry per cursor:
//
//   - the sink process that creates the cursor writes where it starts (the output
//     sequence before its first result, which the new consumer reports as delivered);
//   - each dead letter is added to the entry before the result is acknowledged.
//
// Then, read at any time: settled = last delivered sequence - start - awaiting ack,
// dead-lettered as counted, delivered = settled - dead-lettered, results owed = the
// output stream's last sequence - start, pending = the cursor's backlog and unacked.
// The figures run from the cursor's start: a destination disabled and enabled again
// starts a new cursor, and its figures start again (shown as since).

// destStart is the start entry of a destination's cursor, key "<project>.<sink>" in the
// ledger bucket (project keys have no dot).
type destStart struct {
	// Created is the consumer's creation time as the server reports it: an entry whose
	// Created is not the consumer's belongs to an earlier cursor.
	Created time.Time `json:"created"`
	// Base is the output sequence before the cursor's first result.
	Base uint64 `json:"base"`
	// DeadLettered counts the results dead-lettered from this cursor.
	DeadLettered int64 `json:"dead_lettered"`
}

func destKey(project, sink string) string { return project + "." + sink }

// StartDestination records where a newly created destination cursor starts, from the
// consumer's info as creating it returned it (a consumer that has delivered nothing yet
// reports the sequence before its first as delivered). An entry of the same cursor is
// kept; one of an earlier cursor is replaced. A cursor that has delivered already
// cannot tell its start any more, and is left without one (its figures show as
// counted, approximate).
func StartDestination(ctx context.Context, js jetstream.JetStream, project, sink string, ci *jetstream.ConsumerInfo) error {
	if !validToken(project) || !validToken(sink) || ci == nil {
		return ErrInvalidID
	}
	if ci.Delivered.Consumer != 0 {
		return nil
	}
	kv, err := js.KeyValue(ctx, LedgerBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: LedgerBucket, History: 1})
	}
	if err != nil {
		return err
	}
	return updateJSON(ctx, kv, destKey(project, sink), func(d *destStart) bool {
		if d.Created.Equal(ci.Created) {
			return false
		}
		*d = destStart{Created: ci.Created, Base: ci.Delivered.Stream}
		return true
	})
}

// deadLettered counts one dead letter of a destination's current cursor, at once: the
// delivered figure is derived from it, so a count lost to a crash would show as a
// delivery.
func (l *Ledger) deadLettered(project, sink string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return updateJSON(ctx, l.kv, destKey(project, sink), func(d *destStart) bool {
		if d.Created.IsZero() {
			return false // no cursor start known: the counted figures stand
		}
		d.DeadLettered++
		return true
	})
}

// updateJSON applies fn to the JSON entry at key with compare-and-set, retrying on
// conflict; fn returns false when there is nothing to write.
func updateJSON[T any](ctx context.Context, kv jetstream.KeyValue, key string, fn func(*T) bool) error {
	for range 100 {
		var v T
		var rev uint64
		e, err := kv.Get(ctx, key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
		case err != nil:
			return err
		default:
			if err := json.Unmarshal(e.Value(), &v); err != nil {
				return err
			}
			rev = e.Revision()
		}
		if !fn(&v) {
			return nil
		}
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		if rev == 0 {
			_, err = kv.Create(ctx, key, b)
		} else {
			_, err = kv.Update(ctx, key, b, rev)
		}
		if err == nil {
			return nil
		}
		if !streams.IsKVConflict(err) && !errors.Is(err, jetstream.ErrKeyExists) {
			return err
		}
	}
	return fmt.Errorf("deliverylog: %s kept conflicting", key)
}

// destinationFigures derives a destination's figures from its cursor and start entry;
// ok is false when the entry is missing or belongs to another cursor.
func destinationFigures(ctx context.Context, kv jetstream.KeyValue, project, sink string, ci *jetstream.ConsumerInfo, lastSeq uint64) (Destination, bool) {
	if kv == nil {
		return Destination{}, false
	}
	e, err := kv.Get(ctx, destKey(project, sink))
	if err != nil {
		return Destination{}, false
	}
	var st destStart
	if json.Unmarshal(e.Value(), &st) != nil || !st.Created.Equal(ci.Created) {
		return Destination{}, false
	}
	var d Destination
	d.Exact = true
	since := ci.Created
	d.Since = &since
	d.Pending = int64(ci.NumPending) + int64(ci.NumAckPending)
	if lastSeq > st.Base {
		d.Results = int64(lastSeq - st.Base)
	}
	var settled int64
	if ci.Delivered.Stream > st.Base {
		settled = int64(ci.Delivered.Stream-st.Base) - int64(ci.NumAckPending)
	}
	d.DeadLettered = min(st.DeadLettered, max(settled, 0))
	d.Delivered = max(settled-d.DeadLettered, 0)
	return d, true
}
