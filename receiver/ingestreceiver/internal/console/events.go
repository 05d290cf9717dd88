package console

import (
	"encoding/json"
	"net/url"
	"time"

	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
)

// GET /console/v1/projects/{project_id}/events?limit=50&source_id=<id>: the project's
// newest records, newest first.
const (
	defaultEventsLimit = 50
	maxEventsLimit     = 500
)

func eventsEndpoint() endpoint {
	return endpoint{name: "events", parse: query(func(q url.Values) (readFunc, *apierror.Error) {
		return recentRecords(q, defaultEventsLimit, maxEventsLimit, func(limit int) view {
			return &eventsView{limit: limit, maxBytes: maxReadBytes}
		})
	})}
}

type consoleEvent struct {
	Seq      uint64          `json:"seq"`
	Time     string          `json:"time"`
	Signal   string          `json:"signal"`
	SourceID string          `json:"source_id,omitempty"`
	Record   json.RawMessage `json:"record"`
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
