package records

import (
	"encoding/json"
	"math"
	"os"
	"testing"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

// checkRecord fails unless rec is one valid JSON object with wantKeys keys.
func checkRecord(t *testing.T, rec []byte, wantKeys int) {
	if !json.Valid(rec) {
		t.Fatalf("invalid JSON: %q", rec)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(rec, &m); err != nil {
		t.Fatalf("not an object: %q: %v", rec, err)
	}
	if wantKeys > 0 && len(m) != wantKeys {
		t.Fatalf("got %d keys, want %d: %s", len(m), wantKeys, rec)
	}
}

func FuzzFlattenLogsJSON(f *testing.F) {
	seed, err := os.ReadFile("testdata/logs.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add([]byte(`{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"body":{"bytesValue":"/w=="}}]}]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		req := plogotlp.NewExportRequest()
		if req.UnmarshalJSON(data) != nil {
			return
		}
		n := 0
		if err := FlattenLogs(req.Logs(), time.Unix(0, 1), func(rec []byte) error {
			n++
			checkRecord(t, rec, 10)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if n != CountLogs(req.Logs()) {
			t.Fatalf("emitted %d, CountLogs %d", n, CountLogs(req.Logs()))
		}
	})
}

func FuzzFlattenTracesJSON(f *testing.F) {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "checkout")
	s := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	s.SetTraceID(traceID)
	s.SetSpanID(spanID)
	s.SetName("GET /cart")
	s.SetKind(ptrace.SpanKindClient)
	s.SetStartTimestamp(ts1)
	s.SetEndTimestamp(ts2)
	s.Attributes().PutDouble("ratio", 0.5)
	s.Events().AppendEmpty().SetName("retry")
	s.TraceState().FromRaw("k=v")
	s.Links().AppendEmpty().SetTraceID(traceID)
	seed, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalJSON()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Fuzz(func(t *testing.T, data []byte) {
		req := ptraceotlp.NewExportRequest()
		if req.UnmarshalJSON(data) != nil {
			return
		}
		n := 0
		if err := FlattenTraces(req.Traces(), func(rec []byte) error {
			n++
			checkRecord(t, rec, 16)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if n != CountSpans(req.Traces()) {
			t.Fatalf("emitted %d, CountSpans %d", n, CountSpans(req.Traces()))
		}
	})
}

func FuzzFlattenMetricsJSON(f *testing.F) {
	md := pmetric.NewMetrics()
	ms := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics()
	g := ms.AppendEmpty()
	g.SetName("g")
	g.SetEmptyGauge().DataPoints().AppendEmpty().SetDoubleValue(math.Inf(1))
	sum := ms.AppendEmpty().SetEmptySum()
	sum.SetIsMonotonic(true)
	sdp := sum.DataPoints().AppendEmpty()
	sdp.SetIntValue(-7)
	sdp.Exemplars().AppendEmpty().SetDoubleValue(math.NaN())
	hdp := ms.AppendEmpty().SetEmptyHistogram().DataPoints().AppendEmpty()
	hdp.SetSum(1.5)
	hdp.BucketCounts().FromRaw([]uint64{1, 2})
	hdp.ExplicitBounds().FromRaw([]float64{1})
	edp := ms.AppendEmpty().SetEmptyExponentialHistogram().DataPoints().AppendEmpty()
	edp.SetMin(-1)
	edp.Positive().BucketCounts().FromRaw([]uint64{3})
	ms.AppendEmpty().SetEmptySummary().DataPoints().AppendEmpty().QuantileValues().AppendEmpty().SetQuantile(0.5)
	seed, err := pmetricotlp.NewExportRequestFromMetrics(md).MarshalJSON()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Fuzz(func(t *testing.T, data []byte) {
		req := pmetricotlp.NewExportRequest()
		if req.UnmarshalJSON(data) != nil {
			return
		}
		n := 0
		if err := FlattenMetrics(req.Metrics(), func(rec []byte) error {
			n++
			checkRecord(t, rec, 0)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if n != CountDataPoints(req.Metrics()) {
			t.Fatalf("emitted %d, CountDataPoints %d", n, CountDataPoints(req.Metrics()))
		}
	})
}

func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "plain", "q\"\\\n\x00", "bad\xff", "\u2028 世界 🎉", "\xed\xa0\x80"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := appendString(nil, s)
		var got string
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%q -> invalid JSON %q: %v", s, out, err)
		}
		if !utf8.Valid(out) {
			t.Fatalf("%q -> invalid UTF-8 %q", s, out)
		}
		if utf8.ValidString(s) && got != s {
			t.Fatalf("%q -> %q decoded to %q", s, out, got)
		}
		// Invalid input must be repaired exactly as encoding/json repairs it.
		ref, _ := json.Marshal(s)
		var want string
		if err := json.Unmarshal(ref, &want); err != nil || got != want {
			t.Fatalf("%q decoded to %q, encoding/json gives %q", s, got, want)
		}
	})
}
