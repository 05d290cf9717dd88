package deliverylog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/otelcol-svc/otelcol-svc/internal/streams"
)

// A destination's figures are derived from its cursor: counts each sink
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
	// Base is the output sequence the figures count from: before the cursor's first
	// result, or, for a cursor found after it had delivered (one a previous release
	// created, or whose creator died first), its settled point when it was found.
	Base uint64 `json:"base"`
	// Since is when the figures start when that is not Created: the moment a cursor
	// that had delivered already was found (the server's clock).
	Since time.Time `json:"since,omitzero"`
	// DeadLettered counts the results dead-lettered from this cursor since Base.
	DeadLettered int64 `json:"dead_lettered"`
	// Recent are the output sequences of the dead letters counted that the cursor may
	// still deliver: a result dead-lettered and counted, then not acked (its sink
	// process killed in between, or the count's answer lost), comes again after its ack
	// wait and is dead-lettered again, and is not counted twice. Meanwhile up to the
	// consumer's max ack pending others are delivered, any number of them dead letters
	// too, so a count of the latest is no bound; the cursor's ack floor is: a result at
	// or below it is settled and never comes again, and is pruned (pruneRecent).
	Recent []uint64 `json:"recent,omitempty"`
	// RemovedAt is when the output stream was first seen to have removed results this
	// cursor had not settled (its max_age): the server then counts them as settled,
	// and nothing tells delivered from removed any more, so the figures are
	// approximate from then on.
	RemovedAt time.Time `json:"removed_at,omitzero"`
}

// Reasons a destination's figures are approximate (Destination.ApproximateReason).
const (
	// ApproxStartUnknown: no start entry could be recorded for the cursor yet; the
	// figures are the counts sink processes wrote.
	ApproxStartUnknown = "start_unknown"
	// ApproxResultsRemoved: the output stream removed results (older than its max_age)
	// before this destination settled them, and they count as settled.
	ApproxResultsRemoved = "results_removed_before_delivery"
)

func destKey(project, sink string) string { return project + "." + sink }

// StartDestination records where a destination cursor's figures start, from the
// consumer's info as just read. A cursor that has delivered nothing starts before its
// first result (a new consumer reports the sequence before its first as delivered) and
// its figures run from its creation. One found after it delivered (created by a
// previous release, which recorded no start, or by a process that died before
// recording it) starts where it has settled to, at the moment of the info: settled =
// delivered sequence - base - awaiting ack, and with base = delivered - awaiting ack
// as of that moment, the results it settles from then on are counted exactly (those
// awaiting ack then included) and owed = last sequence - base is its backlog then plus
// what came since; the figures say since that moment.
//
// An entry of the same cursor is kept; one of an earlier cursor is replaced. Every
// write is a compare-and-set on the entry, so when several sink processes find the
// cursor at once the first one's start stands.
func StartDestination(ctx context.Context, js jetstream.JetStream, project, sink string, ci *jetstream.ConsumerInfo) error {
	if !validToken(project) || !validToken(sink) || ci == nil {
		return ErrInvalidID
	}
	kv, err := js.KeyValue(ctx, LedgerBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: LedgerBucket, History: 1})
	}
	if err != nil {
		return err
	}
	start := destStart{Created: ci.Created, Base: ci.Delivered.Stream}
	if ci.Delivered.Consumer != 0 {
		if uint64(ci.NumAckPending) > ci.Delivered.Stream {
			return fmt.Errorf("deliverylog: cursor of %s reports more awaiting ack than delivered", sink)
		}
		start.Base = ci.Delivered.Stream - uint64(ci.NumAckPending)
		start.Since = ci.TimeStamp
		if start.Since.IsZero() {
			start.Since = time.Now()
		}
	}
	return updateJSON(ctx, kv, destKey(project, sink), func(d *destStart) bool {
		if !d.Created.Before(ci.Created) {
			// This cursor's own start is recorded already, or a later cursor's (the
			// info read here is of one deleted since).
			return false
		}
		*d = start
		return true
	})
}

// recentDeadLetters is how many entries destStart.Recent holds before a dead letter
// looks up the cursor's ack floor to prune it: below it, counting costs no more than
// the entry's update.
const recentDeadLetters = 64

// maxRecentDeadLetters bounds destStart.Recent when its cursor cannot be found to
// prune it (or its ack floor is held for long by one result): the entry must stay well
// below NATS's payload limit. Past it the oldest go, and such a result, if it came
// again, would be counted twice.
const maxRecentDeadLetters = 20000

// deadLettered counts one dead letter of a destination's current cursor, at once: the
// delivered figure is derived from it, so a count lost to a crash would show as a
// delivery. seq is the result's output sequence (0: unknown, not deduplicated).
func (l *Ledger) deadLettered(project, sink string, seq uint64) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var floor uint64
	looked := false
	return updateJSON(ctx, l.kv, destKey(project, sink), func(d *destStart) bool {
		if d.Created.IsZero() {
			return false // no cursor start known: the counted figures stand
		}
		if seq != 0 {
			if slices.Contains(d.Recent, seq) {
				return false // counted already (a result awaiting ack when the
				// figures started may be below Base, and is counted: it settles since)
			}
			if len(d.Recent) >= recentDeadLetters {
				if !looked { // once, whatever the compare-and-set retries
					floor, looked = l.ackFloor(ctx, project, d.Created), true
				}
				d.Recent = slices.DeleteFunc(d.Recent, func(s uint64) bool { return s <= floor })
			}
			d.Recent = append(d.Recent, seq)
			if len(d.Recent) > maxRecentDeadLetters {
				d.Recent = d.Recent[len(d.Recent)-maxRecentDeadLetters:]
			}
		}
		d.DeadLettered++
		return true
	})
}

// ackFloor is the ack floor (stream sequence) of the project's destination cursor
// created at created, found among the output stream's consumers by its creation time
// (the ledger does not know the sink role's durable names); 0 when it cannot be read,
// which prunes nothing. A floor read a moment ago is safe to prune with: it only rises.
func (l *Ledger) ackFloor(ctx context.Context, project string, created time.Time) uint64 {
	if l.js == nil {
		return 0
	}
	s, err := l.js.Stream(ctx, streams.OutputStream(project))
	if err != nil {
		return 0
	}
	cs := s.ListConsumers(ctx)
	for ci := range cs.Info() {
		if ci.Created.Equal(created) {
			return ci.AckFloor.Stream
		}
	}
	return 0
}

// updateJSON applies fn to the JSON entry at key with compare-and-set
// (streams.UpdateKV, which retries on conflict); fn returns false when there is nothing
// to write.
func updateJSON[T any](ctx context.Context, kv jetstream.KeyValue, key string, fn func(*T) bool) error {
	_, err := streams.UpdateKV(ctx, kv, key, func(old []byte, exists bool) ([]byte, error) {
		var v T
		if exists {
			if err := json.Unmarshal(old, &v); err != nil {
				return nil, err
			}
		}
		if !fn(&v) {
			return nil, streams.ErrKVUnchanged
		}
		return json.Marshal(v)
	})
	return err
}

// removedUnsettled reports whether the output stream (first sequence firstSeq) has
// removed results the cursor had not settled since base: the stream's limits policy
// removes results older than its max_age whether consumed or not (its byte and count
// limits refuse new results instead, so only age removes). The server then counts them
// as settled: a removed result awaiting ack is terminated like an ack, and the cursor
// skips removed results it had not delivered. Either shows, until the cursor moves
// past them, as a first sequence past the cursor's ack floor or its delivered sequence.
func removedUnsettled(ci *jetstream.ConsumerInfo, firstSeq, base uint64) bool {
	if firstSeq <= 1 || firstSeq-1 <= base {
		return false // nothing removed since the figures started
	}
	return firstSeq-1 > ci.AckFloor.Stream || firstSeq-1 > ci.Delivered.Stream
}

// MarkRemoved records in a destination cursor's start entry that the output stream
// removed results it had not settled (removedUnsettled), once: its figures are
// approximate from then on. View calls it when it sees that; so does a sink process
// when it opens the cursor. It reports whether it marked the entry now.
func MarkRemoved(ctx context.Context, js jetstream.JetStream, project, sink string, ci *jetstream.ConsumerInfo, firstSeq uint64) (bool, error) {
	if !validToken(project) || !validToken(sink) || ci == nil {
		return false, ErrInvalidID
	}
	kv, err := js.KeyValue(ctx, LedgerBucket)
	if err != nil {
		return false, err
	}
	return markRemoved(ctx, kv, project, sink, ci, firstSeq)
}

func markRemoved(ctx context.Context, kv jetstream.KeyValue, project, sink string, ci *jetstream.ConsumerInfo, firstSeq uint64) (bool, error) {
	marked := false
	err := updateJSON(ctx, kv, destKey(project, sink), func(d *destStart) bool {
		marked = false // called again after a conflict
		if !d.Created.Equal(ci.Created) || !d.RemovedAt.IsZero() || !removedUnsettled(ci, firstSeq, d.Base) {
			return false
		}
		d.RemovedAt = ci.TimeStamp
		if d.RemovedAt.IsZero() {
			d.RemovedAt = time.Now()
		}
		marked = true
		return true
	})
	return marked, err
}

// destinationFigures derives a destination's figures from its cursor and start entry
// (firstSeq and lastSeq are the output stream's); exact is false, with the reason in
// the figures, when the entry is missing or belongs to another cursor (the counted
// figures stand then) or the stream removed results the cursor had not settled.
func destinationFigures(ctx context.Context, kv jetstream.KeyValue, project, sink string, ci *jetstream.ConsumerInfo, firstSeq, lastSeq uint64) (Destination, bool) {
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
	if !st.Since.IsZero() {
		since = st.Since
	}
	d.Since = &since
	if st.RemovedAt.IsZero() && removedUnsettled(ci, firstSeq, st.Base) {
		// Seen now, while it still shows: kept, because it stops showing once the
		// cursor moves past the removed results. A failed write leaves it to the next
		// look; these figures are approximate either way.
		_, _ = markRemoved(ctx, kv, project, sink, ci, firstSeq)
		st.RemovedAt = time.Now()
	}
	if !st.RemovedAt.IsZero() {
		d.Exact = false
		d.ApproximateReason = ApproxResultsRemoved
		at := st.RemovedAt
		d.ApproximateSince = &at
	}
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
