package jetstreamreceiver

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// inbox holds what one consumer has received and not yet settled: the messages fetched
// ahead of the pipeline and the batches it is working on. JetStream's AckWait runs for all
// of them from delivery, so all of them are kept alive while this process runs: otherwise
// a slow batch (an agent or a destination being retried) would let the messages queued
// behind it time out and be delivered again, a duplicate while this process still holds
// the first copy.
type inbox struct {
	mu     sync.Mutex
	queued []jetstream.Msg
	// queuedSeqs are the queued messages' stream sequences, read from their metadata once
	// when they arrive: parsing it (the reply subject) again for the redelivery check and
	// the ledger was a sizeable part of the receiver's work per message.
	queuedSeqs []uint64
	// working holds the batches in flight (the receiver's max_inflight_batches), by the
	// id take gave them.
	working map[uint64]heldBatch
	nextID  uint64
	err     error
	ready   chan struct{} // a wake-up when queued grows or err is set
	// closed: the consumer is stopping; what still arrives is handed back at once.
	closed bool
}

// heldBatch is a batch take handed out, with its messages' stream sequences.
type heldBatch struct {
	msgs []jetstream.Msg
	seqs []uint64
}

func newInbox() *inbox {
	return &inbox{ready: make(chan struct{}, 1), working: map[uint64]heldBatch{}}
}

func (in *inbox) wake() {
	select {
	case in.ready <- struct{}{}:
	default:
	}
}

// pullExpiry is how long each pull request waits on the server (nats.go's default). The
// server sends a heartbeat every half of it while a request waits, and the client counts
// a heartbeat as missed after a whole expiry without one; tests shorten it.
var pullExpiry = 30 * time.Second

// statusRoom is the room in the iterator's buffer for status messages (heartbeats, the
// end of a pull request): a few per outstanding request, and fill empties it at once.
const statusRoom = 64

// pullOptions are the options of a consumer's message iterator.
//
// A missed heartbeat does not end the iterator: nats.go then just asks again on the same
// subscription. Ending it (the default, WithMessagesErrOnMissingHeartbeat(true)) made the
// receiver unsubscribe and start over, and whatever the server had sent to the old
// subscription meanwhile (a stalled connection delivers it late) went nowhere: counted as
// delivered, those records waited for AckWait (a minute) before anyone could have them.
//
// Asking again leaves the earlier request outstanding, and the server serves both, so at
// times more arrives than one request's worth. nats.go drops what does not fit in the
// iterator's buffer (a "slow consumer"), with the same minute's wait as the result. The
// server never lets more than MaxAckPending of ours go unacknowledged, so a buffer of
// that size (and room for status messages) never overflows. The pull size is the buffer
// size, which changes nothing else: fill takes all the server gives, up to MaxAckPending
// anyway.
func pullOptions(cons jetstream.Consumer, batchSize int) []jetstream.PullMessagesOpt {
	size := 2 * batchSize
	if info := cons.CachedInfo(); info != nil && info.Config.MaxAckPending > 0 {
		size = max(size, info.Config.MaxAckPending+statusRoom)
	}
	return []jetstream.PullMessagesOpt{
		jetstream.PullMaxMessages(size),
		jetstream.PullExpiry(pullExpiry),
		jetstream.WithMessagesErrOnMissingHeartbeat(false),
	}
}

// fill moves messages from the iterator into the inbox until the iterator stops. Its
// prefetch and the consumer's MaxAckPending bound how many wait here.
func (in *inbox) fill(it jetstream.MessagesContext) {
	for {
		m, err := it.Next()
		// Parsed outside the lock; a message without JetStream metadata (none is expected)
		// counts as a first delivery of sequence 0, which no held message has.
		var seq, delivered uint64
		if err == nil {
			if md, merr := m.Metadata(); merr == nil {
				seq, delivered = md.Sequence.Stream, md.NumDelivered
			}
		}
		in.mu.Lock()
		switch {
		case err != nil:
			in.err = err
		case in.closed:
			_ = m.Nak()
		case delivered > 1 && in.holdsLocked(seq):
			// A keep-alive came too late (a starved process) and the server sent a message
			// again that this inbox still holds: the copy held settles it (the server takes
			// an ack of any delivery of a sequence), so the second copy is dropped rather
			// than delivered twice.
		default:
			in.queued = append(in.queued, m)
			in.queuedSeqs = append(in.queuedSeqs, seq)
		}
		in.mu.Unlock()
		in.wake()
		if err != nil {
			return
		}
	}
}

// holdsLocked reports whether stream sequence seq is queued or in a batch being worked
// on. fill asks only for redeliveries, so a first delivery costs no lookup. Called with
// mu held.
func (in *inbox) holdsLocked(seq uint64) bool {
	for _, b := range in.working {
		if slices.Contains(b.seqs, seq) {
			return true
		}
	}
	return slices.Contains(in.queuedSeqs, seq)
}

// take waits for at least one message and returns up to size, waiting up to linger for
// the batch to fill, their stream sequences (not to be modified) and the batch's id. The
// batch counts as being worked on until settled is called with its id.
func (in *inbox) take(ctx context.Context, size int, linger time.Duration) ([]jetstream.Msg, []uint64, uint64, error) {
	var deadline <-chan time.Time
	for {
		in.mu.Lock()
		n, err := len(in.queued), in.err
		if n >= size || n > 0 && linger <= 0 {
			b, id := in.takeLocked(size)
			return b.msgs, b.seqs, id, nil
		}
		in.mu.Unlock()
		if n == 0 && err != nil {
			return nil, nil, 0, err
		}
		if n > 0 && deadline == nil {
			t := time.NewTimer(linger)
			defer t.Stop()
			deadline = t.C
		}
		select {
		case <-ctx.Done():
			return nil, nil, 0, ctx.Err()
		case <-in.ready:
		case <-deadline:
			in.mu.Lock()
			b, id := in.takeLocked(size)
			return b.msgs, b.seqs, id, nil
		}
	}
}

// takeLocked is called with mu held, and releases it.
func (in *inbox) takeLocked(size int) (heldBatch, uint64) {
	defer in.mu.Unlock()
	n := min(size, len(in.queued))
	batch := heldBatch{msgs: make([]jetstream.Msg, n), seqs: make([]uint64, n)}
	copy(batch.msgs, in.queued)
	copy(batch.seqs, in.queuedSeqs)
	// Drop the references, so the backing array does not keep settled messages alive.
	clear(in.queued[:n])
	in.queued = in.queued[n:]
	in.queuedSeqs = in.queuedSeqs[n:]
	in.nextID++
	in.working[in.nextID] = batch
	return batch, in.nextID
}

// close returns what was fetched ahead and not taken, for the caller to hand back; what
// arrives after it is handed back by fill.
func (in *inbox) close() []jetstream.Msg {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.closed = true
	q := in.queued
	in.queued, in.queuedSeqs = nil, nil
	return q
}

// settled marks batch id as acked or nak'ed: nothing more of it to keep alive.
func (in *inbox) settled(id uint64) {
	in.mu.Lock()
	delete(in.working, id)
	in.mu.Unlock()
}

// keepAlive tells JetStream, every interval until ctx ends, that everything in the inbox
// is still being worked on.
func (in *inbox) keepAlive(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		in.mu.Lock()
		held := make([]jetstream.Msg, 0, len(in.queued))
		for _, b := range in.working {
			held = append(held, b.msgs...)
		}
		held = append(held, in.queued...)
		in.mu.Unlock()
		for _, m := range held {
			_ = m.InProgress()
		}
	}
}
