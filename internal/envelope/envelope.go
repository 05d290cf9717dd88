// Package envelope builds the record a push source stores for each payload it receives
// (docs/contract.md#section-4, "source"):
//
//	{"_event_type": ..., "_source": "<source name>", "timestamp": ..., "text": ...,
//	 "labels": {...}, "payload": <the payload object, byte for byte as received>}
//
// It is pure (no NATS, no clock of its own), so the receiver's ingest path and the control
// plane's "test a source" preview build exactly the same envelope from the same input.
//
// Where the contract is silent, this package decides:
//
//   - _event_type: the value at event_type_field when it is a non-empty string, a number or a
//     boolean (numbers as sent, booleans as true/false); otherwise (missing, null, "",
//     object, array) the source's event_type, or "webhook_event" when that is empty too.
//   - timestamp: always RFC 3339 UTC with nine fractional digits. event_time_field may hold
//     an ISO 8601 / RFC 3339 time ("2024-05-01T12:00:00Z", with or without fraction, with
//     "+02:00", "+0200" or no offset (then UTC), a space instead of "T", or a bare date;
//     also the basic format "20240501T120000Z", "20240501T140000.5+0200") or
//     a unix time as a number or a string of digits: seconds below 1e11, milliseconds below
//     1e14, microseconds below 1e17, nanoseconds above (so 1714564800, 1714564800123 and
//     1714564800123456789 all mean the same day). Anything else falls back to the time
//     received, with a warning.
//   - text: text_template rendered by internal/textfmt; a placeholder naming no field
//     renders empty, with a warning. Without a template, text is "".
//   - labels: each label's value is the text of the field its path names (strings as they
//     are, numbers as sent, objects and arrays as compact JSON, null as ""). A label whose
//     field is missing is left out of labels (so a trigger can tell "missing" from "empty"),
//     with a warning. labels is always present, possibly {}.
//
// Warnings never stop a record from being stored: they are for people previewing a source.
//
// A source with a preset (internal/sourcepreset) stores BuildPreset's envelope for each
// event its preset reads: the same shape, the preset's type, time, text and labels where
// the source's own settings say nothing, and a "headers" member after the payload with
// the request headers the preset keeps.
package envelope

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/otelcol-svc/otelcol-svc/internal/eventjson"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/recordjson"
	"github.com/otelcol-svc/otelcol-svc/internal/sourcepreset"
	"github.com/otelcol-svc/otelcol-svc/internal/textfmt"
)

// DefaultEventType is the event type of a source that names none.
const DefaultEventType = "webhook_event"

// Result is one built envelope.
type Result struct {
	// Record is the envelope's JSON, as it is stored on the raw stream.
	Record []byte
	// EventType is the record's _event_type.
	EventType string
	// Warnings are sentences a person can act on, about fields the source's settings name
	// that the payload lacks or holds in an unusable form. Nil when there is nothing to say.
	Warnings []string
}

// Build returns the envelope of one payload received at received. The error is an
// *eventjson.Error (Syntax true when payload is not JSON at all) when payload is not a
// single JSON object; the receiver answers it with 400.
func Build(src mirror.Source, payload []byte, received time.Time) (Result, error) {
	obj, err := eventjson.Object(payload)
	if err != nil {
		return Result{}, err
	}
	return BuildObject(src, obj, received), nil
}

// BuildObject is Build for a payload already checked to be one JSON object without
// surrounding white space, as eventjson.Objects returns them: the push path does not
// validate each object twice.
func BuildObject(src mirror.Source, obj []byte, received time.Time) Result {
	return build(src, obj, received, nil)
}

// BuildPreset returns the envelope of one event a source's preset read
// (internal/sourcepreset), in the contract's shape: the preset fills _event_type,
// timestamp, text and labels, and the source's own settings apply on top where set:
// event_type_field (when the payload has it) before the preset's event type,
// event_time_field (when it reads as a time) before the preset's time, text_template
// instead of the preset's text, and each declared label over the preset's label of that
// name (a declared label whose field is missing leaves the preset's label, with a
// warning). The event's Source, when set, is the label "source" unless one is already
// there. The headers the preset kept follow the payload as "headers" (left out when
// there are none). The event's DedupID is not part of the record: it is the message id.
//
// ev.Payload must be one JSON object, as sourcepreset.Split returns them.
func BuildPreset(src mirror.Source, ev sourcepreset.Event, received time.Time) Result {
	return build(src, ev.Payload, received, &ev)
}

func build(src mirror.Source, obj []byte, received time.Time, pre *sourcepreset.Event) Result {
	var doc any
	if src.EventTypeField != "" || src.EventTimeField != "" || src.TextTemplate != "" || len(src.Labels) > 0 {
		// Object has validated the bytes, so this cannot fail; a nil doc only makes every
		// field "missing".
		doc, _ = textfmt.Decode(obj)
	}
	var res Result
	warn := func(format string, args ...any) { res.Warnings = append(res.Warnings, fmt.Sprintf(format, args...)) }

	if pre != nil && pre.EventType != "" {
		// The preset's type stands where the source's event_type would.
		s := src
		s.EventType = pre.EventType
		res.EventType = eventType(s, "the sender's", doc, warn)
	} else {
		res.EventType = eventType(src, "the source's", doc, warn)
	}

	ts := received
	fallback := "the time received"
	if pre != nil && !pre.Time.IsZero() {
		ts, fallback = pre.Time, "the sender's event time"
	}
	if src.EventTimeField != "" {
		if v, ok := textfmt.Resolve(doc, src.EventTimeField); !ok {
			warn("event_time_field %q is not in the payload; %s is used as the timestamp", src.EventTimeField, fallback)
		} else if t, ok := ParseTime(v); ok {
			ts = t
		} else {
			warn("event_time_field %q holds %s, which is neither an ISO 8601 time (e.g. 2024-05-01T12:00:00Z) nor a unix time; %s is used as the timestamp",
				src.EventTimeField, shorten(textfmt.String(v), v), fallback)
		}
	}

	text := ""
	if pre != nil {
		text = pre.Text
	}
	if src.TextTemplate != "" {
		var missing []string
		text, missing = textfmt.Render(src.TextTemplate, doc)
		for _, m := range missing {
			if m == "" {
				warn("text_template has an empty placeholder {}; write {field} or {a.b.c}, or {{ and }} for literal braces")
				continue
			}
			warn("text_template: field %q is not in the payload; it renders empty", m)
		}
	}

	labels := make(map[string]string, len(src.Labels))
	if pre != nil {
		for k, v := range pre.Labels {
			labels[k] = v
		}
		if _, taken := labels["source"]; !taken && pre.Source != "" {
			labels["source"] = pre.Source
		}
	}
	names := make([]string, 0, len(src.Labels))
	for name := range src.Labels {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		path := src.Labels[name]
		v, ok := textfmt.Resolve(doc, path)
		if !ok {
			if _, kept := labels[name]; kept {
				warn("label %q: field %q is not in the payload; the preset's value is kept", name, path)
			} else {
				warn("label %q: field %q is not in the payload; the label is left out", name, path)
			}
			continue
		}
		labels[name] = textfmt.String(v)
	}
	names = names[:0]
	for name := range labels {
		names = append(names, name)
	}
	sort.Strings(names)

	out := make([]byte, 0, len(obj)+len(text)+128+32*len(names))
	out = append(out, `{"_event_type":`...)
	out = recordjson.AppendString(out, res.EventType)
	out = append(out, `,"_source":`...)
	out = recordjson.AppendString(out, src.Name)
	out = append(out, `,"timestamp":`...)
	out = recordjson.AppendTimestamp(out, ts)
	out = append(out, `,"text":`...)
	out = recordjson.AppendString(out, text)
	out = append(out, `,"labels":{`...)
	for i, name := range names {
		if i > 0 {
			out = append(out, ',')
		}
		out = recordjson.AppendString(out, name)
		out = append(out, ':')
		out = recordjson.AppendString(out, labels[name])
	}
	out = append(out, `},"payload":`...)
	out = append(out, obj...)
	if pre != nil && len(pre.Headers) > 0 {
		hn := make([]string, 0, len(pre.Headers))
		for name := range pre.Headers {
			hn = append(hn, name)
		}
		sort.Strings(hn)
		out = append(out, `,"headers":{`...)
		for i, name := range hn {
			if i > 0 {
				out = append(out, ',')
			}
			out = recordjson.AppendString(out, name)
			out = append(out, ':')
			out = recordjson.AppendString(out, pre.Headers[name])
		}
		out = append(out, '}')
	}
	out = append(out, '}')
	res.Record = out
	return res
}

func eventType(src mirror.Source, whose string, doc any, warn func(string, ...any)) string {
	fallback := src.EventType
	if fallback == "" {
		fallback = DefaultEventType
	}
	if src.EventTypeField == "" {
		return fallback
	}
	v, ok := textfmt.Resolve(doc, src.EventTypeField)
	if !ok {
		warn("event_type_field %q is not in the payload; %s event type %q is used", src.EventTypeField, whose, fallback)
		return fallback
	}
	switch v.(type) {
	case string, bool, json.Number:
	default:
		warn("event_type_field %q holds %s, not a string; %s event type %q is used", src.EventTypeField, kindOf(v), whose, fallback)
		return fallback
	}
	s := textfmt.String(v)
	if s == "" {
		warn("event_type_field %q is empty in the payload; %s event type %q is used", src.EventTypeField, whose, fallback)
		return fallback
	}
	return s
}

func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	}
	return "a value"
}

// shorten quotes a value for a warning, cut to a readable length.
func shorten(s string, v any) string {
	if v == nil {
		return "null"
	}
	if _, isMap := v.(map[string]any); isMap {
		return "an object"
	}
	if _, isArr := v.([]any); isArr {
		return "an array"
	}
	const max = 64
	if len(s) > max {
		s = s[:max] + "..."
	}
	return strconv.Quote(s)
}

// isoLayouts are the ISO 8601 forms ParseTime accepts, tried in order. Fractions of a
// second are optional in each (Go accepts any fraction after the seconds when parsing).
var isoLayouts = []string{
	time.RFC3339Nano,
	"2006-01-02T15:04:05Z0700",
	"2006-01-02 15:04:05Z07:00",
	"2006-01-02 15:04:05Z0700",
	"2006-01-02T15:04:05",
	"2006-01-02 15:04:05",
	"2006-01-02T15:04Z07:00",
	"2006-01-02",
	// ISO 8601's basic format (no separators), as some systems and compact logs write
	// it: without these "20261121T100000Z" fell back to the time received. A bare
	// basic date ("20261121") is left out: as digits it is a unix time.
	"20060102T150405Z0700",
	"20060102T150405Z07",
	"20060102T150405",
}

// ParseTime reads a decoded payload value as a point in time: an ISO 8601 / RFC 3339
// string (no offset means UTC), or a unix time as a number or a string of digits (seconds,
// milliseconds, microseconds or nanoseconds, told apart by magnitude; see the package
// comment). ok is false for anything else.
func ParseTime(v any) (time.Time, bool) {
	switch x := v.(type) {
	case string:
		s := strings.TrimSpace(x)
		if s == "" {
			return time.Time{}, false
		}
		if isDigits(s) {
			return unixTime(s)
		}
		// Lower-case 't' and 'z' are valid ISO 8601; time.Parse wants upper case.
		s = strings.Map(func(r rune) rune {
			switch r {
			case 't':
				return 'T'
			case 'z':
				return 'Z'
			}
			return r
		}, s)
		for _, layout := range isoLayouts {
			if t, err := time.Parse(layout, s); err == nil {
				return t.UTC(), true
			}
		}
		return time.Time{}, false
	case json.Number:
		return unixTime(x.String())
	}
	return time.Time{}, false
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// unixTime reads a unix time, written as a decimal number, whose unit is told by its
// magnitude. Integers are read exactly (nanoseconds survive); numbers with a fraction or
// an exponent are read as float64, rounded to microseconds.
func unixTime(num string) (time.Time, bool) {
	if n, err := strconv.ParseInt(num, 10, 64); err == nil {
		switch {
		case n < 0:
			return time.Time{}, false
		case n < 1e11:
			return time.Unix(n, 0).UTC(), true
		case n < 1e14:
			return time.UnixMilli(n).UTC(), true
		case n < 1e17:
			return time.UnixMicro(n).UTC(), true
		default:
			return time.Unix(0, n).UTC(), true
		}
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
		return time.Time{}, false
	}
	var sec float64
	switch {
	case f < 1e11:
		sec = f
	case f < 1e14:
		sec = f / 1e3
	case f < 1e17:
		sec = f / 1e6
	case f < 1e20:
		sec = f / 1e9
	default:
		return time.Time{}, false
	}
	whole, frac := math.Modf(sec)
	// float64 cannot carry nanoseconds of a present-day time; rounding to microseconds
	// keeps 1714564800.123 from becoming .122999906.
	ns := math.Round(frac*1e6) * 1e3
	return time.Unix(int64(whole), int64(ns)).UTC(), true
}
