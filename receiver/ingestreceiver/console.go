package ingestreceiver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/otelcol-svc/otelcol-svc/components/apierror"
	"github.com/otelcol-svc/otelcol-svc/components/streams"
)

// The console read API: the dashboard's Recent events and Fields views read a project's
// raw stream here, from the browser, so payloads never pass through the control plane.
//
//	GET /console/v1/projects/{project_id}/events?limit=50&source_id=<id>
//	GET /console/v1/projects/{project_id}/fields?limit=100&source_id=<id>
//
// Reads use short-lived ephemeral consumers (no ack, in memory, deleted after the read),
// never the pipeline's durable consumers, so they change nothing the pipeline sees.
//
// What one read may cost is bounded, since records are up to the NATS max payload (1 MiB
// by default) and a source filter looks through thousands of them: records of other
// sources are dropped as they arrive, an events answer holds at most maxReadBytes of
// records and the fields view walks at most that many bytes, keeping none; one fetch
// brings at most fetchBytes; and at most maxConsoleReads reads run at once per process.
const (
	defaultEventsLimit = 50
	maxEventsLimit     = 500
	defaultFieldsLimit = 100
	maxFieldsLimit     = 1000
	// maxScan bounds how far back a source_id filter looks: the newest maxScan records of
	// the stream, whatever their source.
	maxScan = 10000
	// fetchChunk is how many messages one fetch asks for, and minWindow the fewest
	// sequences a window spans once sequences turned out missing (expired or deleted), so
	// such ranges cost one consumer per minWindow sequences, not one per sequence.
	fetchChunk = 250
	minWindow  = fetchChunk
	// fetchBytes bounds the bytes one fetch brings (raised to two max payloads when the
	// server allows larger messages, so any single record fits).
	fetchBytes = 4 << 20
	// fetchWait bounds a fetch that waits for messages that went away during the read.
	fetchWait = time.Second
	// maxReadBytes bounds the records of one answer (events) or one sample (fields).
	maxReadBytes = 8 << 20
	// maxConsoleReads bounds the reads running at once in this process; more are answered
	// 503 with Retry-After. A read holds up to maxReadBytes of records plus a fetch.
	maxConsoleReads = 4
	// consoleTimeout bounds one read.
	consoleTimeout = 10 * time.Second
)

// consoleReads holds a token per running read: a per-process bound, as memory is.
var consoleReads = make(chan struct{}, maxConsoleReads)

// storedRecord is one message of a raw stream.
type storedRecord struct {
	seq      uint64
	time     time.Time
	signal   string
	sourceID string
	data     []byte
}

type consoleEvent struct {
	Seq      uint64          `json:"seq"`
	Time     string          `json:"time"`
	Signal   string          `json:"signal"`
	SourceID string          `json:"source_id,omitempty"`
	Record   json.RawMessage `json:"record"`
}

func (r *ingestReceiver) handleConsoleEvents(w http.ResponseWriter, req *http.Request) {
	r.serveConsole(w, req, defaultEventsLimit, maxEventsLimit, func(limit int) consoleView {
		return &eventsView{limit: limit, maxBytes: maxReadBytes}
	})
}

func (r *ingestReceiver) handleConsoleFields(w http.ResponseWriter, req *http.Request) {
	r.serveConsole(w, req, defaultFieldsLimit, maxFieldsLimit, func(limit int) consoleView {
		return &fieldsView{stats: newFieldStats(), limit: limit, maxBytes: maxReadBytes}
	})
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

// A consoleView is a sink that makes an answer of what it took.
type consoleView interface {
	recordSink
	answer() any
}

// eventsView keeps the newest records, newest first, within limit and maxBytes. Inside a
// window older records give way to newer ones, so memory never exceeds the answer.
type eventsView struct {
	limit, maxBytes int
	out             []storedRecord // earlier windows, newest first
	win             []storedRecord // the current window, oldest first
	bytes           int            // of out and win
	truncated       bool           // a record was left out for the byte budget
}

func (v *eventsView) need() int {
	if v.truncated {
		return 0 // older records would be answered without newer ones
	}
	return v.limit - len(v.out)
}

func (v *eventsView) take(rec storedRecord) {
	v.win = append(v.win, rec)
	v.bytes += len(rec.data)
	for len(v.win) > 0 && (len(v.out)+len(v.win) > v.limit || v.bytes > v.maxBytes) {
		if len(v.out)+len(v.win) <= v.limit {
			v.truncated = true
		}
		v.bytes -= len(v.win[0].data)
		v.win[0] = storedRecord{} // let its bytes go
		v.win = v.win[1:]
	}
}

func (v *eventsView) endWindow() {
	for i := len(v.win) - 1; i >= 0; i-- {
		v.out = append(v.out, v.win[i])
	}
	v.win = nil
}

func (v *eventsView) answer() any {
	out := make([]consoleEvent, 0, len(v.out))
	for _, rec := range v.out {
		raw := json.RawMessage(rec.data)
		if !json.Valid(raw) {
			// Never the case for records we wrote; keep the answer valid JSON anyway.
			b, _ := json.Marshal(string(rec.data))
			raw = b
		}
		out = append(out, consoleEvent{Seq: rec.seq, Time: rec.time.UTC().Format(time.RFC3339Nano),
			Signal: rec.signal, SourceID: rec.sourceID, Record: raw})
	}
	body := map[string]any{"events": out}
	if v.truncated {
		body["truncated"] = true
	}
	return body
}

// handleConsoleOther answers other /console/ paths, with CORS so the browser can read it.
func (r *ingestReceiver) handleConsoleOther(w http.ResponseWriter, req *http.Request) {
	setCORS(w)
	if req.Method == http.MethodOptions {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	apierror.Write(w, apierror.New(http.StatusNotFound, apierror.NotFound,
		fmt.Sprintf("no endpoint %s; the console read API has /console/v1/projects/{project_id}/events and /fields", req.URL.Path)))
}

// setCORS lets the dashboard, served from another origin, call the read API from the
// browser. Any origin may: requests carry a bearer credential (API key or console token)
// in a header, never a cookie, so a foreign page gains nothing it does not already hold.
func setCORS(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", "*")
	h.Set("Access-Control-Allow-Methods", "GET, OPTIONS")
	h.Set("Access-Control-Allow-Headers", "Authorization, X-API-Key")
	h.Set("Access-Control-Max-Age", "600")
}

func (r *ingestReceiver) serveConsole(w http.ResponseWriter, req *http.Request, defLimit, maxLimit int, newView func(limit int) consoleView) {
	setCORS(w)
	w.Header().Set("Cache-Control", "no-store")
	if req.Method == http.MethodOptions {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	view, release, e := r.consoleRead(req, defLimit, maxLimit, newView)
	if e != nil {
		if e.Status == http.StatusMethodNotAllowed {
			w.Header().Set("Allow", "GET, OPTIONS")
		}
		apierror.Write(w, e)
		return
	}
	// The records stay in memory until the answer is written, so the read keeps its slot
	// until then; a client too slow to take the answer is cut off rather than hold it.
	defer release()
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(consoleTimeout))
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	if req.Method == http.MethodHead {
		return
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(view.answer())
}

// consoleRead authenticates and reads; on success the caller calls release once the
// answer is written.
func (r *ingestReceiver) consoleRead(req *http.Request, defLimit, maxLimit int, newView func(limit int) consoleView) (view consoleView, release func(), e *apierror.Error) {
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		return nil, nil, apierror.New(http.StatusMethodNotAllowed, apierror.MethodNotAllowed, "only GET is allowed here")
	}
	projectID := req.PathValue("project_id")
	if r.dp == nil { // a configuration problem, logged at start
		return nil, nil, apierror.New(http.StatusInternalServerError, apierror.Internal, "the console read API is not available because of a server configuration problem")
	}
	ctx, err := r.dp.AuthenticateConsole(req.Context(), req.Header, projectID)
	if err != nil {
		return nil, nil, r.authRefusal(err)
	}
	if !streams.ValidProjectID(projectID) { // unreachable for an authenticated project
		return nil, nil, apierror.New(http.StatusNotFound, apierror.NotFound, "no such project, or your credentials do not open it")
	}
	q := req.URL.Query()
	limit := defLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return nil, nil, apierror.New(http.StatusBadRequest, apierror.InvalidBody,
				fmt.Sprintf("limit must be a whole number from 1 to %d, got %q", maxLimit, v))
		}
		limit = min(n, maxLimit)
	}
	sourceID := q.Get("source_id")
	if len(sourceID) > maxHeaderValue || !printable(sourceID) {
		return nil, nil, apierror.New(http.StatusBadRequest, apierror.InvalidBody, "source_id must be a source's id, as listed by the control plane")
	}
	js := r.dp.JetStream()
	if js == nil {
		return nil, nil, r.readUnavailable()
	}
	select {
	case consoleReads <- struct{}{}:
	default:
		busy := apierror.New(http.StatusServiceUnavailable, apierror.Unavailable,
			"the receiver is serving as many console reads as it allows at once; retry in a moment")
		busy.RetryAfter = r.cfg.RetryAfter
		return nil, nil, busy
	}
	release = func() { <-consoleReads }
	ctx, cancel := context.WithTimeout(ctx, consoleTimeout)
	defer cancel()
	view = newView(limit)
	if err := readRecent(ctx, js, projectID, sourceID, view); err != nil {
		release()
		r.settings.Logger.Debug("console read failed", zap.String("project_id", projectID), zap.Error(err))
		return nil, nil, r.readUnavailable()
	}
	return view, release, nil
}

func (r *ingestReceiver) readUnavailable() *apierror.Error {
	e := apierror.New(http.StatusServiceUnavailable, apierror.Unavailable, "storage (NATS JetStream) cannot be read right now; retry in a moment")
	e.RetryAfter = r.cfg.RetryAfter
	return e
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
// ephemeral consumer that is deleted afterwards, and hands take those of sourceID (all
// when empty): the others are dropped as they arrive. Sequences that no longer exist
// (expired) are simply absent. It returns how many messages of the range it read.
func readRange(ctx context.Context, s jetstream.Stream, start, end uint64, sourceID string, perFetch int, take func(storedRecord)) (uint64, error) {
	cons, err := s.CreateConsumer(ctx, jetstream.ConsumerConfig{
		Description:       "otelcol-svc console read",
		DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:       start,
		AckPolicy:         jetstream.AckNonePolicy,
		InactiveThreshold: time.Minute, // cleans up after a reader that died mid-read
		MemoryStorage:     true,
		Replicas:          1,
	})
	if err != nil {
		return 0, err
	}
	info := cons.CachedInfo()
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = s.DeleteConsumer(dctx, info.Name)
	}()
	// Asking for no more than the consumer has pending means a fetch never waits for
	// messages that do not exist.
	pending, read := info.NumPending, uint64(0)
	for start <= end && pending > 0 && ctx.Err() == nil {
		want := min(end-start+1, fetchChunk, pending)
		batch, err := cons.Fetch(int(want), jetstream.FetchMaxBytes(perFetch), jetstream.FetchMaxWait(fetchWait))
		if err != nil {
			return read, err
		}
		got, past := uint64(0), false
		for msg := range batch.Messages() {
			got++
			md, err := msg.Metadata()
			if err != nil {
				continue
			}
			seq := md.Sequence.Stream
			if seq > end {
				past = true
				continue
			}
			read++
			start = seq + 1
			h := msg.Headers()
			if sourceID != "" && h.Get(streams.HeaderSourceID) != sourceID {
				continue
			}
			take(storedRecord{seq: seq, time: md.Timestamp, signal: h.Get(streams.HeaderSignal),
				sourceID: h.Get(streams.HeaderSourceID), data: msg.Data()})
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return read, err
		}
		if got == 0 || past {
			break
		}
		pending -= min(got, pending)
	}
	return read, ctx.Err()
}
