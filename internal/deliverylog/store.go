package deliverylog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Stream and subject names.
const (
	StreamName    = "svc-deliveries"
	SubjectPrefix = "svc-deliveries"
	Retention     = 7 * 24 * time.Hour
)

// StoreConfig bounds the shared stream.
type StoreConfig struct {
	MaxBytes int64         // whole log, discard old; 0 means 8 GiB
	MaxAge   time.Duration // 0 means Retention
	Replicas int
}

// EnsureStream creates or updates the shared delivery stream.
func EnsureStream(ctx context.Context, js jetstream.JetStream, cfg StoreConfig) (jetstream.Stream, error) {
	if cfg.MaxBytes == 0 {
		cfg.MaxBytes = 8 << 30
	}
	if cfg.MaxAge == 0 {
		cfg.MaxAge = Retention
	}
	if cfg.Replicas == 0 {
		cfg.Replicas = 1
	}
	return js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:              StreamName,
		Subjects:          []string{SubjectPrefix + ".*.*"},
		MaxMsgsPerSubject: 1,
		MaxAge:            cfg.MaxAge,
		MaxBytes:          cfg.MaxBytes,
		Discard:           jetstream.DiscardOld,
		Replicas:          cfg.Replicas,
		AllowDirect:       true,
	})
}

func subject(project, id string) string { return SubjectPrefix + "." + project + "." + id }

// Reader answers the console's questions, always within one project.
type Reader struct{ s jetstream.Stream }

// NewReader reads the stream EnsureStream made.
func NewReader(s jetstream.Stream) *Reader { return &Reader{s: s} }

// Get returns one delivery of project with its attempt log and bodies.
func (r *Reader) Get(ctx context.Context, project, id string) (Delivery, error) {
	var d Delivery
	if !validToken(project) || !validToken(id) {
		return d, ErrInvalidID
	}
	m, err := r.s.GetLastMsgForSubject(ctx, subject(project, id))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return d, ErrNotFound
	}
	if err != nil {
		return d, err
	}
	if err := json.Unmarshal(m.Data, &d); err != nil {
		return d, fmt.Errorf("deliverylog: %w", err)
	}
	return d, nil
}

// GetMany returns the deliveries of project among ids that exist (for replay).
func (r *Reader) GetMany(ctx context.Context, project string, ids []string) ([]Delivery, error) {
	var out []Delivery
	for _, id := range ids {
		d, err := r.Get(ctx, project, id)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// List returns the deliveries of project matching f, newest first (by creation).
//
// A delivery's latest state is its only message, written when it last changed, so every
// delivery created since a moment has its message after that moment. List reads the
// project's messages of a recent window first (15 minutes) and widens it (to an hour, a
// day, the whole retention) only while the window holds fewer matching deliveries
// created inside it than asked for: a console read of a busy project costs its last
// minutes, not its week. f.Since, when set, is the window.
func (r *Reader) List(ctx context.Context, project string, f Filter) ([]Delivery, error) {
	f = f.normalized()
	return r.list(ctx, project, f, f.Limit)
}

// ListForReplay is List with up to MaxReplay answers.
func (r *Reader) ListForReplay(ctx context.Context, project string, f Filter) ([]Delivery, error) {
	return r.list(ctx, project, f, MaxReplay)
}

var listWindows = []time.Duration{15 * time.Minute, time.Hour, 24 * time.Hour, Retention + time.Hour}

func (r *Reader) list(ctx context.Context, project string, f Filter, limit int) ([]Delivery, error) {
	if !validToken(project) {
		return nil, ErrInvalidID
	}
	now := time.Now()
	windows := listWindows
	if !f.Since.IsZero() {
		windows = []time.Duration{now.Sub(f.Since)}
	}
	var found []entry
	seen := map[string]bool{}
	var until time.Time // the previous window's start: widening reads only what precedes it
	for _, w := range windows {
		from := now.Add(-w)
		es, err := r.scan(ctx, project, from, until, func(e entry) bool { return f.match(e.d) && !seen[e.d.ID] }, nil, 0)
		if err != nil {
			return nil, err
		}
		for _, e := range es {
			seen[e.d.ID] = true
		}
		found = append(found, es...)
		until = from
		inside := 0
		for _, e := range found {
			if !e.d.CreatedAt.Before(from) {
				inside++
			}
		}
		if inside >= limit {
			break
		}
	}
	sort.SliceStable(found, func(i, j int) bool {
		a, b := found[i].d, found[j].d
		if !a.CreatedAt.Equal(b.CreatedAt) {
			return a.CreatedAt.After(b.CreatedAt)
		}
		return a.ID > b.ID
	})
	if len(found) > limit {
		found = found[:limit]
	}
	ds, err := r.summaries(ctx, project, found)
	if err != nil {
		return nil, err
	}
	// A delivery may have moved on between the scan and its read (retrying, then
	// delivered): the list shows what it is now, and only if that still matches.
	out := ds[:0]
	for _, d := range ds {
		if f.match(d) {
			out = append(out, d)
		}
	}
	return out, nil
}

// Headers each delivery message carries, so reads filter deliveries without their bodies
// (scan reads headers only). A message without hdrState was written before they existed:
// scan reads its body instead.
const (
	hdrKind       = "Svc-Dl-Kind"
	hdrState      = "Svc-Dl-State"
	hdrCreated    = "Svc-Dl-Created" // RFC 3339 with nanoseconds
	hdrSinkID     = "Svc-Dl-Sink-Id"
	hdrRequestID  = "Svc-Dl-Request-Id"
	hdrRecords    = "Svc-Dl-Records"
	hdrReplayOf   = "Svc-Dl-Replay-Of"
	hdrReplayedBy = "Svc-Dl-Replayed-By"
	// hdrSeqs is "lo-hi", the lowest and highest raw sequence an agent call carried: a
	// trace reads only the calls whose range holds the record (then checks Seqs).
	hdrSeqs = "Svc-Dl-Seqs"
)

// headers describes d for scan.
// A value that cannot be a header (a line break would end it) leaves the message
// without hdrState, so scan reads its body: the same answer, only slower.
func headers(d *Delivery) nats.Header {
	for _, v := range [...]string{d.Kind, d.State, d.SinkID, d.RequestID, d.ReplayOf, d.ReplayedBy} {
		if strings.ContainsAny(v, "\r\n") {
			return nats.Header{}
		}
	}
	// One backing array for the values and a map sized for them: the writer builds these
	// for every delivery it logs, and a slice per value was most of their allocations.
	vals := make([]string, 0, 8)
	h := make(nats.Header, 8)
	set := func(k, v string) {
		if v != "" {
			vals = append(vals, v)
			h[k] = vals[len(vals)-1 : len(vals) : len(vals)]
		}
	}
	set(hdrKind, d.Kind)
	set(hdrCreated, d.CreatedAt.UTC().Format(time.RFC3339Nano))
	set(hdrRecords, strconv.Itoa(d.Records))
	set(hdrSinkID, d.SinkID)
	set(hdrRequestID, d.RequestID)
	set(hdrReplayOf, d.ReplayOf)
	set(hdrReplayedBy, d.ReplayedBy)
	if len(d.Seqs) > 0 {
		lo, hi := d.Seqs[0], d.Seqs[0]
		for _, s := range d.Seqs[1:] {
			lo, hi = min(lo, s), max(hi, s)
		}
		set(hdrSeqs, strconv.FormatUint(lo, 10)+"-"+strconv.FormatUint(hi, 10))
	}
	set(hdrState, d.State) // last: its presence says the others are there
	return h
}

// entry is what scan knows of a delivery: its header fields (or, for an old message, its
// body without bodies and attempt log) and the range of raw sequences it carried.
type entry struct {
	d      Delivery
	lo, hi uint64
}

// fromHeaders reads an entry from a new-format message; false for an old one.
func fromHeaders(subj string, h nats.Header) (entry, bool) {
	var e entry
	if h == nil || h.Get(hdrState) == "" {
		return e, false
	}
	e.d.ID = subj[strings.LastIndexByte(subj, '.')+1:]
	e.d.Kind, e.d.State = h.Get(hdrKind), h.Get(hdrState)
	e.d.CreatedAt, _ = time.Parse(time.RFC3339Nano, h.Get(hdrCreated))
	e.d.Records, _ = strconv.Atoi(h.Get(hdrRecords))
	e.d.SinkID, e.d.RequestID = h.Get(hdrSinkID), h.Get(hdrRequestID)
	e.d.ReplayOf, e.d.ReplayedBy = h.Get(hdrReplayOf), h.Get(hdrReplayedBy)
	if lo, hi, ok := strings.Cut(h.Get(hdrSeqs), "-"); ok {
		e.lo, _ = strconv.ParseUint(lo, 10, 64)
		e.hi, _ = strconv.ParseUint(hi, 10, 64)
	}
	return e, true
}

func fromBody(data []byte) (entry, bool) {
	var e entry
	if json.Unmarshal(data, &e.d) != nil {
		return e, false
	}
	e.d.RequestBody, e.d.Answer, e.d.AttemptLog = nil, nil, nil
	for i, s := range e.d.Seqs {
		if i == 0 {
			e.lo, e.hi = s, s
		}
		e.lo, e.hi = min(e.lo, s), max(e.hi, s)
	}
	return e, true
}

// scan reads the project's deliveries written since from (all when zero) with an
// ordered consumer (ephemeral, nothing durable per read) that delivers headers only, so
// a busy project's bodies (up to 64 KiB each) never cross the wire to be filtered out;
// a message written before the headers existed has its body read. It keeps the entries
// keep accepts and stops after one stop accepts, at the first message stored at or after
// until (when set), or after max messages when max > 0.
func (r *Reader) scan(ctx context.Context, project string, from, until time.Time, keep, stop func(entry) bool, max uint64) ([]entry, error) {
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{SubjectPrefix + "." + project + ".*"}, HeadersOnly: true}
	if !from.IsZero() {
		cfg.DeliverPolicy = jetstream.DeliverByStartTimePolicy
		t := from
		cfg.OptStartTime = &t
	}
	c, err := r.s.OrderedConsumer(ctx, cfg)
	if err != nil {
		return nil, err
	}
	pending := c.CachedInfo().NumPending
	if max > 0 {
		pending = min(pending, max)
	}
	var out []entry
	for got := uint64(0); got < pending; {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		batch, err := c.Fetch(int(min(1024, pending-got)), jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return nil, err
		}
		n := 0
		for m := range batch.Messages() {
			n++
			meta, err := m.Metadata()
			if err != nil {
				continue
			}
			if !until.IsZero() && !meta.Timestamp.Before(until) {
				return out, nil
			}
			e, ok := fromHeaders(m.Subject(), m.Headers())
			if !ok {
				full, err := r.s.GetMsg(ctx, meta.Sequence.Stream)
				if errors.Is(err, jetstream.ErrMsgNotFound) {
					continue // replaced by a newer state since, which comes later
				}
				if err != nil {
					return nil, err
				}
				if e, ok = fromBody(full.Data); !ok {
					continue
				}
			}
			if keep(e) {
				out = append(out, e)
				if stop != nil && stop(e) {
					return out, nil
				}
			}
		}
		if batch.Error() != nil {
			return nil, batch.Error()
		}
		if n == 0 {
			break
		}
		got += uint64(n)
	}
	return out, nil
}

// summaries reads the deliveries of es whole, without bodies and attempt log, a few at a
// time; one no longer stored is left out.
func (r *Reader) summaries(ctx context.Context, project string, es []entry) ([]Delivery, error) {
	out := make([]Delivery, len(es))
	ok := make([]bool, len(es))
	errs := make([]error, len(es))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i, e := range es {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			d, err := r.Get(ctx, project, e.d.ID)
			switch {
			case errors.Is(err, ErrNotFound):
			case err != nil:
				errs[i] = err
			default:
				d.RequestBody, d.Answer, d.AttemptLog = nil, nil, nil
				out[i], ok[i] = d, true
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	kept := out[:0]
	for i, d := range out {
		if ok[i] {
			kept = append(kept, d)
		}
	}
	return kept, nil
}
