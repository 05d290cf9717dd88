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
const (
	defaultEventsLimit = 50
	maxEventsLimit     = 500
	defaultFieldsLimit = 100
	maxFieldsLimit     = 1000
	// maxScan bounds how far back a source_id filter looks: the newest maxScan records of
	// the stream, whatever their source.
	maxScan = 10000
	// fetchChunk is how many messages one fetch asks for.
	fetchChunk = 250
	// consoleTimeout bounds one read.
	consoleTimeout = 10 * time.Second
)

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
	r.serveConsole(w, req, defaultEventsLimit, maxEventsLimit, func(recs []storedRecord) any {
		out := make([]consoleEvent, 0, len(recs))
		for _, rec := range recs {
			raw := json.RawMessage(rec.data)
			if !json.Valid(raw) {
				// Never the case for records we wrote; keep the answer valid JSON anyway.
				b, _ := json.Marshal(string(rec.data))
				raw = b
			}
			out = append(out, consoleEvent{Seq: rec.seq, Time: rec.time.UTC().Format(time.RFC3339Nano),
				Signal: rec.signal, SourceID: rec.sourceID, Record: raw})
		}
		return map[string]any{"events": out}
	})
}

func (r *ingestReceiver) handleConsoleFields(w http.ResponseWriter, req *http.Request) {
	r.serveConsole(w, req, defaultFieldsLimit, maxFieldsLimit, func(recs []storedRecord) any {
		s := newFieldStats()
		for _, rec := range recs {
			s.add(rec.data)
		}
		body := map[string]any{"sampled": s.sampled, "fields": s.result()}
		if s.truncated {
			body["truncated"] = true
		}
		return body
	})
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

func (r *ingestReceiver) serveConsole(w http.ResponseWriter, req *http.Request, defLimit, maxLimit int, answer func([]storedRecord) any) {
	setCORS(w)
	w.Header().Set("Cache-Control", "no-store")
	if req.Method == http.MethodOptions {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	recs, e := r.consoleRead(req, defLimit, maxLimit)
	if e != nil {
		if e.Status == http.StatusMethodNotAllowed {
			w.Header().Set("Allow", "GET, OPTIONS")
		}
		apierror.Write(w, e)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	if req.Method == http.MethodHead {
		return
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(answer(recs))
}

func (r *ingestReceiver) consoleRead(req *http.Request, defLimit, maxLimit int) ([]storedRecord, *apierror.Error) {
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		return nil, apierror.New(http.StatusMethodNotAllowed, apierror.MethodNotAllowed, "only GET is allowed here")
	}
	projectID := req.PathValue("project_id")
	if r.dp == nil {
		return nil, apierror.New(http.StatusNotFound, apierror.NotFound, "the console read API needs the projectauth extension as this receiver's authenticator")
	}
	ctx, err := r.dp.AuthenticateConsole(req.Context(), req.Header, projectID)
	if err != nil {
		return nil, r.authRefusal(err)
	}
	if !streams.ValidProjectID(projectID) { // unreachable for an authenticated project
		return nil, apierror.New(http.StatusNotFound, apierror.NotFound, "no such project, or your credentials do not open it")
	}
	q := req.URL.Query()
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
	if len(sourceID) > maxHeaderValue || !printable(sourceID) {
		return nil, apierror.New(http.StatusBadRequest, apierror.InvalidBody, "source_id must be a source's id, as listed by the control plane")
	}
	js := r.dp.JetStream()
	if js == nil {
		return nil, r.readUnavailable()
	}
	ctx, cancel := context.WithTimeout(ctx, consoleTimeout)
	defer cancel()
	recs, err := recentRecords(ctx, js, projectID, limit, sourceID)
	if err != nil {
		r.settings.Logger.Debug("console read failed", zap.String("project_id", projectID), zap.Error(err))
		return nil, r.readUnavailable()
	}
	return recs, nil
}

func (r *ingestReceiver) readUnavailable() *apierror.Error {
	e := apierror.New(http.StatusServiceUnavailable, apierror.Unavailable, "storage (NATS JetStream) cannot be read right now; retry in a moment")
	e.RetryAfter = r.cfg.RetryAfter
	return e
}

// recentRecords returns up to limit records of a project's raw stream, newest first; with
// sourceID, only that push source's records among the newest maxScan. A missing stream
// has no records.
func recentRecords(ctx context.Context, js jetstream.JetStream, projectID string, limit int, sourceID string) ([]storedRecord, error) {
	s, err := js.Stream(ctx, streams.RawStream(projectID))
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	state := s.CachedInfo().State
	if state.Msgs == 0 || state.LastSeq < state.FirstSeq {
		return nil, nil
	}
	out := make([]storedRecord, 0, limit)
	end, scanned := state.LastSeq, uint64(0)
	for end >= state.FirstSeq && len(out) < limit && scanned < maxScan {
		n := uint64(limit - len(out))
		if sourceID != "" {
			n = max(n*4, 4*fetchChunk) // fewer, larger windows: matches may be sparse
		}
		n = min(n, maxScan-scanned, end-state.FirstSeq+1)
		start := end - n + 1
		window, err := readRange(ctx, s, start, end)
		if err != nil {
			return nil, err
		}
		for i := len(window) - 1; i >= 0 && len(out) < limit; i-- {
			if sourceID == "" || window[i].sourceID == sourceID {
				out = append(out, window[i])
			}
		}
		scanned += n
		if start == 0 {
			break
		}
		end = start - 1
	}
	return out, nil
}

// readRange reads the messages with sequences start..end, oldest first, through an
// ephemeral consumer that is deleted afterwards. Sequences that no longer exist (expired)
// are simply absent.
func readRange(ctx context.Context, s jetstream.Stream, start, end uint64) ([]storedRecord, error) {
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
		return nil, err
	}
	name := cons.CachedInfo().Name
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = s.DeleteConsumer(dctx, name)
	}()
	var out []storedRecord
	for {
		want := int(min(end-start+1, fetchChunk))
		batch, err := cons.FetchNoWait(want)
		if err != nil {
			return nil, err
		}
		got, past := 0, false
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
			h := msg.Headers()
			out = append(out, storedRecord{seq: seq, time: md.Timestamp, signal: h.Get(streams.HeaderSignal),
				sourceID: h.Get(streams.HeaderSourceID), data: msg.Data()})
			start = seq + 1
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return nil, err
		}
		if got == 0 || past || start > end || ctx.Err() != nil {
			return out, ctx.Err()
		}
	}
}
