package envelope

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/eventjson"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/sourcepreset"
)

var received = time.Date(2024, 5, 1, 9, 30, 0, 123456789, time.UTC)

var github = mirror.Source{
	ID:             "src_1",
	Name:           "github",
	Connector:      "webhook",
	EventTypeField: "action",
	TextTemplate:   "{repo.name}: {action}",
	EventTimeField: "created_at",
	Labels:         map[string]string{"repo": "repo.name", "stars": "repo.stars"},
}

const push = `{"action":"opened","created_at":"2024-04-30T22:15:03.5+02:00","repo":{"name":"acme/api","stars":12345678901234567890},"big":1.50}`

func decode(t *testing.T, b []byte) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(b, &m), "record %s", b)
	return m
}

func str(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var s string
	require.NoError(t, json.Unmarshal(raw, &s), "%s", raw)
	return s
}

func TestBuildEnvelope(t *testing.T) {
	res, err := Build(github, []byte("  "+push+"\n"), received)
	require.NoError(t, err)
	assert.Empty(t, res.Warnings)
	assert.Equal(t, "opened", res.EventType)
	rec := decode(t, res.Record)
	assert.Equal(t, "opened", str(t, rec["_event_type"]))
	assert.Equal(t, "github", str(t, rec["_source"]))
	assert.Equal(t, "2024-04-30T20:15:03.500000000Z", str(t, rec["timestamp"]))
	assert.Equal(t, "acme/api: opened", str(t, rec["text"]))
	assert.JSONEq(t, `{"repo":"acme/api","stars":"12345678901234567890"}`, string(rec["labels"]))
	// The payload is the object as sent, byte for byte (big numbers and 1.50 included).
	assert.Equal(t, push, string(rec["payload"]))
	assert.True(t, bytes.HasSuffix(res.Record, []byte(`"payload":`+push+`}`)))
	// Contract order of the envelope's fields.
	assert.True(t, bytes.HasPrefix(res.Record, []byte(`{"_event_type":"opened","_source":"github","timestamp":`)), "%s", res.Record)
}

func TestBuildFallbacksAndWarnings(t *testing.T) {
	res, err := Build(github, []byte(`{"repo":{}}`), received)
	require.NoError(t, err)
	rec := decode(t, res.Record)
	assert.Equal(t, DefaultEventType, res.EventType)
	assert.Equal(t, DefaultEventType, str(t, rec["_event_type"]))
	assert.Equal(t, "2024-05-01T09:30:00.123456789Z", str(t, rec["timestamp"]))
	assert.Equal(t, ": ", str(t, rec["text"]))
	assert.JSONEq(t, `{}`, string(rec["labels"]))
	assert.Equal(t, []string{
		`event_type_field "action" is not in the payload; the source's event type "webhook_event" is used`,
		`event_time_field "created_at" is not in the payload; the time received is used as the timestamp`,
		`text_template: field "repo.name" is not in the payload; it renders empty`,
		`text_template: field "action" is not in the payload; it renders empty`,
		`label "repo": field "repo.name" is not in the payload; the label is left out`,
		`label "stars": field "repo.stars" is not in the payload; the label is left out`,
	}, res.Warnings)

	src := github
	src.EventType = "gh"
	res, err = Build(src, []byte(`{"action":{"x":1},"created_at":"yesterday"}`), received)
	require.NoError(t, err)
	assert.Equal(t, "gh", res.EventType)
	assert.Contains(t, res.Warnings, `event_type_field "action" holds an object, not a string; the source's event type "gh" is used`)
	assert.Contains(t, res.Warnings, `event_time_field "created_at" holds "yesterday", which is neither an ISO 8601 time (e.g. 2024-05-01T12:00:00Z) nor a unix time; the time received is used as the timestamp`)

	res, err = Build(src, []byte(`{"action":""}`), received)
	require.NoError(t, err)
	assert.Equal(t, "gh", res.EventType)

	res, err = Build(src, []byte(`{"action":404}`), received)
	require.NoError(t, err)
	assert.Equal(t, "404", res.EventType)
}

func TestBuildPlainSource(t *testing.T) {
	res, err := Build(mirror.Source{Name: "n"}, []byte(`{"a":1}`), received)
	require.NoError(t, err)
	assert.Nil(t, res.Warnings)
	assert.Equal(t, `{"_event_type":"webhook_event","_source":"n","timestamp":"2024-05-01T09:30:00.123456789Z","text":"","labels":{},"payload":{"a":1}}`, string(res.Record))
}

func TestBuildLabelValues(t *testing.T) {
	src := mirror.Source{Name: "s", Labels: map[string]string{"obj": "o", "null": "n", "bool": "b", "idx": "arr.1", "quote": "q"}}
	res, err := Build(src, []byte(`{"o":{"k": [1, 2]},"n":null,"b":true,"arr":["x","y"],"q":"a\"b\u00e9"}`), received)
	require.NoError(t, err)
	assert.Empty(t, res.Warnings)
	assert.JSONEq(t, `{"obj":"{\"k\":[1,2]}","null":"","bool":"true","idx":"y","quote":"a\"bé"}`, string(decode(t, res.Record)["labels"]))
}

func TestBuildRefusesNonObjects(t *testing.T) {
	for body, syntax := range map[string]bool{`[{"a":1}]`: false, `"x"`: false, `{"a":`: true, ``: true, `{} {}`: true} {
		_, err := Build(github, []byte(body), received)
		var ee *eventjson.Error
		require.True(t, errors.As(err, &ee), "%q: %v", body, err)
		assert.Equal(t, syntax, ee.Syntax, "%q", body)
	}
}

func TestParseTime(t *testing.T) {
	want := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	for _, in := range []any{
		"2024-05-01T12:00:00Z", "2024-05-01T14:00:00+02:00", "2024-05-01T14:00:00+0200",
		"2024-05-01 12:00:00Z", "2024-05-01T12:00:00", "2024-05-01 12:00:00", "2024-05-01t12:00:00z",
		"2024-05-01T12:00Z", "2024-05-01T12:00:00.000Z",
		"20240501T120000Z", "20240501T120000.000Z", "20240501T130000+0100", "20240501T130000+01",
		"20240501T120000", "20240501t120000z", "20240501T060000-0600",
		json.Number("1714564800"), json.Number("1714564800000"), json.Number("1714564800000000"),
		json.Number("1714564800000000000"), "1714564800", json.Number("1714564800.0"), json.Number("1.7145648e9"),
	} {
		got, ok := ParseTime(in)
		if assert.True(t, ok, "%v", in) {
			assert.True(t, want.Equal(got), "%v: %v", in, got)
		}
	}
	got, ok := ParseTime("2024-05-01")
	assert.True(t, ok)
	assert.Equal(t, time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC), got)
	got, ok = ParseTime("20261121T100000.123Z")
	assert.True(t, ok)
	assert.Equal(t, time.Date(2026, 11, 21, 10, 0, 0, 123000000, time.UTC), got)
	got, ok = ParseTime(json.Number("1714564800.123"))
	assert.True(t, ok)
	assert.Equal(t, 123000000, got.Nanosecond())
	got, ok = ParseTime(json.Number("1714564800123456789"))
	assert.True(t, ok)
	assert.Equal(t, 123456789, got.Nanosecond())
	for _, in := range []any{"", "yesterday", "2024-13-01", "20241301T120000Z", "20240501T250000Z", "20240501T1200Z", json.Number("-1"), true, nil, map[string]any{}, json.Number("1e30")} {
		_, ok := ParseTime(in)
		assert.False(t, ok, "%v", in)
	}
}

// A source whose event_time_field is in ISO 8601's basic format gets that time as the
// record's timestamp, and no warning; it was "neither an ISO 8601 time" and the time
// received.
func TestBuildReadsBasicFormatEventTimes(t *testing.T) {
	src := mirror.Source{Name: "compact", EventTimeField: "at"}
	for in, want := range map[string]string{
		"20261121T100000Z":     "2026-11-21T10:00:00.000000000Z",
		"20261121T100000.123Z": "2026-11-21T10:00:00.123000000Z",
		"20261121T100000+0100": "2026-11-21T09:00:00.000000000Z",
	} {
		res, err := Build(src, []byte(`{"at":"`+in+`"}`), received)
		require.NoError(t, err)
		assert.Empty(t, res.Warnings, in)
		assert.Equal(t, want, str(t, decode(t, res.Record)["timestamp"]), in)
	}
}

// FuzzParseTime: any string parses or is refused without panicking, and any time written
// in the basic and the extended format reads back as the same instant.
func FuzzParseTime(f *testing.F) {
	for _, s := range []string{"20261121T100000Z", "20261121T100000.123Z", "20261121T100000+0100", "20261121T100000+01",
		"2024-05-01T12:00:00Z", "20261121", "20261121T", "20261121T1000", "T100000Z", "2026-11-21T100000Z"} {
		f.Add(s, int64(1795255200), uint32(123000000), int16(60))
	}
	f.Fuzz(func(t *testing.T, s string, sec int64, nsec uint32, offMin int16) {
		ParseTime(s)
		// Years 1 to 9999 and offsets within a day: what both formats can write.
		if sec < -62135596800 || sec > 253402300799-86400 || offMin <= -24*60 || offMin >= 24*60 {
			return
		}
		want := time.Unix(sec, int64(nsec%1e9)).UTC()
		if want.Year() < 1 || want.Year() > 9999 {
			return
		}
		at := want.In(time.FixedZone("", int(offMin)*60))
		for _, layout := range []string{"20060102T150405.999999999Z0700", time.RFC3339Nano} {
			in := at.Format(layout)
			got, ok := ParseTime(in)
			if !ok || !got.Equal(want) {
				t.Fatalf("%q: got %v, %v; want %v", in, got, ok, want)
			}
		}
	})
}

func FuzzBuild(f *testing.F) {
	for _, s := range []string{push, `{}`, `{"action":null}`, `{"created_at":1714564800.5}`, `{"repo":{"name":"20261121T100000.123Z"}}`, `{"repo":{"name":"20261121T100000+0100"}}`, `[1]`, `{"a":"\xff"}`, `{"repo":{"name":"\u2028"}}`} {
		f.Add([]byte(s), "{repo.name}: {action}", "repo.name")
	}
	f.Fuzz(func(t *testing.T, payload []byte, tpl, path string) {
		src := mirror.Source{Name: "s\"\n", EventTypeField: path, EventTimeField: path, TextTemplate: tpl, Labels: map[string]string{"l": path, "m": "action"}}
		res, err := Build(src, payload, received)
		if err != nil {
			var ee *eventjson.Error
			if !errors.As(err, &ee) {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		var rec struct {
			EventType string          `json:"_event_type"`
			Source    string          `json:"_source"`
			Timestamp string          `json:"timestamp"`
			Text      *string         `json:"text"`
			Labels    map[string]any  `json:"labels"`
			Payload   json.RawMessage `json:"payload"`
		}
		dec := json.NewDecoder(bytes.NewReader(res.Record))
		if err := dec.Decode(&rec); err != nil {
			t.Fatalf("record is not JSON: %v\n%s", err, res.Record)
		}
		if rec.EventType == "" || rec.EventType != res.EventType && strings.ToValidUTF8(res.EventType, "\ufffd") != rec.EventType {
			t.Fatalf("event type %q in the record, %q returned", rec.EventType, res.EventType)
		}
		if rec.Source != src.Name || rec.Text == nil || rec.Labels == nil {
			t.Fatalf("envelope fields missing: %s", res.Record)
		}
		if _, err := time.Parse(time.RFC3339Nano, rec.Timestamp); err != nil {
			t.Fatalf("timestamp %q: %v", rec.Timestamp, err)
		}
		if !bytes.Equal(rec.Payload, bytes.TrimSpace(payload)) {
			t.Fatalf("payload changed:\n%s\n%s", payload, rec.Payload)
		}
	})
}

// A preset's event fills the envelope; the record keeps the contract's shape, with the
// kept headers after the payload.
func TestBuildPresetFillsTheEnvelope(t *testing.T) {
	ev := sourcepreset.Event{
		Payload:   json.RawMessage(`{"status":"firing","labels":{"alertname":"Disk"},"group":{"groupKey":"g"}}`),
		EventType: "alert.firing",
		Time:      time.Date(2024, 4, 30, 8, 0, 0, 5, time.UTC),
		Text:      "Disk almost full",
		Labels:    map[string]string{"alertname": "Disk", "severity": "page"},
		DedupID:   "sha256:ab",
		Headers:   map[string]string{"user-agent": "Alertmanager/0.27.0", "a-first": "1"},
		Source:    "https://am.example",
	}
	plain := mirror.Source{ID: "src_2", Name: "alerts", Connector: "webhook"}
	res := BuildPreset(plain, ev, received)
	assert.Empty(t, res.Warnings)
	assert.Equal(t, "alert.firing", res.EventType)
	assert.Equal(t, `{"_event_type":"alert.firing","_source":"alerts","timestamp":"2024-04-30T08:00:00.000000005Z","text":"Disk almost full",`+
		`"labels":{"alertname":"Disk","severity":"page","source":"https://am.example"},"payload":`+string(ev.Payload)+
		`,"headers":{"a-first":"1","user-agent":"Alertmanager/0.27.0"}}`, string(res.Record))
	assert.NotContains(t, string(res.Record), "sha256:ab", "the dedup id is the message id, not part of the record")

	// Without a time or headers: the time received, and no headers member.
	ev.Time, ev.Headers, ev.Source = time.Time{}, nil, ""
	rec := decode(t, BuildPreset(plain, ev, received).Record)
	assert.Equal(t, "2024-05-01T09:30:00.123456789Z", str(t, rec["timestamp"]))
	assert.NotContains(t, rec, "headers")
	assert.JSONEq(t, `{"alertname":"Disk","severity":"page"}`, string(rec["labels"]))
}

// The source's own settings apply on top of the preset's where set.
func TestBuildPresetSourceSettingsApplyOnTop(t *testing.T) {
	ev := sourcepreset.Event{
		Payload:   json.RawMessage(`{"labels":{"alertname":"Disk","team":"db"},"startsAt":"2024-04-30T07:00:00Z","kind":"custom"}`),
		EventType: "alert.firing",
		Time:      time.Date(2024, 4, 30, 8, 0, 0, 0, time.UTC),
		Text:      "preset text",
		Labels:    map[string]string{"alertname": "Disk", "team": "db", "env": "prod"},
	}
	src := mirror.Source{Name: "alerts", EventTypeField: "kind", EventTimeField: "startsAt", TextTemplate: "{labels.alertname} for {labels.team}",
		Labels: map[string]string{"team": "labels.alertname", "env": "labels.env", "owner": "labels.team"}}
	res := BuildPreset(src, ev, received)
	rec := decode(t, res.Record)
	assert.Equal(t, "custom", str(t, rec["_event_type"]))
	assert.Equal(t, "2024-04-30T07:00:00.000000000Z", str(t, rec["timestamp"]))
	assert.Equal(t, "Disk for db", str(t, rec["text"]))
	assert.JSONEq(t, `{"alertname":"Disk","team":"Disk","env":"prod","owner":"db"}`, string(rec["labels"]),
		"declared labels override; a declared label whose field is missing keeps the preset's value")
	assert.Equal(t, []string{`label "env": field "labels.env" is not in the payload; the preset's value is kept`}, res.Warnings)

	// Fields the payload lacks fall back to the preset's type and time, not the source's.
	src = mirror.Source{Name: "alerts", EventType: "generic", EventTypeField: "nope", EventTimeField: "nope"}
	res = BuildPreset(src, ev, received)
	rec = decode(t, res.Record)
	assert.Equal(t, "alert.firing", str(t, rec["_event_type"]))
	assert.Equal(t, "2024-04-30T08:00:00.000000000Z", str(t, rec["timestamp"]))
	assert.Equal(t, "preset text", str(t, rec["text"]))
	assert.Equal(t, []string{
		`event_type_field "nope" is not in the payload; the sender's event type "alert.firing" is used`,
		`event_time_field "nope" is not in the payload; the sender's event time is used as the timestamp`,
	}, res.Warnings)
}

// An event from a real preset, end to end: Split, then BuildPreset, gives one record per
// alert, each a valid envelope.
func TestBuildPresetFromSplit(t *testing.T) {
	body := []byte(`{"groupKey":"{}:{}","status":"firing","commonLabels":{"team":"blue"},"alerts":[` +
		`{"status":"firing","labels":{"alertname":"A","team":"blue"},"startsAt":"2024-01-01T00:00:00Z","fingerprint":"f1"},` +
		`{"status":"resolved","labels":{"alertname":"B","team":"blue"},"startsAt":"2024-01-01T00:00:00Z","endsAt":"2024-01-01T01:00:00Z","fingerprint":"f2"}]}`)
	evs, err := sourcepreset.Split(sourcepreset.Alertmanager, nil, body, sourcepreset.Limits{})
	require.NoError(t, err)
	require.Len(t, evs, 2)
	src := mirror.Source{Name: "am"}
	var types, stamps []string
	for _, ev := range evs {
		rec := decode(t, BuildPreset(src, ev, received).Record)
		types = append(types, str(t, rec["_event_type"]))
		stamps = append(stamps, str(t, rec["timestamp"]))
		var p map[string]any
		require.NoError(t, json.Unmarshal(rec["payload"], &p))
		assert.Equal(t, map[string]any{"team": "blue"}, p["group"].(map[string]any)["commonLabels"])
	}
	assert.Equal(t, []string{"alert.firing", "alert.resolved"}, types)
	assert.Equal(t, []string{"2024-01-01T00:00:00.000000000Z", "2024-01-01T01:00:00.000000000Z"}, stamps)
}
