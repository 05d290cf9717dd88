package records

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"os"
	"reflect"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// decode parses one record with UseNumber so that integer precision and the
// int/float distinction can be checked exactly.
func decode(t testing.TB, rec []byte) map[string]any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(rec))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("invalid JSON %s: %v", rec, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		t.Fatalf("trailing data after record %s", rec)
	}
	return m
}

// topKeys returns the record's top-level keys in order.
func topKeys(t testing.TB, rec []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(rec))
	if _, err := dec.Token(); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

func collect(t testing.TB, flatten func(func([]byte) error) error) [][]byte {
	t.Helper()
	var recs [][]byte
	if err := flatten(func(rec []byte) error {
		recs = append(recs, rec)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return recs
}

func flattenLogs(t testing.TB, ld plog.Logs, received time.Time) [][]byte {
	t.Helper()
	recs := collect(t, func(emit func([]byte) error) error { return FlattenLogs(ld, received, emit) })
	if len(recs) != CountLogs(ld) {
		t.Fatalf("emitted %d records, CountLogs says %d", len(recs), CountLogs(ld))
	}
	return recs
}

func expectEqual(t testing.TB, field string, got, want any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s = %#v (%T), want %#v (%T)", field, got, got, want, want)
	}
}

var (
	ts1      = pcommon.Timestamp(1714564800123456789) // 2024-05-01T12:00:00.123456789Z
	ts1Str   = "2024-05-01T12:00:00.123456789Z"
	ts2      = pcommon.Timestamp(1714564801000000000)
	ts2Str   = "2024-05-01T12:00:01.000000000Z"
	recvd    = time.Date(2024, 5, 1, 14, 0, 0, 5, time.FixedZone("CEST", 2*3600))
	recvStr  = "2024-05-01T12:00:00.000000005Z"
	traceID  = pcommon.TraceID{0x5b, 0x8e, 0xff, 0xf7, 0x98, 0x03, 0x81, 0x03, 0xd2, 0x69, 0xb6, 0x33, 0x81, 0x3f, 0xc6, 0x0c}
	spanID   = pcommon.SpanID{0xee, 0xe1, 0x9b, 0x7e, 0xc3, 0xc1, 0xb1, 0x74}
	parentID = pcommon.SpanID{0, 0, 0, 0, 0, 0, 0, 1}
)

func newLogs(scopeVersion string) (plog.Logs, plog.LogRecord) {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("service.name", "checkout")
	rl.Resource().Attributes().PutInt("big", math.MaxInt64)
	sl := rl.ScopeLogs().AppendEmpty()
	sl.Scope().SetName("checkout.logger")
	sl.Scope().SetVersion(scopeVersion)
	return ld, sl.LogRecords().AppendEmpty()
}

func TestFlattenLogsShape(t *testing.T) {
	ld, lr := newLogs("1.4.0")
	lr.SetTimestamp(ts1)
	lr.SetSeverityNumber(plog.SeverityNumberError)
	lr.SetSeverityText("ERROR")
	lr.Body().SetStr("payment failed")
	lr.Attributes().PutStr("order.id", "A-1001")
	lr.Attributes().PutInt("min", math.MinInt64)
	lr.Attributes().PutDouble("ratio", 0.1)
	lr.Attributes().PutBool("retry", true)
	lr.Attributes().PutEmptyBytes("raw").FromRaw([]byte("hello"))
	lr.Attributes().PutEmpty("nothing")
	lr.SetTraceID(traceID)
	lr.SetSpanID(spanID)

	recs := flattenLogs(t, ld, recvd)
	wantKeys := []string{"resourceAttributes", "scope", "severityNumber", "severityText", "body", "attributes", "traceId", "spanId", "timestamp", "eventName"}
	expectEqual(t, "keys", topKeys(t, recs[0]), wantKeys)
	m := decode(t, recs[0])
	expectEqual(t, "resourceAttributes", m["resourceAttributes"], map[string]any{
		"service.name": "checkout", "big": json.Number("9223372036854775807"),
	})
	expectEqual(t, "scope", m["scope"], map[string]any{"name": "checkout.logger", "version": "1.4.0"})
	expectEqual(t, "severityNumber", m["severityNumber"], json.Number("17"))
	expectEqual(t, "severityText", m["severityText"], "ERROR")
	expectEqual(t, "body", m["body"], "payment failed")
	expectEqual(t, "attributes", m["attributes"], map[string]any{
		"order.id": "A-1001",
		"min":      json.Number("-9223372036854775808"),
		"ratio":    json.Number("0.1"),
		"retry":    true,
		"raw":      "aGVsbG8=",
		"nothing":  nil,
	})
	expectEqual(t, "traceId", m["traceId"], "5b8efff798038103d269b633813fc60c")
	expectEqual(t, "spanId", m["spanId"], "eee19b7ec3c1b174")
	expectEqual(t, "timestamp", m["timestamp"], ts1Str)
	expectEqual(t, "eventName", m["eventName"], "")
}

// TestFlattenLogsEventName: an OTLP event (a log record with an event name) keeps
// its name, so a trigger can tell "app.login" events from plain log lines.
func TestFlattenLogsEventName(t *testing.T) {
	ld, lr := newLogs("")
	lr.SetEventName("app.login")
	ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().AppendEmpty()
	recs := flattenLogs(t, ld, recvd)
	expectEqual(t, "eventName", decode(t, recs[0])["eventName"], "app.login")
	expectEqual(t, "eventName of a plain log", decode(t, recs[1])["eventName"], "")
}

func TestFlattenLogsEmptyRecord(t *testing.T) {
	ld, _ := newLogs("")
	m := decode(t, flattenLogs(t, ld, recvd)[0])
	if len(m) != 10 {
		t.Fatalf("got %d keys, want 10: %v", len(m), m)
	}
	expectEqual(t, "scope", m["scope"], map[string]any{"name": "checkout.logger"})
	expectEqual(t, "severityNumber", m["severityNumber"], json.Number("0"))
	expectEqual(t, "severityText", m["severityText"], "")
	expectEqual(t, "body", m["body"], "")
	expectEqual(t, "attributes", m["attributes"], map[string]any{})
	expectEqual(t, "traceId", m["traceId"], "")
	expectEqual(t, "spanId", m["spanId"], "")
	expectEqual(t, "timestamp", m["timestamp"], recvStr)
	expectEqual(t, "eventName", m["eventName"], "")
}

func TestFlattenLogsTimestampFallback(t *testing.T) {
	tests := []struct {
		name           string
		time, observed pcommon.Timestamp
		want           string
	}{
		{"time wins", ts1, ts2, ts1Str},
		{"time only", ts1, 0, ts1Str},
		{"observed", 0, ts2, ts2Str},
		{"received", 0, 0, recvStr},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ld, lr := newLogs("")
			lr.SetTimestamp(tt.time)
			lr.SetObservedTimestamp(tt.observed)
			expectEqual(t, "timestamp", decode(t, flattenLogs(t, ld, recvd)[0])["timestamp"], tt.want)
		})
	}
}

func TestFlattenLogsBody(t *testing.T) {
	tests := []struct {
		name string
		set  func(v pcommon.Value)
		want string
	}{
		{"empty", func(v pcommon.Value) {}, ""},
		{"string", func(v pcommon.Value) { v.SetStr(`say "hi"` + "\n") }, "say \"hi\"\n"},
		{"int", func(v pcommon.Value) { v.SetInt(math.MaxInt64) }, "9223372036854775807"},
		{"double", func(v pcommon.Value) { v.SetDouble(1.5) }, "1.5"},
		{"nan", func(v pcommon.Value) { v.SetDouble(math.NaN()) }, `"NaN"`},
		{"bool", func(v pcommon.Value) { v.SetBool(false) }, "false"},
		{"bytes", func(v pcommon.Value) { v.SetEmptyBytes().FromRaw([]byte{0, 1, 2}) }, "AAEC"},
		{"map", func(v pcommon.Value) {
			m := v.SetEmptyMap()
			m.PutInt("a", 1)
			m.PutStr("b", "x\"y")
		}, `{"a":1,"b":"x\"y"}`},
		{"slice", func(v pcommon.Value) {
			s := v.SetEmptySlice()
			s.AppendEmpty().SetInt(1)
			s.AppendEmpty().SetStr("two")
			s.AppendEmpty()
		}, `[1,"two",null]`},
		{"invalid utf8 in map", func(v pcommon.Value) { v.SetEmptyMap().PutStr("k", "a\xffb") }, `{"k":"a\ufffdb"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ld, lr := newLogs("")
			tt.set(lr.Body())
			expectEqual(t, "body", decode(t, flattenLogs(t, ld, recvd)[0])["body"], tt.want)
		})
	}
}

func TestAppendValue(t *testing.T) {
	tests := []struct {
		name string
		set  func(v pcommon.Value)
		want string
	}{
		{"empty", func(v pcommon.Value) {}, `null`},
		{"str", func(v pcommon.Value) { v.SetStr("<a&b>") }, `"<a&b>"`},
		{"max int", func(v pcommon.Value) { v.SetInt(math.MaxInt64) }, `9223372036854775807`},
		{"min int", func(v pcommon.Value) { v.SetInt(math.MinInt64) }, `-9223372036854775808`},
		{"double", func(v pcommon.Value) { v.SetDouble(0.1) }, `0.1`},
		{"double integral", func(v pcommon.Value) { v.SetDouble(1e6) }, `1000000`},
		{"double large", func(v pcommon.Value) { v.SetDouble(1e21) }, `1e+21`},
		{"double small", func(v pcommon.Value) { v.SetDouble(1e-7) }, `1e-7`},
		{"double max", func(v pcommon.Value) { v.SetDouble(math.MaxFloat64) }, `1.7976931348623157e+308`},
		{"negative zero", func(v pcommon.Value) { v.SetDouble(math.Copysign(0, -1)) }, `-0`},
		{"nan", func(v pcommon.Value) { v.SetDouble(math.NaN()) }, `"NaN"`},
		{"inf", func(v pcommon.Value) { v.SetDouble(math.Inf(1)) }, `"Infinity"`},
		{"-inf", func(v pcommon.Value) { v.SetDouble(math.Inf(-1)) }, `"-Infinity"`},
		{"bool", func(v pcommon.Value) { v.SetBool(true) }, `true`},
		{"bytes", func(v pcommon.Value) { v.SetEmptyBytes().FromRaw([]byte("\xff\xfe")) }, `"//4="`},
		{"empty bytes", func(v pcommon.Value) { v.SetEmptyBytes() }, `""`},
		{"empty map", func(v pcommon.Value) { v.SetEmptyMap() }, `{}`},
		{"empty slice", func(v pcommon.Value) { v.SetEmptySlice() }, `[]`},
		{"nested in order", func(v pcommon.Value) {
			m := v.SetEmptyMap()
			m.PutStr("z", "last-key-first")
			m.PutEmptySlice("a").AppendEmpty().SetEmptyMap().PutDouble("n", math.Inf(-1))
		}, `{"z":"last-key-first","a":[{"n":"-Infinity"}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := pcommon.NewValueEmpty()
			tt.set(v)
			got := AppendValue([]byte("prefix:"), v)
			expectEqual(t, "AppendValue", string(got), "prefix:"+tt.want)
			if !json.Valid(got[len("prefix:"):]) {
				t.Errorf("invalid JSON %s", got)
			}
		})
	}
}

func TestAppendFloatRoundTrips(t *testing.T) {
	for _, f := range []float64{0, 1, -1, 0.1, 1.0 / 3, 123456789.125, 1e-6, 9.99e-7, 1e20, 1e21, 5e-324, math.MaxFloat64, -math.SmallestNonzeroFloat64} {
		out := appendFloat(nil, f)
		var back float64
		if err := json.Unmarshal(out, &back); err != nil || back != f {
			t.Errorf("%v: %s decoded to %v, %v", f, out, back, err)
		}
		want, _ := json.Marshal(f)
		expectEqual(t, "matches encoding/json", string(out), string(want))
	}
}

func TestAppendString(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", `""`},
		{"plain", `"plain"`},
		{`q"b\`, `"q\"b\\"`},
		{"\n\r\t\x00\x1f\x7f", `"\n\r\t\u0000\u001f` + "\x7f" + `"`},
		{"<html>&", `"<html>&"`},
		{"héllo 世界 🎉", `"héllo 世界 🎉"`},
		{"bad\xffbyte", `"bad\ufffdbyte"`},
		{"\xe2\x82", `"\ufffd\ufffd"`},           // truncated sequence: one U+FFFD per byte, as encoding/json
		{"\xed\xa0\x80", `"\ufffd\ufffd\ufffd"`}, // UTF-16 surrogate encoded in UTF-8
		{"\u2028\u2029", `"\u2028\u2029"`},
	}
	for _, tt := range tests {
		got := string(appendString(nil, tt.in))
		expectEqual(t, "appendString("+tt.in+")", got, tt.want)
		var back string
		if err := json.Unmarshal([]byte(got), &back); err != nil {
			t.Errorf("%q: %v", got, err)
		}
	}
}

func TestAppendTimestamp(t *testing.T) {
	tests := []struct {
		in   time.Time
		want string
	}{
		{time.Unix(0, 0), `"1970-01-01T00:00:00.000000000Z"`},
		{ts1.AsTime(), `"` + ts1Str + `"`},
		{recvd, `"` + recvStr + `"`},
		{time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC), `"9999-12-31T23:59:59.999999999Z"`},
		{time.Date(12345, 1, 2, 3, 4, 5, 6, time.UTC), `"12345-01-02T03:04:05.000000006Z"`},
	}
	for _, tt := range tests {
		expectEqual(t, "AppendTimestamp", string(AppendTimestamp(nil, tt.in)), tt.want)
	}
}

func TestEmitOwnsSliceAndErrorStops(t *testing.T) {
	ld, lr := newLogs("")
	lr.Body().SetStr("first")
	ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().AppendEmpty().Body().SetStr("second")
	ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().AppendEmpty().Body().SetStr("third")

	recs := flattenLogs(t, ld, recvd)
	for i, want := range []string{"first", "second", "third"} {
		expectEqual(t, "body", decode(t, recs[i])["body"], want)
	}

	stop := errors.New("stop")
	calls := 0
	err := FlattenLogs(ld, recvd, func([]byte) error { calls++; return stop })
	if !errors.Is(err, stop) || calls != 1 {
		t.Fatalf("err=%v calls=%d, want stop after 1 call", err, calls)
	}
}

func TestFlattenLogsTestdata(t *testing.T) {
	raw, err := os.ReadFile("testdata/logs.json")
	if err != nil {
		t.Fatal(err)
	}
	req := plogotlp.NewExportRequest()
	if err := req.UnmarshalJSON(raw); err != nil {
		t.Fatal(err)
	}
	recs := flattenLogs(t, req.Logs(), recvd)
	if len(recs) != 3 {
		t.Fatalf("got %d records, want 3", len(recs))
	}
	res := map[string]any{"service.name": "checkout", "host.pid": json.Number("9007199254740993")}
	scope := map[string]any{"name": "checkout.logger", "version": "1.4.0"}
	want := []map[string]any{
		{
			"resourceAttributes": res, "scope": scope,
			"severityNumber": json.Number("17"), "severityText": "ERROR",
			"body":       "payment failed: card declined",
			"attributes": map[string]any{"order.id": "A-1001", "retry": true},
			"traceId":    "5b8efff798038103d269b633813fc60c", "spanId": "eee19b7ec3c1b174",
			"timestamp": ts1Str, "eventName": "",
		},
		{
			"resourceAttributes": res, "scope": scope,
			"severityNumber": json.Number("9"), "severityText": "INFO",
			"body":       `{"event":"login","ms":12.5}`,
			"attributes": map[string]any{"user.id": json.Number("42")},
			"traceId":    "", "spanId": "",
			"timestamp": ts2Str, "eventName": "",
		},
		{
			"resourceAttributes": res, "scope": scope,
			"severityNumber": json.Number("5"), "severityText": "DEBUG",
			"body":       "7",
			"attributes": map[string]any{},
			"traceId":    "", "spanId": "",
			"timestamp": recvStr, "eventName": "",
		},
	}
	for i := range want {
		expectEqual(t, "record", decode(t, recs[i]), want[i])
	}
}

func TestFlattenTraces(t *testing.T) {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "checkout")
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("http")
	s := ss.Spans().AppendEmpty()
	s.SetTraceID(traceID)
	s.SetSpanID(spanID)
	s.SetParentSpanID(parentID)
	s.SetName("GET /cart")
	s.SetKind(ptrace.SpanKindServer)
	s.SetStartTimestamp(ts1)
	s.SetEndTimestamp(ts1 + 1_500_000) // 1.5 ms
	s.Status().SetCode(ptrace.StatusCodeError)
	s.Status().SetMessage("boom")
	s.Attributes().PutInt("http.status_code", 500)
	ev := s.Events().AppendEmpty()
	ev.SetName("exception")
	ev.SetTimestamp(ts2)
	ev.Attributes().PutStr("exception.type", "Timeout")
	s.TraceState().FromRaw("vendor=a1")
	link := s.Links().AppendEmpty()
	link.SetTraceID(pcommon.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
	link.SetSpanID(parentID)
	link.TraceState().FromRaw("vendor=b2")
	link.Attributes().PutStr("link.kind", "follows_from")
	s.Links().AppendEmpty() // a link with nothing set
	bare := ss.Spans().AppendEmpty()
	bare.SetKind(ptrace.SpanKind(42))
	bare.Status().SetCode(ptrace.StatusCode(9))

	recs := collect(t, func(emit func([]byte) error) error { return FlattenTraces(td, emit) })
	if len(recs) != 2 || CountSpans(td) != 2 {
		t.Fatalf("got %d records, CountSpans %d, want 2", len(recs), CountSpans(td))
	}
	expectEqual(t, "keys", topKeys(t, recs[0]), []string{
		"resourceAttributes", "scope", "traceId", "spanId", "parentSpanId", "name", "kind",
		"startTime", "endTime", "durationMs", "status", "attributes", "events",
		"traceState", "links", "timestamp",
	})
	expectEqual(t, "span", decode(t, recs[0]), map[string]any{
		"resourceAttributes": map[string]any{"service.name": "checkout"},
		"scope":              map[string]any{"name": "http"},
		"traceId":            "5b8efff798038103d269b633813fc60c",
		"spanId":             "eee19b7ec3c1b174",
		"parentSpanId":       "0000000000000001",
		"name":               "GET /cart",
		"kind":               "server",
		"startTime":          ts1Str,
		"endTime":            "2024-05-01T12:00:00.124956789Z",
		"durationMs":         json.Number("1.5"),
		"status":             map[string]any{"code": "error", "message": "boom"},
		"attributes":         map[string]any{"http.status_code": json.Number("500")},
		"events": []any{map[string]any{
			"name": "exception", "timestamp": ts2Str,
			"attributes": map[string]any{"exception.type": "Timeout"},
		}},
		"traceState": "vendor=a1",
		"links": []any{
			map[string]any{
				"traceId": "0102030405060708090a0b0c0d0e0f10", "spanId": "0000000000000001",
				"traceState": "vendor=b2", "attributes": map[string]any{"link.kind": "follows_from"},
			},
			map[string]any{"traceId": "", "spanId": "", "traceState": "", "attributes": map[string]any{}},
		},
		"timestamp": ts1Str,
	})
	m := decode(t, recs[1])
	expectEqual(t, "parentSpanId", m["parentSpanId"], "")
	expectEqual(t, "kind", m["kind"], "unspecified")
	expectEqual(t, "status", m["status"], map[string]any{"code": "unset", "message": ""})
	expectEqual(t, "events", m["events"], []any{})
	expectEqual(t, "startTime", m["startTime"], "1970-01-01T00:00:00.000000000Z")
	expectEqual(t, "durationMs", m["durationMs"], json.Number("0"))
	expectEqual(t, "traceState", m["traceState"], "")
	expectEqual(t, "links", m["links"], []any{})
	expectEqual(t, "timestamp", m["timestamp"], "1970-01-01T00:00:00.000000000Z")
}

func TestSpanKinds(t *testing.T) {
	for kind, want := range map[ptrace.SpanKind]string{
		ptrace.SpanKindUnspecified: "unspecified", ptrace.SpanKindInternal: "internal",
		ptrace.SpanKindServer: "server", ptrace.SpanKindClient: "client",
		ptrace.SpanKindProducer: "producer", ptrace.SpanKindConsumer: "consumer",
		ptrace.SpanKind(-1): "unspecified",
	} {
		expectEqual(t, "kind", enumName(spanKinds[:], kind), want)
	}
}

func TestFlattenMetrics(t *testing.T) {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", "checkout")
	sm := rm.ScopeMetrics().AppendEmpty()
	sm.Scope().SetName("meter")
	sm.Scope().SetVersion("2")
	scope := map[string]any{"name": "meter", "version": "2"}

	g := sm.Metrics().AppendEmpty()
	g.SetName("queue.depth")
	g.SetDescription("items waiting")
	g.SetUnit("{item}")
	gdps := g.SetEmptyGauge().DataPoints()
	gi := gdps.AppendEmpty()
	gi.SetIntValue(math.MaxInt64)
	gi.SetTimestamp(ts1)
	gi.Attributes().PutStr("queue", "a")
	gd := gdps.AppendEmpty()
	gd.SetDoubleValue(math.NaN())
	gd.SetTimestamp(ts1)
	gd.SetStartTimestamp(ts2)
	gx := gi.Exemplars().AppendEmpty()
	gx.SetTimestamp(ts2)
	gx.SetIntValue(7)
	gx.SetTraceID(traceID)
	gx.SetSpanID(spanID)
	gx.FilteredAttributes().PutStr("host", "h1")

	s := sm.Metrics().AppendEmpty()
	s.SetName("requests")
	sum := s.SetEmptySum()
	sum.SetIsMonotonic(true)
	sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	sdp := sum.DataPoints().AppendEmpty()
	sdp.SetDoubleValue(2.5)
	sdp.SetTimestamp(ts2)
	sdp.SetStartTimestamp(ts1)

	h := sm.Metrics().AppendEmpty()
	h.SetName("latency")
	h.SetUnit("ms")
	hist := h.SetEmptyHistogram()
	hist.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
	hdp := hist.DataPoints().AppendEmpty()
	hdp.SetCount(6)
	hdp.SetSum(12.5)
	hdp.SetMin(0.5)
	hdp.SetMax(math.Inf(1))
	hdp.BucketCounts().FromRaw([]uint64{1, 2, 3})
	hdp.ExplicitBounds().FromRaw([]float64{1, 2.5})
	hdp.Exemplars().AppendEmpty().SetDoubleValue(0.75)
	hist.DataPoints().AppendEmpty() // no sum/min/max

	e := sm.Metrics().AppendEmpty()
	e.SetName("size")
	eh := e.SetEmptyExponentialHistogram()
	eh.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	edp := eh.DataPoints().AppendEmpty()
	edp.SetCount(5)
	edp.SetSum(-3)
	edp.SetScale(-2)
	edp.SetZeroCount(1)
	edp.Positive().SetOffset(-1)
	edp.Positive().BucketCounts().FromRaw([]uint64{1, 2})
	edp.Negative().BucketCounts().FromRaw([]uint64{1})
	edp.Exemplars().AppendEmpty() // no value set

	q := sm.Metrics().AppendEmpty()
	q.SetName("rtt")
	qdp := q.SetEmptySummary().DataPoints().AppendEmpty()
	qdp.SetCount(10)
	qdp.SetSum(100)
	qv := qdp.QuantileValues().AppendEmpty()
	qv.SetQuantile(0.99)
	qv.SetValue(42.1)

	sm.Metrics().AppendEmpty().SetName("no data") // empty type: no records

	recs := collect(t, func(emit func([]byte) error) error { return FlattenMetrics(md, emit) })
	if len(recs) != 7 || CountDataPoints(md) != 7 {
		t.Fatalf("got %d records, CountDataPoints %d, want 7", len(recs), CountDataPoints(md))
	}
	res := map[string]any{"service.name": "checkout"}
	head := func(name, desc, unit, typ string, attrs map[string]any, ts, start string) map[string]any {
		return map[string]any{
			"resourceAttributes": res, "scope": scope, "name": name, "description": desc, "unit": unit,
			"type": typ, "attributes": attrs, "timestamp": ts, "startTimestamp": start,
		}
	}
	with := func(m map[string]any, kv ...any) map[string]any {
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	epoch := "1970-01-01T00:00:00.000000000Z"
	none := map[string]any{}
	noExemplars := []any{}
	want := []map[string]any{
		with(head("queue.depth", "items waiting", "{item}", "gauge", map[string]any{"queue": "a"}, ts1Str, ""),
			"value", json.Number("9223372036854775807"),
			"exemplars", []any{map[string]any{
				"timestamp": ts2Str, "value": json.Number("7"),
				"traceId": "5b8efff798038103d269b633813fc60c", "spanId": "eee19b7ec3c1b174",
				"filteredAttributes": map[string]any{"host": "h1"},
			}}),
		with(head("queue.depth", "items waiting", "{item}", "gauge", none, ts1Str, ts2Str),
			"value", "NaN", "exemplars", noExemplars),
		with(head("requests", "", "", "sum", none, ts2Str, ts1Str),
			"value", json.Number("2.5"), "isMonotonic", true, "aggregationTemporality", "cumulative",
			"exemplars", noExemplars),
		with(head("latency", "", "ms", "histogram", none, epoch, ""),
			"count", json.Number("6"), "sum", json.Number("12.5"), "min", json.Number("0.5"), "max", "Infinity",
			"bucketCounts", []any{json.Number("1"), json.Number("2"), json.Number("3")},
			"explicitBounds", []any{json.Number("1"), json.Number("2.5")},
			"aggregationTemporality", "delta",
			"exemplars", []any{map[string]any{
				"timestamp": epoch, "value": json.Number("0.75"), "traceId": "", "spanId": "",
				"filteredAttributes": none,
			}}),
		with(head("latency", "", "ms", "histogram", none, epoch, ""),
			"count", json.Number("0"), "bucketCounts", []any{}, "explicitBounds", []any{},
			"aggregationTemporality", "delta", "exemplars", noExemplars),
		with(head("size", "", "", "exponential_histogram", none, epoch, ""),
			"count", json.Number("5"), "sum", json.Number("-3"), "scale", json.Number("-2"),
			"zeroCount", json.Number("1"),
			"positive", map[string]any{"offset": json.Number("-1"), "bucketCounts": []any{json.Number("1"), json.Number("2")}},
			"negative", map[string]any{"offset": json.Number("0"), "bucketCounts": []any{json.Number("1")}},
			"aggregationTemporality", "cumulative",
			"exemplars", []any{map[string]any{
				"timestamp": epoch, "value": nil, "traceId": "", "spanId": "",
				"filteredAttributes": none,
			}}),
		with(head("rtt", "", "", "summary", none, epoch, ""),
			"count", json.Number("10"), "sum", json.Number("100"),
			"quantileValues", []any{map[string]any{"quantile": json.Number("0.99"), "value": json.Number("42.1")}}),
	}
	for i := range want {
		expectEqual(t, want[i]["type"].(string)+" record", decode(t, recs[i]), want[i])
	}
	expectEqual(t, "sum keys", topKeys(t, recs[2]), []string{
		"resourceAttributes", "scope", "name", "description", "unit", "type", "attributes",
		"timestamp", "startTimestamp", "value", "isMonotonic", "aggregationTemporality",
		"exemplars",
	})
}

// TestNewFieldsAllocateNothing guards the hot path: links, trace state and exemplars
// are written into the pooled buffers, so a record still costs one allocation (the
// copy handed to emit) however many links or exemplars it carries.
func TestNewFieldsAllocateNothing(t *testing.T) {
	td := ptrace.NewTraces()
	s := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	s.TraceState().FromRaw("vendor=a1")
	for range 3 {
		l := s.Links().AppendEmpty()
		l.SetTraceID(traceID)
		l.Attributes().PutStr("k", "v")
	}
	md := pmetric.NewMetrics()
	dp := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty().
		SetEmptyGauge().DataPoints().AppendEmpty()
	for range 3 {
		x := dp.Exemplars().AppendEmpty()
		x.SetDoubleValue(1.5)
		x.FilteredAttributes().PutStr("k", "v")
	}
	keep := func([]byte) error { return nil }
	if n := testing.AllocsPerRun(200, func() { _ = FlattenTraces(td, keep) }); n > 1 {
		t.Errorf("a span with links: %v allocations per record, want 1", n)
	}
	if n := testing.AllocsPerRun(200, func() { _ = FlattenMetrics(md, keep) }); n > 1 {
		t.Errorf("a point with exemplars: %v allocations per record, want 1", n)
	}
}
