// Package fastbatch is a client for nats-server's fast batch publishing (stream flag
// AllowBatchPublish, JSON "allow_batched", nats-server 2.14+; ADR-50 "fast ingest").
// nats.go v1.55 has the stream flag but no client for the protocol, so this package speaks
// it directly. The server side is nats-server's stream.go (getFastBatch,
// processJetStreamFastBatchMsg) and jetstream_batching.go (fastBatch*).
//
// The protocol, as the server implements it:
//
//   - A batch is a run of ordinary publishes to the stream's subject whose reply subject
//     encodes the batch:
//
//     <prefix>.<batch id>.<flow>.<gap mode>.<batch seq>.<op>.$FI
//
//     The batch id (at most 64 characters) is the token before <flow>; the server keys
//     batches by it alone (per stream), so it must be unique across every publisher of the
//     stream, not only within this process. <flow> is the largest ack interval the client
//     accepts. <gap mode> "fail" ends the batch at the first missing or failed message.
//     <batch seq> counts from 1. <op>: 0 start (seq 1 only), 1 append (seq > 1), 2 commit
//     (this message is the last), 3 commit-eob (end of batch: this message carries no
//     record and has seq = last + 1; never at seq 1), 4 ping.
//
//   - Every message is persisted as it arrives (non-atomic: there is no rollback), with
//     the stream's usual checks, including Nats-Msg-Id deduplication against the stream's
//     duplicate window; a duplicate is skipped silently and still counts in the batch.
//
//   - The server answers on the reply subject of the latest message:
//     {"type":"ack","seq":S,"msgs":M}: every message up to S is persisted (with gap mode
//     "fail"), and from now on the server acks every M messages. The first message is
//     answered with seq 0 when the batch is created. M starts at min(500, flow) when the
//     batch is the stream's only one and at 1 otherwise, then doubles per ack up to
//     500 / (batches in flight on the stream).
//     {"type":"err","seq":S,"error":{...}}: message S was refused (for example the stream
//     is full, DiscardNew); with gap mode "fail" the server then ends the batch.
//     {"type":"gap","last_seq":E,"seq":S}: a message went missing; the batch ends.
//     {"stream":...,"seq":...,"batch":"<id>","count":C}: the PubAck of the commit, sent
//     once every message up to the commit is persisted. C is the batch sequence the batch
//     ended at: the number of records when everything went through, fewer when it ended
//     early.
//     {"error":{...},"stream":...}: a plain error answer, for a refused first message
//     (batch publishing disabled, too many batches in flight, ...) or a message of a batch
//     the server no longer knows.
//
//   - Flow control is the client's part; the server does not enforce it. ADR-50 has the
//     client wait for the first ack and then stall while more than 2 ack intervals are
//     unacked. A stalled client may send a ping (op 4, seq = its last sequence) to have a
//     lost ack sent again. (See fbMinWindow for where this client departs from that.)
//
//   - A batch nobody continues is dropped by the server after 10 s of inactivity; at most
//     1000 batches may be in flight per stream (50,000 per server).
//
// Here one request is one batch: every record is published with op start/append, then a
// commit-eob message ends it (the number of records a walk emits is only known at its end),
// and the request succeeds only when the commit's PubAck counts every record.
//
// conformance_test.go pins the nats-server version this was verified against.
package fastbatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Batch operations, the <op> token of the reply subject.
const (
	fbOpStart     = 0
	fbOpAppend    = 1
	fbOpCommit    = 2
	fbOpCommitEOB = 3
	fbOpPing      = 4
)

const (
	// fbFlow is the largest ack interval we accept (the <flow> token). The server acks at
	// most every 500 messages; with several batches in flight on a stream it acks more
	// often. 100 is ADR-50's default: a request of 100 records then needs no flow ack
	// beyond the first while it is the stream's only batch.
	fbFlow = 100
	// fbMaxOutstandingAcks: a batch stalls while more than this many ack intervals are
	// unacknowledged (ADR-50's recommendation)...
	fbMaxOutstandingAcks = 2
	// fbMinWindow: ...or more than this many messages, whichever is more. A batch that
	// shares its stream with others starts at an ack interval of 1 and doubles it per ack,
	// so ADR-50's rule alone made each 100-record request wait for about 7 round trips to
	// the server's busy stream goroutine (measured: bench/README.md). With this floor a
	// request of up to 200 records never stalls, and neither does it wait for the first
	// ack; a larger one is still paced by the acks. The async path has every record of a
	// request in flight (up to max_pending per process), so this asks no more of the
	// server than it did.
	fbMinWindow = 2 * fbFlow
	// fbPings: a wait that sees no answer for a third of the publish timeout sends a ping,
	// so a lost ack costs a third of the timeout instead of the request.
	fbPings = 3

	fbSuffix = ".$FI"
	fbGap    = "fail"
)

// Error codes of nats-server's answers that refuse a batch before it starts; nothing of
// the batch is stored then, so the request can go the async way instead.
const (
	ErrCodeBatchPublishDisabled    = 10205
	ErrCodeBatchPublishTooManyBusy = 10211
)

var (
	// ErrAckTimeout: the server did not answer in time.
	ErrAckTimeout = errors.New("fast batch: no answer from the server in time")
	// ErrProtocol: an answer that does not fit the protocol, such as a plain
	// PubAck from a server that does not know fast batches.
	ErrProtocol = errors.New("fast batch: unexpected answer from the server")
)

// Error is a batch the server refused or ended early.
type Error struct {
	// API is the server's error, when it sent one.
	API *jetstream.APIError
	// NotStarted: the server refused the first message before creating the batch, so none
	// of the batch's records are stored.
	NotStarted bool
	msg        string
}

func (e *Error) Error() string {
	if e.API != nil {
		return "fast batch: " + e.API.Error()
	}
	return "fast batch: " + e.msg
}

func (e *Error) Unwrap() error {
	if e.API != nil {
		return e.API
	}
	return nil
}

// Publisher publishes fast batches over one connection. All answers arrive on one
// subscription, <prefix>.>, and are routed to their batch by the batch id in the subject.
type Publisher struct {
	nc      *nats.Conn
	timeout time.Duration // longest wait for any one answer
	prefix  string        // "_INBOX.<nuid>"
	token   string        // the nuid: makes batch ids unique across processes
	next    atomic.Uint64
	sub     *nats.Subscription

	mu      sync.Mutex
	batches map[string]*Batch
}

// New subscribes to the answers of the batches it will publish over nc; timeout bounds
// the wait for any one answer.
func New(nc *nats.Conn, timeout time.Duration) (*Publisher, error) {
	inbox := nats.NewInbox() // "_INBOX." + a fresh nuid
	f := &Publisher{
		nc: nc, timeout: timeout,
		prefix: inbox, token: inbox[strings.LastIndexByte(inbox, '.')+1:],
		batches: map[string]*Batch{},
	}
	sub, err := nc.Subscribe(inbox+".>", f.onReply)
	if err != nil {
		return nil, err
	}
	f.sub = sub
	return f, nil
}

// Batch is one batch in flight. The publishing goroutine owns seq and msg; the
// subscription's handler updates the rest under mu and signals on notify.
type Batch struct {
	f       *Publisher
	id      string
	base    []byte // "<prefix>.<id>.<flow>.fail." : each reply subject's fixed start
	subject string
	seq     uint64   // last batch sequence sent
	msg     nats.Msg // reused for every message: nats.go copies it out when publishing
	rbuf    []byte   // scratch for reply subjects

	notify chan struct{} // capacity 1: "an answer arrived"

	mu      sync.Mutex
	started bool   // an ack arrived: the server created the batch
	acked   uint64 // every message up to this sequence is persisted
	flow    uint64 // the server's current ack interval
	done    bool   // the commit's PubAck arrived
	count   uint64 // its count
	err     error  // the first error answer
}

// Begin registers a new batch publishing to subject.
func (f *Publisher) Begin(subject string) *Batch {
	id := f.token + strconv.FormatUint(f.next.Add(1), 36)
	b := &Batch{f: f, id: id, subject: subject, flow: 1, notify: make(chan struct{}, 1)}
	b.base = fbReplyBase(f.prefix, id, fbFlow)
	f.mu.Lock()
	f.batches[id] = b
	f.mu.Unlock()
	return b
}

// End forgets the batch; later answers for it are dropped.
func (f *Publisher) End(b *Batch) {
	f.mu.Lock()
	delete(f.batches, b.id)
	f.mu.Unlock()
}

// fbReplyBase is the fixed start of a batch's reply subjects.
func fbReplyBase(prefix, id string, flow int) []byte {
	b := make([]byte, 0, len(prefix)+len(id)+32)
	b = append(b, prefix...)
	b = append(b, '.')
	b = append(b, id...)
	b = append(b, '.')
	b = strconv.AppendInt(b, int64(flow), 10)
	b = append(b, '.')
	b = append(b, fbGap...)
	b = append(b, '.')
	return b
}

// reply is the reply subject of message seq with operation op.
func (b *Batch) reply(seq uint64, op int) string {
	s := append(b.rbuf[:0], b.base...)
	s = strconv.AppendUint(s, seq, 10)
	s = append(s, '.')
	s = strconv.AppendInt(s, int64(op), 10)
	s = append(s, fbSuffix...)
	b.rbuf = s
	return string(s)
}

// fbBatchID returns the batch id of an answer's subject, "<prefix>.<id>.<flow>...".
func fbBatchID(prefix, subject string) (string, bool) {
	if len(subject) <= len(prefix)+1 || subject[:len(prefix)] != prefix || subject[len(prefix)] != '.' {
		return "", false
	}
	rest := subject[len(prefix)+1:]
	if i := strings.IndexByte(rest, '.'); i > 0 {
		return rest[:i], true
	}
	return "", false
}

// fbAnswer is any answer the server sends on a batch's reply subject.
type fbAnswer struct {
	Type  string              `json:"type"` // "ack", "err", "gap"; empty for a PubAck
	Seq   uint64              `json:"seq"`
	Msgs  uint64              `json:"msgs"`
	Batch string              `json:"batch"`
	Count uint64              `json:"count"`
	Error *jetstream.APIError `json:"error"`
}

// onReply is the subscription's handler: it must never block, as it serves every batch.
func (f *Publisher) onReply(m *nats.Msg) {
	id, ok := fbBatchID(f.prefix, m.Subject)
	if !ok {
		return
	}
	f.mu.Lock()
	b := f.batches[id]
	f.mu.Unlock()
	if b == nil {
		return // an answer for a batch that has ended (e.g. an error after the first one)
	}
	b.mu.Lock()
	b.handle(m)
	b.mu.Unlock()
	select {
	case b.notify <- struct{}{}:
	default:
	}
}

// handle applies one answer to the batch's state. b.mu is held.
func (b *Batch) handle(m *nats.Msg) {
	if len(m.Data) == 0 && m.Header.Get("Status") == "503" {
		// No responders: no stream listens on the subject (it was deleted).
		b.fail(nats.ErrNoResponders)
		return
	}
	var a fbAnswer
	if err := json.Unmarshal(m.Data, &a); err != nil {
		b.fail(fmt.Errorf("%w: %q", ErrProtocol, m.Data))
		return
	}
	switch {
	case a.Error != nil:
		// An "err" message, or a plain error answer. Before the first ack this can only be
		// a refusal of the first message, before the server created the batch.
		b.fail(&Error{API: a.Error, NotStarted: !b.started})
	case a.Type == "ack":
		b.started = true
		if a.Seq > b.acked {
			b.acked = a.Seq
		}
		if a.Msgs > 0 {
			b.flow = a.Msgs
		}
	case a.Type == "gap":
		b.fail(&Error{msg: fmt.Sprintf("the server missed messages (%s)", m.Data)})
	case a.Batch != "" && a.Type == "":
		b.done, b.count = true, a.Count
	default:
		// For example a PubAck without "batch": the server took the message as an
		// ordinary publish, so it does not support fast batches.
		b.fail(fmt.Errorf("%w: %q", ErrProtocol, m.Data))
	}
}

func (b *Batch) fail(err error) {
	if b.err == nil {
		b.err = err
	}
}

// Add publishes one record, after waiting while flow control says so.
func (b *Batch) Add(ctx context.Context, data []byte, hdr nats.Header) error {
	seq := b.seq + 1
	// Before the first ack acked is 0: the first fbMinWindow messages go out at once. If
	// the server refuses the first message, it refuses the rest too (a batch only starts
	// at sequence 1), so nothing of the batch is stored.
	if err := b.wait(ctx, func() bool {
		return seq-b.acked <= max(fbMaxOutstandingAcks*b.flow, fbMinWindow)
	}, true); err != nil {
		return err
	}
	op := fbOpAppend
	if seq == 1 {
		op = fbOpStart
	}
	if err := b.publish(seq, op, data, hdr); err != nil {
		return err
	}
	b.seq = seq
	return nil
}

// Commit ends the batch and waits for its PubAck, which comes once every record is
// persisted. It succeeds only if the PubAck counts every record added.
func (b *Batch) Commit(ctx context.Context) error {
	if b.seq == 0 {
		return nil
	}
	if err := b.publish(b.seq+1, fbOpCommitEOB, nil, nil); err != nil {
		return err
	}
	if err := b.wait(ctx, func() bool { return b.done }, false); err != nil {
		return err
	}
	b.mu.Lock()
	count := b.count
	b.mu.Unlock()
	if count != b.seq {
		return &Error{msg: fmt.Sprintf("the server stored %d of %d records", count, b.seq)}
	}
	return nil
}

// Abandon ends a batch that will not be committed, so that the server forgets it now
// rather than after its inactivity timeout. Best effort.
func (b *Batch) Abandon() {
	b.mu.Lock()
	over := b.done || b.err != nil
	b.mu.Unlock()
	if b.seq > 0 && !over {
		_ = b.publish(b.seq+1, fbOpCommitEOB, nil, nil)
	}
}

func (b *Batch) publish(seq uint64, op int, data []byte, hdr nats.Header) error {
	b.msg = nats.Msg{Subject: b.subject, Reply: b.reply(seq, op), Data: data, Header: hdr}
	return b.f.nc.PublishMsg(&b.msg)
}

// wait returns once ready() holds (checked under b.mu), or the batch failed, or the
// server made no progress for the publish timeout, or ctx ended. While stalled it pings
// (ping) so that a lost ack is sent again.
func (b *Batch) wait(ctx context.Context, ready func() bool, ping bool) error {
	var timer *time.Timer
	step := b.f.timeout / fbPings
	quiet := 0
	var acked uint64
	for {
		b.mu.Lock()
		err, ok, progress := b.err, ready(), b.acked > acked
		acked = b.acked
		b.mu.Unlock()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if timer == nil {
			timer = time.NewTimer(step)
			defer timer.Stop()
		} else if progress {
			// Only progress counts: a server that answers pings but persists nothing
			// must not hold the request beyond the timeout.
			quiet = 0
			timer.Reset(step)
		}
		select {
		case <-ctx.Done():
			return ErrAckTimeout
		case <-b.notify:
		case <-timer.C:
			quiet++
			if quiet >= fbPings {
				return ErrAckTimeout
			}
			if ping && b.seq > 0 {
				// Ask for the latest ack again. seq is the last one sent: the ping travels
				// behind the batch's messages, so the server has them all when it reads it.
				_ = b.publish(b.seq, fbOpPing, nil, nil)
			}
			timer.Reset(step)
		}
	}
}
