// Package sourcepreset reads the webhook bodies of well-known senders (a push source's
// "preset") into events: what the sender means by event type, time, text and labels, and
// the sender's own delivery id, so that a provider's retry is stored once.
//
// Presets and what each reads (docs/contract.md#section-4 describes the stored envelope):
//
//   - alertmanager, grafana: one event per alert in alerts[]; event type alert.firing or
//     alert.resolved from the alert's own status; labels are the alert's labels; time is
//     startsAt (firing) or endsAt (resolved); text is annotations.summary, else
//     labels.alertname. The payload is the alert object with a "group" member added: the
//     notification's other fields (groupKey, status, receiver, groupLabels, commonLabels,
//     commonAnnotations, externalURL, and for Grafana orgId, title, state, message ...).
//     Dedup id: groupKey, status, fingerprint and startsAt, so Alertmanager's repeat of the
//     same notification is stored once, a resolve is new, and so is a later firing of the
//     same alert (new startsAt). Without a fingerprint (Alertmanager before 0.19) the
//     alert's labels stand in for it.
//   - github: event type from X-GitHub-Event and the payload's action
//     ("pull_request.opened", "push"); time from the payload's own times; text for push,
//     pull_request, issues, workflow_run and check_run; dedup id X-GitHub-Delivery.
//   - stripe: type, created (unix seconds, or an RFC 3339 string in v2 events), dedup id
//     the event id.
//   - sentry: Sentry-Hook-Resource "." action; time from the resource's own time field,
//     else Sentry-Hook-Timestamp; dedup id the Request-ID header.
//   - pagerduty (v3 webhooks): event.event_type, event.occurred_at, dedup id event.id.
//   - cloudevents: structured (application/cloudevents+json), batch
//     (application/cloudevents-batch+json) and binary mode (ce-* headers); the payload is
//     the event's data when it is a JSON object, else {"data": <value>} (or
//     {"data_base64": "..."}), so a payload is always an object; dedup id source and id.
//
// Every preset falls back to the Standard Webhooks webhook-id header for its dedup id when
// the sender's own id is missing. Dedup ids are printable ASCII of at most 128 bytes (a
// longer or unprintable id is replaced by its SHA-256), so they fit a NATS message id.
// Headers are kept by an allowlist per preset, never a signature or credential header;
// their names are lower case.
//
// Split does linear work in the body's size: one decode, at most Limits.MaxEvents events,
// and output bytes bounded by a small multiple of the body (the alert presets repeat the
// group on each alert, so a body whose group is large and alerts many is refused).
package sourcepreset

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The preset names a source may hold in its "preset" field.
const (
	Alertmanager = "alertmanager"
	Grafana      = "grafana"
	GitHub       = "github"
	Stripe       = "stripe"
	Sentry       = "sentry"
	PagerDuty    = "pagerduty"
	CloudEvents  = "cloudevents"
)

// Names lists every preset, in the order the contract names them.
func Names() []string {
	return []string{Alertmanager, Grafana, GitHub, Stripe, Sentry, PagerDuty, CloudEvents}
}

// Valid reports whether name is a preset Split reads.
func Valid(name string) bool {
	_, ok := splitters[name]
	return ok
}

// Event is one event a preset read from a body.
type Event struct {
	// Payload is a JSON object: what the envelope stores as "payload". It may share
	// memory with the body Split was given (GitHub's, Stripe's, ... is the body itself).
	Payload json.RawMessage
	// EventType is the sender's event type; never empty.
	EventType string
	// Time is when the sender says the event happened; zero when it does not say (then
	// the time received stands in).
	Time time.Time
	// Text is a one-line description a person can read; may be empty.
	Text string
	// Labels are the sender's own labels (an alert's labels, a repository, ...); never nil.
	Labels map[string]string
	// DedupID identifies the delivery, the same on each of the sender's retries; empty
	// when the sender gives none. Scoped to the source by whoever stores it.
	DedupID string
	// Headers are the request headers the preset keeps (lower-case names), never a
	// signature or credential; nil when none.
	Headers map[string]string
	// Source is the producer's own name for where the event happened (a CloudEvent's
	// source attribute); empty for the other presets.
	Source string
}

// Limits bound one body's work.
type Limits struct {
	// MaxEvents is the most events one body may hold (the receiver's
	// max_objects_per_request); 0 or less means DefaultMaxEvents.
	MaxEvents int
}

// DefaultMaxEvents is the receiver's default max_objects_per_request.
const DefaultMaxEvents = 10000

// Error is a body a preset cannot read; Message is written for the sender.
type Error struct {
	Preset  string
	Message string
}

func (e *Error) Error() string { return e.Preset + ": " + e.Message }

// ErrUnknownPreset is returned, wrapped, for a preset name Valid refuses.
var ErrUnknownPreset = errors.New("unknown preset")

type splitter func(h http.Header, body []byte, lim limits) ([]Event, error)

var splitters = map[string]splitter{
	Alertmanager: func(h http.Header, b []byte, l limits) ([]Event, error) { return splitAlerts(Alertmanager, h, b, l) },
	Grafana:      func(h http.Header, b []byte, l limits) ([]Event, error) { return splitAlerts(Grafana, h, b, l) },
	GitHub:       splitGitHub,
	Stripe:       splitStripe,
	Sentry:       splitSentry,
	PagerDuty:    splitPagerDuty,
	CloudEvents:  splitCloudEvents,
}

// limits is Limits with the defaults filled and the output budget of one body.
type limits struct {
	maxEvents int
	maxBytes  int
}

// Split reads body, received with headers h, as the preset names it. The error is an
// *Error for a body the preset cannot read (answer it with 400), or wraps ErrUnknownPreset.
func Split(preset string, h http.Header, body []byte, lim Limits) ([]Event, error) {
	s, ok := splitters[preset]
	if !ok {
		return nil, fmt.Errorf("%w %q: use one of %s", ErrUnknownPreset, preset, strings.Join(Names(), ", "))
	}
	if h == nil {
		h = http.Header{}
	}
	l := limits{maxEvents: lim.MaxEvents}
	if l.maxEvents <= 0 {
		l.maxEvents = DefaultMaxEvents
	}
	// Payloads are slices of the body or small rewrites of them; the alert presets add the
	// group to every alert, which real notifications keep small (commonLabels is a subset
	// of each alert's labels).
	l.maxBytes = 4*len(body) + 64<<10
	evs, err := s(h, bytes.TrimSpace(body), l)
	if err != nil {
		return nil, err
	}
	webhookID := strings.TrimSpace(h.Get("Webhook-Id"))
	for i := range evs {
		if evs[i].Labels == nil {
			evs[i].Labels = map[string]string{}
		}
		switch {
		case evs[i].DedupID != "" || webhookID == "":
		case len(evs) == 1:
			evs[i].DedupID = dedupID(webhookID)
		default:
			// One delivery id for a body of many events: each event is its own part of it.
			evs[i].DedupID = dedupID(webhookID, strconv.Itoa(i))
		}
	}
	return evs, nil
}

func fail(preset, format string, args ...any) error {
	return &Error{Preset: preset, Message: fmt.Sprintf(format, args...)}
}

// decodeObject decodes body as one JSON object, numbers kept as sent.
func decodeObject(preset string, body []byte) (map[string]any, error) {
	if len(body) == 0 {
		return nil, fail(preset, "the body is empty; this URL takes the JSON the sender posts")
	}
	if body[0] != '{' {
		return nil, fail(preset, "the body is not a JSON object")
	}
	var m map[string]any
	if err := unmarshal(body, &m); err != nil {
		return nil, fail(preset, "the body is not valid JSON: %v", err)
	}
	return m, nil
}

func unmarshal(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(v); err != nil {
		return err
	}
	// Decode stops after the first value; anything but white space after it is an error.
	if len(bytes.TrimSpace(b[d.InputOffset():])) > 0 {
		return errors.New("data after the JSON value")
	}
	return nil
}

// get walks nested objects by key; nil when any step is missing or not an object.
func get(v any, path ...string) any {
	for _, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// str is the text of a scalar: strings as they are, numbers as sent, booleans as
// true/false; "" for null, objects and arrays.
func str(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case json.Number:
		return x.String()
	case bool:
		return strconv.FormatBool(x)
	}
	return ""
}

// labelValue is str, with objects and arrays as compact JSON (as the envelope's labels).
func labelValue(v any) string {
	switch v.(type) {
	case map[string]any, []any:
		b, err := json.Marshal(v)
		if err != nil {
			return ""
		}
		return string(b)
	}
	return str(v)
}

// stringMap is an object's members as labels; nil for a non-object.
func stringMap(v any) map[string]string {
	m, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, x := range m {
		out[k] = labelValue(x)
	}
	return out
}

// setLabel sets a label only when the value is not empty, so a trigger can tell a
// missing label from an empty one.
func setLabel(m map[string]string, k, v string) {
	if v != "" {
		m[k] = v
	}
}

// parseTime reads an RFC 3339 time or a unix time (a number or a string of digits:
// seconds, or milliseconds when above 1e11). Go's zero time ("0001-01-01T00:00:00Z", which
// Alertmanager writes for an alert that has not ended) is not a time.
func parseTime(v any) (time.Time, bool) {
	var t time.Time
	switch x := v.(type) {
	case string:
		s := strings.TrimSpace(x)
		if s != "" && strings.Trim(s, "0123456789") == "" {
			return parseTime(json.Number(s))
		}
		var err error
		for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999Z0700", "2006-01-02T15:04:05.999999999"} {
			if t, err = time.Parse(layout, s); err == nil {
				break
			}
		}
		if err != nil {
			return time.Time{}, false
		}
	case json.Number:
		n, err := x.Int64()
		if err != nil {
			f, ferr := x.Float64()
			if ferr != nil || f <= 0 || f >= 1e14 {
				return time.Time{}, false
			}
			if f >= 1e11 {
				f /= 1e3
			}
			t = time.Unix(0, int64(f*1e9))
			break
		}
		switch {
		case n <= 0 || n >= 1e14:
			return time.Time{}, false
		case n >= 1e11:
			t = time.UnixMilli(n)
		default:
			t = time.Unix(n, 0)
		}
	default:
		return time.Time{}, false
	}
	if t.Year() <= 1 {
		return time.Time{}, false
	}
	return t.UTC(), true
}

// firstTime is the first of vs that parses as a time.
func firstTime(vs ...any) time.Time {
	for _, v := range vs {
		if t, ok := parseTime(v); ok {
			return t
		}
	}
	return time.Time{}
}

// maxDedupID keeps a dedup id short enough for a NATS message id with the source's
// prefix in front of it.
const maxDedupID = 128

// dedupID joins parts into a delivery id, or the SHA-256 of them when the result would be
// long or hold bytes a NATS header cannot carry. "" when every part is empty.
func dedupID(parts ...string) string {
	empty := true
	for _, p := range parts {
		if p != "" {
			empty = false
		}
	}
	if empty {
		return ""
	}
	id := strings.Join(parts, "/")
	ok := len(id) <= maxDedupID && len(parts) == 1
	for i := 0; ok && i < len(id); i++ {
		ok = id[i] > ' ' && id[i] < 0x7f
	}
	if ok {
		return id
	}
	h := sha256.New()
	for _, p := range parts {
		// Length-prefixed, so ("a/b", "c") and ("a", "b/c") differ.
		fmt.Fprintf(h, "%d:%s", len(p), p)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// keepHeaders copies the allowed headers (lower-case names) that are present.
func keepHeaders(h http.Header, allowed ...string) map[string]string {
	var out map[string]string
	for _, name := range allowed {
		v := h.Get(name)
		if v == "" {
			continue
		}
		if len(v) > 1024 {
			v = v[:1024]
		}
		if out == nil {
			out = make(map[string]string, len(allowed))
		}
		out[strings.ToLower(name)] = v
	}
	return out
}

// sortedKeys returns m's keys in order, for output that does not depend on map order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// oneLine cuts s to its first line and at most 300 bytes (at a rune boundary), for text.
func oneLine(s string) string {
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		s = s[:i]
	}
	const max = 300
	if len(s) > max {
		cut := max
		for cut > 0 && !utf8RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "..."
	}
	return strings.TrimSpace(s)
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }
