package deliverylog

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// WriterConfig bounds the writer's memory.
type WriterConfig struct {
	Buffer   int // events waiting to be published; 0 means 4096
	InFlight int // deliveries not finished kept in memory; 0 means 10000
}

type event struct {
	op      byte // 'r' record, 'a' attempt, 'f' finish
	project string
	d       Delivery
	attempt Attempt
}

// Writer logs deliveries without waiting on NATS: every call is a non-blocking send on
// a bounded channel; when it is full the event is dropped and counted, so the delivery
// itself is never slowed by the log.
type Writer struct {
	js       jetstream.JetStream
	ch       chan event
	inflight int
	dropped  atomic.Int64
	failed   atomic.Int64
	done     chan struct{}
	once     sync.Once
}

// NewWriter starts the goroutine that publishes the log.
func NewWriter(js jetstream.JetStream, cfg WriterConfig) *Writer {
	if cfg.Buffer <= 0 {
		cfg.Buffer = 4096
	}
	if cfg.InFlight <= 0 {
		cfg.InFlight = 10000
	}
	w := &Writer{js: js, ch: make(chan event, cfg.Buffer), inflight: cfg.InFlight, done: make(chan struct{})}
	go w.run()
	return w
}

// Dropped counts log events lost because the buffer was full or the delivery was not
// known (evicted or never recorded).
func (w *Writer) Dropped() int64 { return w.dropped.Load() }

// Failed counts publishes NATS refused or never acknowledged.
func (w *Writer) Failed() int64 { return w.failed.Load() }

func (w *Writer) send(e event) {
	if e.project == "" || !validToken(e.project) || !validToken(e.d.ID) {
		w.dropped.Add(1)
		return
	}
	select {
	case w.ch <- e:
	default:
		w.dropped.Add(1)
	}
}

// Record starts a delivery (state pending unless set), with the request body (capped).
func (w *Writer) Record(project string, d Delivery) {
	d.RequestBody, d.RequestTruncated = capBytes(d.RequestBody, MaxRequestBody)
	d.Answer, d.AnswerTruncated = capBytes(d.Answer, MaxAnswer)
	d.AttemptLog = nil
	w.send(event{op: 'r', project: project, d: d})
}

// Attempt appends one try to delivery id; state is retrying unless the caller finishes.
func (w *Writer) Attempt(project, id string, a Attempt) {
	a.Error = capString(a.Error, MaxError)
	w.send(event{op: 'a', project: project, d: Delivery{ID: id}, attempt: a})
}

// Finish sets the final state (delivered or dead_lettered) and the first MaxAnswer bytes
// of the answer.
func (w *Writer) Finish(project, id, state string, answer []byte) {
	d := Delivery{ID: id, State: state}
	d.Answer, d.AnswerTruncated = capBytes(answer, MaxAnswer)
	w.send(event{op: 'f', project: project, d: d})
}

// Close publishes what is buffered and waits for the acks, or until ctx ends.
func (w *Writer) Close(ctx context.Context) error {
	w.once.Do(func() { close(w.ch) })
	select {
	case <-w.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-w.js.PublishAsyncComplete():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

type key struct{ project, id string }

const ackWait = 5 * time.Second

func (w *Writer) run() {
	defer close(w.done)
	open := make(map[key]*Delivery)
	var acks []jetstream.PubAckFuture
	// Acks are collected in batches in this goroutine rather than one goroutine per
	// publish: it keeps the writer's own cost low so fewer events are dropped.
	// The caller's JetStream context may have no async publish timeout, so a future can
	// stay open while NATS is away: a batch waits at most ackWait, the rest count failed.
	settle := func() {
		timeout := time.NewTimer(ackWait)
		defer timeout.Stop()
		for _, f := range acks {
			select {
			case <-f.Ok():
			case <-f.Err():
				w.failed.Add(1)
			case <-timeout.C:
				w.failed.Add(1)
				timeout.Reset(0)
			}
		}
		acks = acks[:0]
	}
	defer settle()
	for e := range w.ch {
		k := key{e.project, e.d.ID}
		now := time.Now().UTC()
		var d *Delivery
		switch e.op {
		case 'r':
			nd := e.d
			if nd.State == "" {
				nd.State = StatePending
			}
			if nd.CreatedAt.IsZero() {
				nd.CreatedAt = now
			}
			nd.UpdatedAt = now
			if _, ok := open[k]; !ok && len(open) >= w.inflight {
				w.dropped.Add(1)
				continue
			}
			d = &nd
			open[k] = d
		case 'a':
			d = open[k]
			if d == nil {
				w.dropped.Add(1)
				continue
			}
			if e.attempt.At.IsZero() {
				e.attempt.At = now
			}
			d.Attempts++
			d.StatusCode, d.Error, d.LatencyMS = e.attempt.StatusCode, e.attempt.Error, e.attempt.LatencyMS
			d.AttemptLog = append(d.AttemptLog, e.attempt)
			if len(d.AttemptLog) > MaxAttempts {
				// The first and latest tries say most; the middle ones are dropped.
				d.AttemptLog = append(d.AttemptLog[:1], d.AttemptLog[2:]...)
			}
			if d.Attempts > 1 {
				d.State = StateRetrying
			}
			d.UpdatedAt = now
		case 'f':
			d = open[k]
			if d == nil {
				w.dropped.Add(1)
				continue
			}
			delete(open, k)
			d.State = e.d.State
			d.Answer, d.AnswerTruncated = e.d.Answer, e.d.AnswerTruncated
			d.UpdatedAt = now
		}
		data, err := json.Marshal(d)
		if err != nil {
			w.failed.Add(1)
			continue
		}
		f, err := w.js.PublishAsync(subject(e.project, d.ID), data)
		if err != nil {
			w.failed.Add(1)
			continue
		}
		if acks = append(acks, f); len(acks) >= 512 {
			settle()
		}
	}
}
