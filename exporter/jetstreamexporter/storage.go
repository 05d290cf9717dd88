package jetstreamexporter

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
	"github.com/otelcol-svc/otelcol-svc/internal/pipelinectx"
)

// errStorageFull is nats-server itself out of room (its max_store, or the disk): no
// project can store until the operator frees or adds space. Not the client's fault, and
// it can succeed later, so it is a 503 like a project that is full.
var errStorageFull = errors.New("the service's event storage is full; retry later (the operator has been told: nats-server's JetStream store is at its limit)")

// storageGuard holds each project's streams to the per-project byte limit
// (streams.Limits.MaxBytes). JetStream could enforce it as the stream's max_bytes, but
// nats-server reserves a stream's max_bytes in full when the stream is created, so with
// thousands of projects the reservations, not the data, would fill the store. The guard
// knows each stream's real size from the server (its info, refreshed while the stream is
// written to) plus what this process stored since, and refuses new records once the
// stream is at its limit.
//
// It is not exact across processes: between two refreshes each receiver adds only what
// it stored itself, so a stream may exceed its limit by about what all receivers store
// in one refresh interval, plus one request. That bounds a project's share of the disk,
// which is its purpose; nats-server's max_store stays the hard ceiling of the server.
// Idle streams cost nothing: only streams written to are refreshed.
type storageGuard struct {
	js      jetstream.JetStream
	limit   int64 // bytes per stream; 0 = no limit
	every   time.Duration
	logger  *zap.Logger
	streams sync.Map // stream name -> *streamSize
	// results charges agent results to their allowances (results.go).
	results resultGate
}

type streamSize struct {
	bytes      atomic.Int64 // the server's last figure plus what this process stored since
	stored     atomic.Int64 // what this process stored, ever (to carry over a refresh)
	checked    atomic.Int64 // unix nanoseconds of the last refresh's start
	first      atomic.Int64 // unix nanoseconds of the stream's oldest message, 0 = none
	refreshing atomic.Bool
}

func newStorageGuard(js jetstream.JetStream, limit int64, logger *zap.Logger) *storageGuard {
	return &storageGuard{js: js, limit: limit, every: 2 * time.Second, logger: logger}
}

// known records a stream's size as the server reported it (when the exporter created or
// checked the stream).
func (g *storageGuard) known(info *jetstream.StreamInfo) {
	if g == nil || info == nil {
		return
	}
	s := g.size(info.Config.Name)
	s.checked.Store(time.Now().UnixNano())
	s.bytes.Store(int64(info.State.Bytes))
	s.noteFirst(info)
}

func (s *streamSize) noteFirst(info *jetstream.StreamInfo) {
	if info.State.Msgs == 0 {
		s.first.Store(0)
		return
	}
	s.first.Store(info.State.FirstTime.UnixNano())
}

// admit refuses a request for a stream that is at its limit.
func (g *storageGuard) admit(stream string) error {
	if g == nil || g.limit <= 0 {
		return nil
	}
	s := g.size(stream)
	if time.Since(time.Unix(0, s.checked.Load())) > g.every && s.refreshing.CompareAndSwap(false, true) {
		go g.refresh(stream, s)
	}
	if used := s.bytes.Load(); used >= g.limit {
		return fmt.Errorf("the project's storage is full: its stream holds %s of its %s limit; retry later, once the pipeline has caught up and older records expire, or ask the operator to raise the limit (SVC_STREAM_MAX_BYTES)",
			humanize.IBytes(uint64(used)), humanize.IBytes(uint64(g.limit)))
	}
	return nil
}

// admitResults holds a project's output stream to limit (results.max_bytes). Unlike a
// full raw stream, whose pipeline may catch up, stored results leave only by age, so the
// refusal is the client's (429 results_limit_exceeded) and says when the oldest results
// expire, making room; without an age limit it can never pass, and has no Retry-After.
func (g *storageGuard) admitResults(stream string, limit int64, maxAge time.Duration) error {
	if g == nil || limit <= 0 {
		return nil
	}
	s := g.size(stream)
	if time.Since(time.Unix(0, s.checked.Load())) > g.every && s.refreshing.CompareAndSwap(false, true) {
		go g.refresh(stream, s)
	}
	used := s.bytes.Load()
	if used < limit {
		return nil
	}
	var retry time.Duration
	when := "never: results are kept without an age limit"
	if first := s.first.Load(); maxAge > 0 && first > 0 {
		retry = max(time.Until(time.Unix(0, first).Add(maxAge)), time.Second)
		when = "as the oldest expire (they are kept " + maxAge.String() + "), the first in about " + retry.Round(time.Second).String()
	}
	return &pipelinectx.Throttled{Status: http.StatusTooManyRequests, Code: apierror.ResultsLimitExceeded, RetryAfter: retry,
		Err: fmt.Errorf("the project's stored agent results take %s of their %s limit (results max_bytes, SVC_RESULTS_MAX_BYTES); nothing was stored; room is made %s",
			humanize.IBytes(uint64(used)), humanize.IBytes(uint64(limit)), when)}
}

// stored adds what a request stored to the stream's size.
func (g *storageGuard) stored(stream string, n int64) {
	// Tracked without a raw limit too: admitResults reads the output streams' sizes.
	if g == nil {
		return
	}
	s := g.size(stream)
	s.stored.Add(n)
	s.bytes.Add(n)
	// The first message this process stored into an empty stream is its oldest, near
	// enough, until a refresh knows.
	s.first.CompareAndSwap(0, time.Now().UnixNano())
}

func (g *storageGuard) size(stream string) *streamSize {
	if v, ok := g.streams.Load(stream); ok {
		return v.(*streamSize)
	}
	v, _ := g.streams.LoadOrStore(stream, &streamSize{})
	return v.(*streamSize)
}

// refresh asks the server for the stream's size; what this process stores meanwhile is
// added on top, so a refresh never forgets a request.
func (g *storageGuard) refresh(stream string, s *streamSize) {
	defer s.refreshing.Store(false)
	s.checked.Store(time.Now().UnixNano())
	before := s.stored.Load()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := g.js.Stream(ctx, stream)
	if err != nil {
		// The next request tries again; until then the estimate stands.
		g.logger.Debug("stream size not refreshed", zap.String("stream", stream), zap.Error(err))
		return
	}
	s.bytes.Store(int64(st.CachedInfo().State.Bytes) + s.stored.Load() - before)
	s.noteFirst(st.CachedInfo())
}

// messageOverhead is what a message takes in a stream beyond its payload (subject, headers
// and nats-server's per-message framing), roughly: the guard estimates between refreshes.
const messageOverhead = 64
