package deliverylog

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

// stdJSON is the delivery as encoding/json encodes it, which the console and every
// reader of the log decode.
func stdJSON(t testing.TB, d *Delivery) ([]byte, error) {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	if err := enc.Encode(d); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

func requireSameJSON(t testing.TB, d *Delivery) {
	t.Helper()
	want, werr := stdJSON(t, d)
	got, gerr := appendDelivery(nil, d)
	if (werr != nil) != (gerr != nil) {
		t.Fatalf("encoding/json error %v, appendDelivery error %v", werr, gerr)
	}
	if werr == nil && !bytes.Equal(got, want) {
		t.Fatalf("appendDelivery wrote\n%s\nencoding/json\n%s", got, want)
	}
}

// The log's messages are what encoding/json made of a delivery before, byte for byte:
// every field, empty and set, escapes, times in other zones and the ones it refuses.
func TestAppendDeliveryIsEncodingJSON(t *testing.T) {
	now := time.Date(2026, 11, 27, 3, 4, 5, 123456789, time.UTC)
	full := &Delivery{ID: "snk_1", Kind: KindSink, SinkID: "s_0", RequestID: "req_<1>&\"x\"", State: StateDeadLettered,
		Attempts: 3, StatusCode: 503, Error: "line\nbreak\ttab\x01\u2028\xff", LatencyMS: 12, Records: 2,
		CreatedAt: now, UpdatedAt: now.In(time.FixedZone("", 5*3600+30*60)), ReplayOf: "snk_0", ReplayedBy: "snk_2",
		SinkKind: "webhook", Seqs: []uint64{3, 1, 2}, SourceSeq: 9, DeadLetterSeq: 10, Unmatched: true, TraceID: "abc",
		NextAttemptAt: now.Add(time.Second),
		AttemptLog: []Attempt{
			{At: now, StatusCode: 503, Error: "busy", LatencyMS: 3, RequestHeaders: map[string]string{
				"Webhook-Signature": Redacted, "Content-Type": "application/json", "X-Odd": "<&>\u2029"}},
			{At: now.Local(), StatusCode: 0, Error: ""},
		},
		RequestBody: []byte(`{"a":1}`), RequestTruncated: true, Answer: []byte{0, 1, 2, 0xff}, AnswerTruncated: true}
	for name, d := range map[string]*Delivery{
		"empty":           {},
		"full":            full,
		"usual":           {ID: "d", Kind: KindAgent, State: StateDelivered, Attempts: 1, StatusCode: 200, CreatedAt: now, UpdatedAt: now},
		"year past 9999":  {ID: "d", CreatedAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},
		"offset seconds":  {ID: "d", CreatedAt: now.In(time.FixedZone("", 3601))},
		"offset of a day": {ID: "d", AttemptLog: []Attempt{{At: now.In(time.FixedZone("", 24*3600))}}},
		"empty slices":    {ID: "d", Seqs: []uint64{}, AttemptLog: []Attempt{}, RequestBody: []byte{}, Answer: []byte{}},
	} {
		t.Run(name, func(t *testing.T) { requireSameJSON(t, d) })
	}
}

func FuzzAppendDelivery(f *testing.F) {
	f.Add("snk_1", "req_<1>", "err\n\xff\u2028", "X-Api-Key", "v&", []byte("body"), int64(1764212645), int64(123), 3600, uint64(7), true)
	f.Add("", "", "", "", "", []byte(nil), int64(-62135596800), int64(0), 0, uint64(0), false)
	f.Fuzz(func(t *testing.T, id, req, errText, hk, hv string, body []byte, sec, nsec int64, off int, seq uint64, flag bool) {
		at := time.Unix(sec, nsec).In(time.FixedZone("", off%(48*3600)))
		d := &Delivery{ID: id, Kind: KindSink, SinkID: hk, RequestID: req, State: hv, Attempts: off, StatusCode: int(seq % 600),
			Error: errText, LatencyMS: nsec, Records: 1, CreatedAt: at, UpdatedAt: at.UTC(), ReplayOf: req, SinkKind: hv,
			SourceSeq: seq, Unmatched: flag, TraceID: errText, RequestBody: body, RequestTruncated: flag, Answer: []byte(errText)}
		if flag {
			d.NextAttemptAt = at
			d.Seqs = []uint64{seq, seq / 2}
			d.AttemptLog = []Attempt{{At: at, Error: errText, RequestHeaders: map[string]string{hk: hv, hv: hk, "Content-Type": errText}}}
		}
		requireSameJSON(t, d)
	})
}

func BenchmarkAppendDelivery(b *testing.B) {
	now := time.Now().UTC()
	d := &Delivery{ID: "snk_0123456789abcdef0123456789abcdef", Kind: KindSink, SinkID: "s_0", SinkKind: "webhook",
		RequestID: "req_12345", State: StateDelivered, Attempts: 1, StatusCode: 200, LatencyMS: 1, Records: 1,
		CreatedAt: now, UpdatedAt: now, SourceSeq: 12345,
		AttemptLog: []Attempt{{At: now, StatusCode: 200, LatencyMS: 1, RequestHeaders: map[string]string{
			"Content-Type": "application/json", "Content-Length": "80", "User-Agent": "otelcol-svc/0.1.0", "X-Request-Id": "req_12345",
			"Webhook-Id": "msg_abc", "Webhook-Timestamp": "1700000000", "Webhook-Signature": Redacted}}},
		RequestBody: []byte(`{"i":12345,"text":"result 12345 of the benchmark","severity":"error"}`)}
	b.Run("encoding-json", func(b *testing.B) {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		b.ReportAllocs()
		for b.Loop() {
			buf.Reset()
			_ = enc.Encode(d)
		}
	})
	b.Run("appendDelivery", func(b *testing.B) {
		var buf []byte
		b.ReportAllocs()
		for b.Loop() {
			buf, _ = appendDelivery(buf[:0], d)
		}
	})
}
