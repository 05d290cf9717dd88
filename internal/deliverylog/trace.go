package deliverylog

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/otelcol-svc/otelcol-svc/internal/streams"
)

// Trace follows one record through the service: the raw record, the agent call that
// carried it, the results the agent posted for that call, and each destination's
// delivery of them.
type Trace struct {
	Record     *TraceRecord  `json:"record"`
	Call       *Delivery     `json:"call"`
	Results    []TraceResult `json:"results"`
	Deliveries []Delivery    `json:"deliveries"`
	// Complete is false when a scan stopped at its bound before the end of the log.
	Complete bool `json:"complete"`
}

// TraceRecord is a record on the raw stream.
type TraceRecord struct {
	Seq    uint64    `json:"seq"`
	Time   time.Time `json:"time"`
	Signal string    `json:"signal"`
}

// TraceResult is an agent result on the output stream.
type TraceResult struct {
	Seq       uint64    `json:"seq"`
	Time      time.Time `json:"time"`
	RequestID string    `json:"request_id"`
	Unmatched bool      `json:"unmatched,omitempty"`
}

// traceScan bounds each scan of a trace: a trace is an interactive question, answered
// from what follows the record in the log; a record whose call is further away than this
// is shown without it (Complete false).
const traceScan = 20000

// TraceSeq traces the raw record at stream sequence seq.
func (r *Reader) TraceSeq(ctx context.Context, js jetstream.JetStream, project string, seq uint64) (Trace, error) {
	t := Trace{Results: []TraceResult{}, Deliveries: []Delivery{}, Complete: true}
	if !validToken(project) {
		return t, ErrInvalidID
	}
	raw, err := js.Stream(ctx, streams.RawStream(project))
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return t, ErrNotFound
	}
	if err != nil {
		return t, err
	}
	m, err := raw.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return t, ErrNotFound
	}
	if err != nil {
		return t, err
	}
	t.Record = &TraceRecord{Seq: seq, Time: m.Time, Signal: m.Header.Get(streams.HeaderSignal)}
	// The headers say which calls' sequence ranges hold seq; only those are read whole
	// to check their sequences.
	var call Delivery
	var getErr error
	inRange := func(e entry) bool { return e.d.Kind == KindAgent && e.lo <= seq && seq <= e.hi }
	carries := func(e entry) bool {
		d, err := r.Get(ctx, project, e.d.ID)
		if err != nil {
			if !errors.Is(err, ErrNotFound) {
				getErr = err
				return true
			}
			return false
		}
		if slices.Contains(d.Seqs, seq) {
			call = d
			return true
		}
		return false
	}
	// The call was logged after the record was stored; a second of margin for clocks.
	if _, err := r.scan(ctx, project, m.Time.Add(-time.Second), time.Time{}, inRange, carries, traceScan); err != nil {
		return t, err
	}
	if getErr != nil {
		return t, getErr
	}
	if call.ID == "" {
		t.Complete = false
		return t, nil
	}
	return r.followCall(ctx, js, project, call, t)
}

// TraceRequest traces the agent call with request id id (its X-Request-Id).
func (r *Reader) TraceRequest(ctx context.Context, js jetstream.JetStream, project, id string) (Trace, error) {
	t := Trace{Results: []TraceResult{}, Deliveries: []Delivery{}, Complete: true}
	call, err := r.Get(ctx, project, id)
	if err != nil {
		return t, err
	}
	if call.Kind != KindAgent {
		return t, ErrNotFound
	}
	return r.followCall(ctx, js, project, call, t)
}

func (r *Reader) followCall(ctx context.Context, js jetstream.JetStream, project string, call Delivery, t Trace) (Trace, error) {
	call.RequestBody, call.Answer = nil, nil
	t.Call = &call
	from := call.CreatedAt.Add(-time.Second)
	es, err := r.scan(ctx, project, from, time.Time{}, func(e entry) bool {
		return e.d.Kind == KindSink && e.d.RequestID == call.RequestID
	}, nil, traceScan)
	if err != nil {
		return t, err
	}
	ds, err := r.summaries(ctx, project, es)
	if err != nil {
		return t, err
	}
	t.Deliveries = append(t.Deliveries, ds...)
	out, err := js.Stream(ctx, streams.OutputStream(project))
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return t, nil
	}
	if err != nil {
		return t, err
	}
	c, err := out.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartTimePolicy, OptStartTime: &from,
	})
	if err != nil {
		return t, err
	}
	pending := c.CachedInfo().NumPending
	if pending > traceScan {
		pending, t.Complete = traceScan, false
	}
	for got := uint64(0); got < pending; {
		batch, err := c.Fetch(int(min(256, pending-got)), jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return t, err
		}
		n := 0
		for m := range batch.Messages() {
			n++
			h := m.Headers()
			if h.Get(streams.HeaderRequestID) != call.RequestID {
				continue
			}
			meta, err := m.Metadata()
			if err != nil {
				continue
			}
			t.Results = append(t.Results, TraceResult{
				Seq: meta.Sequence.Stream, Time: meta.Timestamp, RequestID: call.RequestID,
				Unmatched: h.Get(streams.HeaderUnmatched) != "",
			})
		}
		if batch.Error() != nil {
			return t, batch.Error()
		}
		if n == 0 {
			break
		}
		got += uint64(n)
	}
	return t, nil
}
