package ottlevent

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl/contexts/ottllog"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl/ottlfuncs"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/records"
)

const (
	benchCondition    = `severity_number >= 17 and resource_attributes["service.name"] == "checkout"`
	benchConditionLog = `log.severity_number >= 17 and resource.attributes["service.name"] == "checkout"`
)

// benchLogs is one log record with 5 resource attributes and 6 attributes, the same
// data for both condition benchmarks: the event context reads its flat record, the
// log context the plog it was flattened from.
func benchLogs() plog.Logs {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	ra := rl.Resource().Attributes()
	ra.PutStr("service.name", "checkout")
	ra.PutStr("service.version", "2.14.3")
	ra.PutStr("deployment.environment", "production")
	ra.PutStr("host.name", "ip-10-0-12-34")
	ra.PutStr("k8s.pod.name", "checkout-7d9f8b6c4-x2kqp")
	sl := rl.ScopeLogs().AppendEmpty()
	sl.Scope().SetName("acme/checkout/payments")
	sl.Scope().SetVersion("1.0.0")
	lr := sl.LogRecords().AppendEmpty()
	lr.SetTimestamp(pcommon.NewTimestampFromTime(time.Date(2024, 5, 1, 12, 0, 0, 123456789, time.UTC)))
	lr.SetSeverityNumber(plog.SeverityNumberError)
	lr.SetSeverityText("ERROR")
	lr.Body().SetStr(`payment declined: card_declined (order A-001001, provider "stripe")`)
	a := lr.Attributes()
	a.PutStr("order.id", "A-001001")
	a.PutStr("customer.id", "cus_0001eef7")
	a.PutInt("http.status_code", 402)
	a.PutDouble("payment.amount", 42.5)
	a.PutBool("payment.retry", false)
	a.PutStr("http.url", "https://api.acme.example/v1/payments")
	lr.SetTraceID(pcommon.TraceID{0x5b, 0x8e, 0xff, 0xf7, 0x98, 0x03, 0x81, 0x03, 0xd2, 0x69, 0xb6, 0x33, 0x81, 0x3f, 0xc6, 0x0c})
	lr.SetSpanID(pcommon.SpanID{0xee, 0xe1, 0x9b, 0x7e, 0xc3, 0xc1, 0xb1, 0x74})
	return ld
}

func benchRecordJSON(tb testing.TB) []byte {
	var rec []byte
	if err := records.FlattenLogs(benchLogs(), time.Now(), func(b []byte) error {
		rec = append([]byte(nil), b...)
		return nil
	}); err != nil {
		tb.Fatal(err)
	}
	return rec
}

func BenchmarkConditionEventContext(b *testing.B) {
	c, err := CompileCondition(benchCondition, settings())
	if err != nil {
		b.Fatal(err)
	}
	r := decode(b, string(benchRecordJSON(b)), SignalLog)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		ok, err := c.Match(ctx, r)
		if err != nil || !ok {
			b.Fatal(ok, err)
		}
	}
}

func BenchmarkConditionOTTLLog(b *testing.B) {
	p, err := ottllog.NewParser(ottlfuncs.StandardConverters[*ottllog.TransformContext](), settings(), ottllog.EnablePathContextNames())
	if err != nil {
		b.Fatal(err)
	}
	c, err := p.ParseCondition(benchConditionLog)
	if err != nil {
		b.Fatal(err)
	}
	ld := benchLogs()
	rl := ld.ResourceLogs().At(0)
	sl := rl.ScopeLogs().At(0)
	tCtx := ottllog.NewTransformContext(rl, sl, sl.LogRecords().At(0))
	defer tCtx.Close()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		ok, err := c.Eval(ctx, tCtx)
		if err != nil || !ok {
			b.Fatal(ok, err)
		}
	}
}

func BenchmarkDecodeRecord(b *testing.B) {
	rec := benchRecordJSON(b)
	b.SetBytes(int64(len(rec)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeRecord(rec, SignalLog); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(rec)), "B/record")
}

// BenchmarkDecodeRecordEncodingJSON is the reference: encoding/json into any, which
// loses key order and still has to be converted to a pcommon.Map.
func BenchmarkDecodeRecordEncodingJSON(b *testing.B) {
	rec := benchRecordJSON(b)
	b.SetBytes(int64(len(rec)))
	b.ReportAllocs()
	for b.Loop() {
		var v map[string]any
		if err := json.Unmarshal(rec, &v); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(rec)), "B/record")
}

func BenchmarkAppendJSON(b *testing.B) {
	r := decode(b, string(benchRecordJSON(b)), SignalLog)
	buf := make([]byte, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		buf = r.AppendJSON(buf[:0])
	}
}

func BenchmarkApplyStatements(b *testing.B) {
	s, err := CompileStatements([]string{
		`set(event["service"], resource_attributes["service.name"])`,
		`delete_key(event, "traceId")`,
	}, settings())
	if err != nil {
		b.Fatal(err)
	}
	rec := benchRecordJSON(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		r, _ := DecodeRecord(rec, SignalLog)
		if err := s.Apply(ctx, r); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkConditionRatio runs both contexts in alternating chunks, so that a busy
// machine slows both alike, and reports the event context's cost relative to
// ottllog's (the performance goal is <= 1.2).
func BenchmarkConditionRatio(b *testing.B) {
	c, err := CompileCondition(benchCondition, settings())
	if err != nil {
		b.Fatal(err)
	}
	r := decode(b, string(benchRecordJSON(b)), SignalLog)
	p, err := ottllog.NewParser(ottlfuncs.StandardConverters[*ottllog.TransformContext](), settings(), ottllog.EnablePathContextNames())
	if err != nil {
		b.Fatal(err)
	}
	lc, err := p.ParseCondition(benchConditionLog)
	if err != nil {
		b.Fatal(err)
	}
	ld := benchLogs()
	rl := ld.ResourceLogs().At(0)
	sl := rl.ScopeLogs().At(0)
	tCtx := ottllog.NewTransformContext(rl, sl, sl.LogRecords().At(0))
	defer tCtx.Close()
	ctx := context.Background()

	const chunk = 1000
	var event, log time.Duration
	for b.Loop() {
		start := time.Now()
		for range chunk {
			if ok, err := c.Match(ctx, r); err != nil || !ok {
				b.Fatal(ok, err)
			}
		}
		mid := time.Now()
		for range chunk {
			if ok, err := lc.Eval(ctx, tCtx); err != nil || !ok {
				b.Fatal(ok, err)
			}
		}
		event += mid.Sub(start)
		log += time.Since(mid)
	}
	n := float64(b.N * chunk)
	b.ReportMetric(float64(event.Nanoseconds())/n, "ns/event-eval")
	b.ReportMetric(float64(log.Nanoseconds())/n, "ns/ottllog-eval")
	b.ReportMetric(float64(event)/float64(log), "ratio")
}

// BenchmarkTriggerDropsRecord is what the trigger processor does for the 99% of records
// a trigger like severity_number >= 17 drops: decode what it reads, evaluate, discard.
func BenchmarkTriggerDropsRecord(b *testing.B) {
	c, err := CompileCondition(`severity_number >= 21`, settings())
	if err != nil {
		b.Fatal(err)
	}
	fields, ok := c.Reads()
	if !ok {
		b.Fatal("the condition reads the whole record")
	}
	set := NewFieldSet(fields)
	rec := benchRecordJSON(b)
	ctx := context.Background()
	b.SetBytes(int64(len(rec)))
	b.ReportAllocs()
	var r *Record
	for b.Loop() {
		r, err = DecodeRecordFieldsInto(r, rec, SignalLog, set)
		if err != nil {
			b.Fatal(err)
		}
		if match, err := c.Match(ctx, r); err != nil || match {
			b.Fatal(match, err)
		}
	}
}

// BenchmarkIncidentReadsRecord is what incident mode does for every record with the
// benchmark's pipeline (trigger severity_number >= 17, fingerprint
// resource_attributes["service.name"]): decode what the expressions read, evaluate.
func BenchmarkIncidentReadsRecord(b *testing.B) {
	c, err := CompileCondition(`severity_number >= 21`, settings())
	if err != nil {
		b.Fatal(err)
	}
	fp, err := CompileValue(`resource_attributes["service.name"]`, settings())
	if err != nil {
		b.Fatal(err)
	}
	cs, ok1 := c.ReadSet()
	fs, ok2 := fp.ReadSet()
	if !ok1 || !ok2 {
		b.Fatal("an expression reads the whole record")
	}
	set := cs.Union(fs)
	rec := benchRecordJSON(b)
	ctx := context.Background()
	b.SetBytes(int64(len(rec)))
	b.ReportAllocs()
	var r *Record
	for b.Loop() {
		r, err = DecodeRecordReadsInto(r, rec, SignalLog, set)
		if err != nil {
			b.Fatal(err)
		}
		if match, err := c.Match(ctx, r); err != nil || match {
			b.Fatal(match, err)
		}
		if s, err := fp.String(ctx, r); err != nil || s != "checkout" {
			b.Fatal(s, err)
		}
	}
}
