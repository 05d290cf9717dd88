package agentexporter

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

const tid = "4bf92f3577b34da6a3ce929d0e0e4736"

func TestRecordTraceID(t *testing.T) {
	for body, want := range map[string]string{
		`{"traceId":"` + tid + `"}`: tid,
		` { "a" : [1, {"traceId": "x"}, "]}"], "b": "\"traceId\"", "traceId" : "` + tid + `" } `: tid,
		`{"attributes": {"traceId": "` + tid + `"}}`:                                             "",
		`{"traceId": ""}`: "",
		`{"traceId": "` + strings.Repeat("0", 32) + `"}`: "",
		`{"traceId": "` + strings.ToUpper(tid) + `"}`:    "",
		`{"traceId": "` + tid[:31] + `"}`:                "",
		`{"traceId": 12}`:                                "",
		`{"name": "traceId", "traceId": "` + tid + `"}`:  tid,
		`["traceId", "` + tid + `"]`:                     "",
		`{"traceId" "` + tid + `"}`:                      "",
		`{"a": "unterminated, "traceId": "` + tid + `"}`: "",
		`{"a": 1 "traceId": "` + tid + `"}`:              "",
	} {
		assert.Equal(t, want, recordTraceID([]byte(body), false), body)
	}
	assert.Equal(t, tid, recordTraceID([]byte(`{"trigger": {"n": 1, "traceId": "`+tid+`"}, "window": []}`), true))
	assert.Equal(t, "", recordTraceID([]byte(`{"window": [{"traceId": "`+tid+`"}], "trigger": {}}`), true), "a window record's trace is not the trigger's")
}

func TestTraceparentShape(t *testing.T) {
	id := newTraceID()
	assert.Regexp(t, `^[0-9a-f]{32}$`, id)
	assert.NotEqual(t, id, newTraceID())
	assert.Regexp(t, `^00-`+id+`-[0-9a-f]{16}-01$`, traceparent(id))
}

// reference decodes the top level with encoding/json, as the scanner must agree.
func reference(body []byte) (string, bool) {
	var top map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&top); err != nil {
		return "", false
	}
	var s string
	if json.Unmarshal(top["traceId"], &s) != nil {
		return "", true
	}
	if len(s) != 32 || strings.Trim(s, "0123456789abcdef") != "" || s == strings.Repeat("0", 32) {
		return "", true
	}
	return s, true
}

// Records are outside input: the scanner never panics, and on a valid object it finds
// what a JSON decoder finds (keys written plainly, as every producer of records does).
func FuzzRecordTraceID(f *testing.F) {
	f.Add([]byte(`{"traceId":"` + tid + `"}`))
	f.Add([]byte(`{"a":{"traceId":"x"},"traceId":"` + tid + `","b":[1,"]"]}`))
	f.Add([]byte(`{"a":"\\","traceId":"` + tid + `"}`))
	f.Add([]byte(`{"trigger":{"traceId":"` + tid + `"},"window":[]}`))
	f.Add([]byte(`{"traceId`))
	f.Fuzz(func(t *testing.T, body []byte) {
		got := recordTraceID(body, false)
		_ = recordTraceID(body, true)
		want, valid := reference(body)
		if !valid || !json.Valid(body) || bytes.Contains(body, []byte(`\u`)) || duplicateKeys(body) {
			return
		}
		if got != want {
			t.Fatalf("%q: got %q, want %q", body, got, want)
		}
	})
}

// duplicateKeys: encoding/json keeps the last of a repeated key, the scanner the first;
// records never repeat one.
func duplicateKeys(body []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return false
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		k, _ := tok.(string)
		if seen[k] {
			return true
		}
		seen[k] = true
		var v json.RawMessage
		if dec.Decode(&v) != nil {
			return false
		}
	}
	return false
}

// BenchmarkRecordTraceID compares the scanner with a json.Decoder walk of the top level
// on a log record whose trace id comes after its attributes (in the order of docs/contract.md#section-4).
func BenchmarkRecordTraceID(b *testing.B) {
	attrs := strings.Repeat(`"k":"`+strings.Repeat("v", 40)+`",`, 20)
	body := []byte(`{"resourceAttributes":{` + attrs + `"service.name":"checkout"},"scope":{"name":"x"},"severityNumber":9,` +
		`"severityText":"INFO","body":"payment failed","attributes":{` + attrs + `"traceId":"not this one"},"traceId":"` + tid +
		`","spanId":"00f067aa0ba902b7","timestamp":"2026-11-23T10:00:00.000000000Z"}`)
	noTrace := []byte(`{"_event_type":"payment.failed","amount":42,"customer":{"id":"c_1"}}`)
	b.Run("scanner", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if recordTraceID(body, false) != tid {
				b.Fatal("miss")
			}
		}
	})
	b.Run("scanner-no-key", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = recordTraceID(noTrace, false)
		}
	})
	b.Run("json-decoder", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			dec := json.NewDecoder(bytes.NewReader(body))
			_, _ = dec.Token()
			for dec.More() {
				tok, _ := dec.Token()
				var v json.RawMessage
				_ = dec.Decode(&v)
				if tok == "traceId" {
					break
				}
			}
		}
	})
}
