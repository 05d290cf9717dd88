// Package atomicbatch publishes a run of records as one JetStream atomic batch (ADR-50,
// stream flag AllowAtomicPublish, JSON "allow_atomic", nats-server 2.12+): the server
// stages each message of the batch and stores all of them when the commit arrives, or none
// of them. That is what lets a request answered with an error, or never answered because
// the receiver died, be retried without a key and not leave half its records stored twice.
//
// nats.go v1.55 has the stream flag but no publisher for it (the helper lives in the
// orbit module jetstreamext, which is not in go.mod), so this package sets the headers by
// hand. The server side is nats-server's stream.go (processJetStreamBatchMsg) and
// jetstream_batching.go:
//
//   - Every message carries Nats-Batch-Id (at most 64 characters, unique per stream: the
//     server keys batches by it) and Nats-Batch-Sequence, counting from 1. The last one
//     also carries Nats-Batch-Commit: 1, or, as here, a message of its own without data
//     ends the batch with Nats-Batch-Commit: eob (end of batch, not stored).
//   - A batch starts only at sequence 1. A refusal of that first message (atomic publish
//     disabled 10174, too many batches in flight 10210) is answered on its reply subject,
//     and the later messages of that batch then match no batch: nothing is stored. A
//     staged message is answered with an empty body when it has a reply subject.
//   - The commit is answered with a PubAck that has "batch" and "count", once every
//     message is stored, or with an error and nothing stored: a gap (10176), a batch over
//     max_batch_size (10199; 1000 by default), a message id the stream's duplicate window
//     already holds (10201: the whole batch is refused, not only the duplicate), or any
//     check a single publish would fail (stream full, message too large).
//   - Limits (server options): at most 1000 messages per batch, 50 batches in flight per
//     stream and 1000 per server, each abandoned after 10 s without a message.
//
// Here a batch is published in two steps: every record, with an answer asked for the first
// (a refusal comes there) and the last (staged: the server holds the whole batch); then,
// once the last is staged, the end-of-batch commit. A publisher that dies before the
// commit leaves nothing stored. One that dies after sending it leaves the batch stored
// whole and its request unanswered, which a client retrying without a key stores again:
// the time from the commit to its answer is all of that window, so the commit goes only
// after the staging (which on an R1 file stream is the slow part), and the exporter keeps
// one batch in flight per stream (InFlight), so that a crash finds at most one committed.
//
// The tests pin what this relies on against the go.mod nats-server.
package atomicbatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Headers of an atomic batch's messages (nats-server's JSBatchId, JSBatchSeq, JSBatchCommit).
const (
	HeaderBatchID     = "Nats-Batch-Id"
	HeaderBatchSeq    = "Nats-Batch-Sequence"
	HeaderBatchCommit = "Nats-Batch-Commit"
)

// MaxSize is nats-server's default max_batch_size: the most messages one batch may hold.
// A server configured lower refuses larger batches whole (ErrCodeTooLarge).
const MaxSize = 1000

// InFlight is how many batches one publisher keeps in flight per stream (the exporter
// queues the others where a crash stores nothing of them). A stream processes its
// messages in order and a committed batch is stored whatever becomes of its publisher,
// so each batch in flight is one request a killed receiver may leave stored and
// unanswered, for a keyless retry to store again. One costs nothing on an R1 file stream
// (nats-server stages batches one at a time there anyway, each in a file store of its
// own, created and synced under the stream's lock). On an R3 stream, 8 publishers ×
// 100-record requests measured 0.50 × fast batch and 0.69 × async with one in flight,
// 0.76 and 1.09 with four (BenchmarkPublishModes); but four left up to 400 of 100,000
// records stored twice per receiver crash (TestClusterUnpacedKeylessLoadSurvivesKill9OfEachRole),
// one at most 100.
const InFlight = 1

// Error codes of nats-server's answers.
const (
	ErrCodeDisabled        = 10174
	ErrCodeIncomplete      = 10176
	ErrCodeTooLarge        = 10199
	ErrCodeDuplicate       = 10201
	ErrCodeTooManyInflight = 10210
)

// ErrAckTimeout: the commit's answer did not come in time. The batch may be stored.
var ErrAckTimeout = errors.New("atomic batch: no answer from the server in time")

// ErrProtocol: an answer that does not fit the protocol, such as a PubAck without "batch"
// from a server that stored the messages one by one (it does not know atomic batches).
var ErrProtocol = errors.New("atomic batch: unexpected answer from the server")

// Error is a batch the server refused; nothing of it is stored.
type Error struct {
	API *jetstream.APIError
	// NotStarted: the server refused the first message, so the batch never existed.
	NotStarted bool
}

func (e *Error) Error() string { return "atomic batch: " + e.API.Error() }
func (e *Error) Unwrap() error { return e.API }

// Code is the server's error code of err when it is a refused batch, else 0.
func Code(err error) jetstream.ErrorCode {
	var e *Error
	if errors.As(err, &e) {
		return e.API.ErrorCode
	}
	return 0
}

// Record is one message of a batch. Header may be shared between records: Publish copies
// it before adding the batch headers.
type Record struct {
	Data   []byte
	Header nats.Header
}

// Publisher publishes atomic batches over one connection. Answers arrive on one
// subscription, <prefix>.>, and are routed to their batch by the batch id in the subject.
type Publisher struct {
	nc     *nats.Conn
	prefix string // "_INBOX.<nuid>"
	token  string // the nuid: makes batch ids unique across processes
	next   atomic.Uint64
	sub    *nats.Subscription

	mu      sync.Mutex
	batches map[string]chan answer
}

type answer struct {
	kind string // "f" the first message, "s" the last (staged), "c" the commit
	msg  *nats.Msg
}

// New subscribes to the answers of the batches it will publish over nc.
func New(nc *nats.Conn) (*Publisher, error) {
	inbox := nats.NewInbox()
	p := &Publisher{nc: nc, prefix: inbox, token: inbox[strings.LastIndexByte(inbox, '.')+1:], batches: map[string]chan answer{}}
	sub, err := nc.Subscribe(inbox+".>", p.onReply)
	if err != nil {
		return nil, err
	}
	p.sub = sub
	return p, nil
}

// onReply routes an answer to its batch; it never blocks (each batch has room for both).
func (p *Publisher) onReply(m *nats.Msg) {
	rest, ok := strings.CutPrefix(m.Subject, p.prefix+".")
	if !ok {
		return
	}
	id, kind, ok := strings.Cut(rest, ".")
	if !ok {
		return
	}
	p.mu.Lock()
	ch := p.batches[id]
	p.mu.Unlock()
	if ch == nil {
		return
	}
	select {
	case ch <- answer{kind: kind, msg: m}:
	default:
	}
}

// Publish stores recs on subject as one atomic batch (at most MaxSize records) and
// returns once the server has stored all of them, or refused the batch (an *Error; nothing
// stored), or ctx ended (ErrAckTimeout: the batch may or may not be stored).
func (p *Publisher) Publish(ctx context.Context, subject string, recs []Record) error {
	if len(recs) == 0 {
		return nil
	}
	id := p.token + strconv.FormatUint(p.next.Add(1), 36)
	ch := make(chan answer, 3)
	p.mu.Lock()
	p.batches[id] = ch
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.batches, id)
		p.mu.Unlock()
	}()

	last := len(recs)
	for i, r := range recs {
		seq := i + 1
		h := make(nats.Header, len(r.Header)+2)
		for k, v := range r.Header {
			h[k] = v
		}
		h[HeaderBatchID] = []string{id}
		h[HeaderBatchSeq] = []string{strconv.Itoa(seq)}
		msg := &nats.Msg{Subject: subject, Data: r.Data, Header: h}
		switch seq {
		case 1:
			// A refusal of the batch is answered here; acks of the messages between
			// would cost a message each for nothing.
			msg.Reply = p.prefix + "." + id + ".f"
		case last:
			msg.Reply = p.prefix + "." + id + ".s"
		}
		if err := p.nc.PublishMsg(msg); err != nil {
			return err
		}
	}
	staged := last == 1 // the first message's answer is then the staging's
	for !staged {
		select {
		case <-ctx.Done():
			return ErrAckTimeout // nothing is committed: the server drops the batch
		case a := <-ch:
			if a.kind == "s" && len(a.msg.Data) == 0 && a.msg.Header.Get("Status") == "503" {
				return nats.ErrNoResponders // no stream listens on the subject
			}
			if e := apiError(a.msg); e != nil {
				return &Error{API: e, NotStarted: a.kind == "f"}
			}
			staged = staged || a.kind == "s"
		}
	}
	eob := nats.Header{HeaderBatchID: []string{id}, HeaderBatchSeq: []string{strconv.Itoa(last + 1)}, HeaderBatchCommit: []string{"eob"}}
	if err := p.nc.PublishMsg(&nats.Msg{Subject: subject, Reply: p.prefix + "." + id + ".c", Header: eob}); err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return ErrAckTimeout
		case a := <-ch:
			if a.kind != "c" {
				continue // the first message's empty answer, when last == 1
			}
			if len(a.msg.Data) == 0 && a.msg.Header.Get("Status") == "503" {
				return nats.ErrNoResponders
			}
			var ack struct {
				Error *jetstream.APIError `json:"error"`
				Batch string              `json:"batch"`
				Count int                 `json:"count"`
			}
			if err := json.Unmarshal(a.msg.Data, &ack); err != nil {
				return fmt.Errorf("%w: %q", ErrProtocol, a.msg.Data)
			}
			if ack.Error != nil {
				return &Error{API: ack.Error}
			}
			if ack.Batch != id || ack.Count != last {
				return fmt.Errorf("%w: %q", ErrProtocol, a.msg.Data)
			}
			return nil
		}
	}
}

// apiError is the error of an answer, or nil for an empty (staged) or successful one.
func apiError(m *nats.Msg) *jetstream.APIError {
	if len(m.Data) == 0 {
		return nil
	}
	var a struct {
		Error *jetstream.APIError `json:"error"`
	}
	if json.Unmarshal(m.Data, &a) != nil {
		return nil
	}
	return a.Error
}
