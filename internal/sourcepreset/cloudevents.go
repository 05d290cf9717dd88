package sourcepreset

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"
)

// CloudEvents media types (https://github.com/cloudevents/spec/blob/v1.0.2/cloudevents/bindings/http-protocol-binding.md).
const (
	ceStructured = "application/cloudevents+json"
	ceBatch      = "application/cloudevents-batch+json"
)

// ceContext are the attributes the spec defines; any other top-level member of a
// structured event (or ce-* header) is an extension, kept as a label.
var ceContext = map[string]bool{
	"specversion": true, "id": true, "source": true, "type": true, "time": true,
	"subject": true, "datacontenttype": true, "dataschema": true, "data": true, "data_base64": true,
}

func splitCloudEvents(h http.Header, body []byte, lim limits) ([]Event, error) {
	media, _, _ := mime.ParseMediaType(h.Get("Content-Type"))
	switch {
	case media == ceStructured:
		ev, err := structuredEvent(body, "")
		if err != nil {
			return nil, err
		}
		return []Event{ev}, nil
	case media == ceBatch:
		return batchEvents(body, lim)
	case h.Get("Ce-Specversion") != "":
		return []Event{binaryEvent(h, body)}, nil
	}
	// A sender that posts structured events as application/json: told apart by the
	// specversion every CloudEvent holds.
	if len(body) > 0 && body[0] == '[' {
		return batchEvents(body, lim)
	}
	if len(body) > 0 && body[0] == '{' {
		var probe struct {
			SpecVersion json.RawMessage `json:"specversion"`
		}
		if json.Unmarshal(body, &probe) == nil && probe.SpecVersion != nil {
			ev, err := structuredEvent(body, "")
			if err != nil {
				return nil, err
			}
			return []Event{ev}, nil
		}
	}
	return nil, fail(CloudEvents, "the request is not a CloudEvent: send structured mode (Content-Type: %s, or %s for a batch) or binary mode (ce-specversion, ce-type, ce-source and ce-id headers)", ceStructured, ceBatch)
}

func batchEvents(body []byte, lim limits) ([]Event, error) {
	if len(body) == 0 || body[0] != '[' {
		return nil, fail(CloudEvents, "a batch (%s) is a JSON array of structured events", ceBatch)
	}
	var raws []json.RawMessage
	if err := unmarshal(body, &raws); err != nil {
		return nil, fail(CloudEvents, "the batch is not a JSON array of events: %v", err)
	}
	if len(raws) > lim.maxEvents {
		return nil, fail(CloudEvents, "the batch holds %d events, more than the %d one request may carry", len(raws), lim.maxEvents)
	}
	events := make([]Event, 0, len(raws))
	for i, raw := range raws {
		ev, err := structuredEvent(bytes.TrimSpace(raw), "batch["+strconv.Itoa(i)+"]: ")
		if err != nil {
			return nil, err
		}
		events = append(events, ev)
	}
	return events, nil
}

// structuredEvent reads one event in the JSON format
// (https://github.com/cloudevents/spec/blob/v1.0.2/cloudevents/formats/json-format.md).
func structuredEvent(raw []byte, where string) (Event, error) {
	if len(raw) == 0 || raw[0] != '{' {
		return Event{}, fail(CloudEvents, "%sa structured event is a JSON object", where)
	}
	var members map[string]json.RawMessage
	if err := unmarshal(raw, &members); err != nil {
		return Event{}, fail(CloudEvents, "%sthe event is not valid JSON: %v", where, err)
	}
	attr := func(name string) string {
		var s string
		if json.Unmarshal(members[name], &s) != nil {
			return ""
		}
		return s
	}
	if attr("specversion") == "" {
		return Event{}, fail(CloudEvents, "%sthe event has no specversion", where)
	}
	typ := attr("type")
	if typ == "" {
		return Event{}, fail(CloudEvents, "%sthe event has no type", where)
	}
	ev := Event{EventType: typ, Source: attr("source"), Labels: map[string]string{}}
	ev.Time, _ = parseTime(attr("time"))
	ev.DedupID = ceDedupID(ev.Source, attr("id"))
	setLabel(ev.Labels, "subject", attr("subject"))
	for _, name := range sortedKeys(members) {
		if ceContext[name] {
			continue
		}
		var v any
		d := json.NewDecoder(bytes.NewReader(members[name]))
		d.UseNumber()
		if d.Decode(&v) == nil {
			setLabel(ev.Labels, name, labelValue(v))
		}
	}
	ev.Text = ceText(typ, ev.Source, attr("subject"))
	switch data, b64 := bytes.TrimSpace(members["data"]), members["data_base64"]; {
	case len(data) > 0 && data[0] == '{':
		ev.Payload = data
	case len(data) > 0 && string(data) != "null":
		ev.Payload = wrap("data", data)
	case b64 != nil:
		ev.Payload = wrap("data_base64", bytes.TrimSpace(b64))
	default:
		ev.Payload = json.RawMessage(`{}`)
	}
	return ev, nil
}

// binaryEvent reads binary mode: attributes in ce-* headers, the body the event's data.
func binaryEvent(h http.Header, body []byte) Event {
	attr := func(name string) string { return ceHeader(h.Get("Ce-" + name)) }
	ev := Event{EventType: attr("Type"), Source: attr("Source"), Labels: map[string]string{}, Headers: map[string]string{}}
	if ev.EventType == "" {
		ev.EventType = "cloudevent"
	}
	ev.Time, _ = parseTime(attr("Time"))
	ev.DedupID = ceDedupID(ev.Source, attr("Id"))
	setLabel(ev.Labels, "subject", attr("Subject"))
	for name, vs := range h {
		lower := strings.ToLower(name)
		if !strings.HasPrefix(lower, "ce-") || len(vs) == 0 {
			continue
		}
		v := ceHeader(vs[0])
		if len(v) > 1024 {
			v = v[:1024]
		}
		ev.Headers[lower] = v
		if ext := lower[3:]; !ceContext[ext] && v != "" {
			ev.Labels[ext] = v
		}
	}
	if ct := h.Get("Content-Type"); ct != "" {
		ev.Headers["content-type"] = ct
	}
	ev.Text = ceText(ev.EventType, ev.Source, attr("Subject"))
	switch {
	case len(body) == 0:
		ev.Payload = json.RawMessage(`{}`)
	case body[0] == '{' && json.Valid(body):
		ev.Payload = body
	case json.Valid(body):
		ev.Payload = wrap("data", body)
	case utf8.Valid(body):
		s, _ := json.Marshal(string(body))
		ev.Payload = wrap("data", s)
	default:
		s, _ := json.Marshal(base64.StdEncoding.EncodeToString(body))
		ev.Payload = wrap("data_base64", s)
	}
	return ev
}

// ceHeader undoes the percent-encoding the HTTP binding applies to header values.
func ceHeader(v string) string {
	if !strings.Contains(v, "%") {
		return v
	}
	if u, err := url.PathUnescape(v); err == nil && utf8.ValidString(u) {
		return u
	}
	return v
}

func ceText(typ, source, subject string) string {
	t := typ
	if source != "" {
		t += " from " + source
	}
	if subject != "" {
		t += ": " + subject
	}
	return oneLine(t)
}

// wrap is {"<key>": value}, for data that is not a JSON object: a payload is always one.
func wrap(key string, value []byte) json.RawMessage {
	out := make([]byte, 0, len(key)+len(value)+6)
	out = append(out, `{"`...)
	out = append(out, key...)
	out = append(out, `":`...)
	out = append(out, value...)
	return append(out, '}')
}

// ceDedupID is an event's identity: the spec makes id unique within its source, so the
// two together. Without both there is none: a source alone would merge its events, and
// an id alone those of every sender that numbers from 1 (on /v1/events the duplicate
// window is the project's whole stream).
func ceDedupID(source, id string) string {
	if id == "" || source == "" {
		return ""
	}
	return dedupID(source, id)
}
