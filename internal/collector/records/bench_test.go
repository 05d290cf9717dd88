package records

import (
	"fmt"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
)

const benchRecords = 100

func benchLogs() plog.Logs {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	ra := rl.Resource().Attributes()
	ra.PutStr("service.name", "checkout-service")
	ra.PutStr("service.version", "2.14.3")
	ra.PutStr("deployment.environment", "production")
	ra.PutStr("host.name", "ip-10-0-12-34.eu-west-1.compute.internal")
	ra.PutStr("k8s.pod.name", "checkout-7d9f8b6c4-x2kqp")
	sl := rl.ScopeLogs().AppendEmpty()
	sl.Scope().SetName("github.com/acme/checkout/internal/payments")
	sl.Scope().SetVersion("1.0.0")
	base := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	for i := 0; i < benchRecords; i++ {
		lr := sl.LogRecords().AppendEmpty()
		lr.SetTimestamp(pcommon.NewTimestampFromTime(base.Add(time.Duration(i) * time.Millisecond)))
		lr.SetSeverityNumber(plog.SeverityNumberInfo)
		lr.SetSeverityText("INFO")
		lr.Body().SetStr(fmt.Sprintf(`payment authorized for order A-%06d: amount=42.50 EUR, provider="stripe", latency=%dms`, i, 30+i%50))
		a := lr.Attributes()
		a.PutStr("order.id", fmt.Sprintf("A-%06d", i))
		a.PutStr("customer.id", fmt.Sprintf("cus_%08x", i*7919))
		a.PutInt("http.status_code", 200)
		a.PutDouble("payment.amount", 42.5)
		a.PutBool("payment.retry", i%10 == 0)
		a.PutStr("http.url", "https://api.acme.example/v1/payments/authorize?source=web")
		lr.SetTraceID(traceID)
		lr.SetSpanID(spanID)
	}
	return ld
}

func BenchmarkFlattenLogs(b *testing.B) {
	ld := benchLogs()
	received := time.Now()
	var total int64
	emit := func(rec []byte) error { total += int64(len(rec)); return nil }
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := FlattenLogs(ld, received, emit); err != nil {
			b.Fatal(err)
		}
	}
	n := float64(b.N * benchRecords)
	b.ReportMetric(n/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/record")
	b.ReportMetric(float64(total)/n, "B/record")
}
