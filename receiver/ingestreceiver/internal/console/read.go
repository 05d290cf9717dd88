package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
)

// Reads of a project's raw stream, newest records first, for the events and fields views.
// They go through nats.go's ordered consumers (no ack, in memory, one replica), never the
// pipeline's durable consumers, so they change nothing the pipeline sees.
//
// What one read may cost is bounded, since records are up to the NATS max payload (1 MiB
// by default) and a source filter looks through thousands of them: records of other
// sources are dropped as they arrive, an events answer holds at most maxReadBytes of
// records and the fields view walks at most that many bytes, keeping none; at most
// fetchBytes are in flight from the server; and at most maxReads reads run at once.
const (
	// maxScan bounds how far back a source_id filter looks: the newest maxScan records of
	// the stream, whatever their source.
	maxScan = 10000
	// fetchChunk is how many messages are pulled at once, and minWindow the fewest
	// sequences a window spans once sequences turned out missing (expired or deleted), so
	// such ranges cost one consumer per minWindow sequences, not one per sequence.
	fetchChunk = 250
	minWindow  = fetchChunk
	// fetchBytes bounds the bytes pulled at once (raised to two max payloads when the
	// server allows larger messages, so any single record fits).
	fetchBytes = 4 << 20
	// fetchWait bounds the wait for a message that went away during the read.
	fetchWait = time.Second
	// maxReadBytes bounds the records of one answer (events) or one sample (fields).
	maxReadBytes = 8 << 20
)

// storedRecord is one message of a raw stream.
type storedRecord struct {
	seq      uint64
	time     time.Time
	signal   string
	sourceID string
	data     []byte
}

// A recordSink takes the records of a read as they arrive. The stream is read backwards a
// window of sequences at a time, newest window first, each window oldest record first.
type recordSink interface {
	// need is how many more records the sink takes; 0 ends the read.
	need() int
	// take receives a record of the current window.
	take(storedRecord)
	// endWindow follows the last record of a window.
	endWindow()
}

// A view is a sink that makes an answer of what it took.
type view interface {
	recordSink
	answer() any
}

// recentRecords is the parse step of an endpoint that shows a project's newest records
// through a view: ?limit (defLimit, at most maxLimit) and ?source_id.
func recentRecords(q url.Values, defLimit, maxLimit int, newView func(limit int) view) (readFunc, *apierror.Error) {
	limit := defLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return nil, apierror.New(http.StatusBadRequest, apierror.InvalidBody,
				fmt.Sprintf("limit must be a whole number from 1 to %d, got %q", maxLimit, v))
		}
		limit = min(n, maxLimit)
	}
	sourceID := q.Get("source_id")
	if len(sourceID) > maxParam || !printable(sourceID) {
		return nil, apierror.New(http.StatusBadRequest, apierror.InvalidBody, "source_id must be a source's id, as listed by the control plane")
	}
	return func(ctx context.Context, js jetstream.JetStream, projectID string) (any, error) {
		v := newView(limit)
		if err := readRecent(ctx, js, projectID, sourceID, v); err != nil {
			return nil, err
		}
		return v.answer(), nil
	}, nil
}

func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// readRecent hands a project's newest records to sink, from the newest back, until the
// sink needs no more; with sourceID, only that push source's records among the newest
// maxScan. A missing stream has no records.
func readRecent(ctx context.Context, js jetstream.JetStream, projectID, sourceID string, sink recordSink) error {
	s, err := js.Stream(ctx, streams.RawStream(projectID))
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	state := s.CachedInfo().State
	if state.Msgs == 0 || state.LastSeq < state.FirstSeq {
		return nil
	}
	perFetch := fetchBytes
	if nc := js.Conn(); nc != nil {
		perFetch = max(perFetch, 2*int(nc.MaxPayload()))
	}
	end, scanned, gaps := state.LastSeq, uint64(0), false
	for end >= state.FirstSeq && scanned < maxScan {
		need := sink.need()
		if need <= 0 {
			break
		}
		// Without a filter every sequence is a record, so a window of need sequences is
		// exactly the newest records; with one, matches may be sparse.
		n := uint64(need)
		if sourceID != "" {
			n = max(n*4, 4*fetchChunk)
		}
		if gaps {
			n = max(n, minWindow)
		}
		n = min(n, maxScan-scanned, end-state.FirstSeq+1)
		start := end - n + 1
		got, err := readRange(ctx, s, start, end, sourceID, perFetch, sink.take)
		sink.endWindow()
		if err != nil {
			return err
		}
		gaps = gaps || got < n
		scanned += n
		end = start - 1
	}
	return nil
}

// readRange reads the messages with sequences start..end, oldest first, through an
// ordered consumer, and hands take those of sourceID (all when empty): the others are
// dropped as they arrive. Sequences that no longer exist (expired) are simply absent. It
// returns how many messages of the range it read.
func readRange(ctx context.Context, s jetstream.Stream, start, end uint64, sourceID string, perFetch int, take func(storedRecord)) (uint64, error) {
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:       start,
		InactiveThreshold: time.Minute, // cleans up after a reader that died mid-read
		// A read is short: a consumer lost mid-read is a failed read, not one to retry
		// with backoff past the read's deadline.
		MaxResetAttempts: 1,
	})
	if err != nil {
		return 0, err
	}
	info := cons.CachedInfo()
	// The ordered consumer leaves its server-side consumer to the inactive threshold; the
	// read is over, so free it now rather than hold a consumer a minute per read.
	name := info.Name
	defer func() {
		if ci := cons.CachedInfo(); ci != nil {
			name = ci.Name // after a reset, the current one
		}
		dctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = s.DeleteConsumer(dctx, name)
	}()
	// Asking for no more than the range holds, nor than the consumer has pending, means
	// the reader never waits for messages that do not exist.
	want := min(end-start+1, info.NumPending)
	if want == 0 {
		return 0, nil
	}
	it, err := cons.Messages(jetstream.PullMaxMessagesWithBytesLimit(fetchChunk, perFetch), jetstream.StopAfter(int(want)))
	if err != nil {
		return 0, err
	}
	defer it.Stop()
	read := uint64(0)
	for read < want && ctx.Err() == nil {
		msg, err := it.Next(jetstream.NextMaxWait(fetchWait))
		if errors.Is(err, nats.ErrTimeout) || errors.Is(err, jetstream.ErrMsgIteratorClosed) {
			break // records deleted during the read: the range is shorter
		}
		if err != nil {
			return read, err
		}
		md, err := msg.Metadata()
		if err != nil {
			continue
		}
		seq := md.Sequence.Stream
		if seq > end {
			break
		}
		read++
		h := msg.Headers()
		if sourceID == "" || h.Get(streams.HeaderSourceID) == sourceID {
			take(storedRecord{seq: seq, time: md.Timestamp, signal: h.Get(streams.HeaderSignal),
				sourceID: h.Get(streams.HeaderSourceID), data: msg.Data()})
		}
		if seq == end || md.NumPending == 0 {
			break
		}
	}
	return read, ctx.Err()
}
