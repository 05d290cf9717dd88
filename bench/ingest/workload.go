package main

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/records"
)

// request is one pre-built OTLP logs export request: its protobuf body for the ingest
// phase and its flat records (what the exporter would publish) for the reference phase.
type request struct {
	body    []byte
	records [][]byte
}

// workload builds n distinct requests of batch log records each. It is deterministic
// (fixed seed) so runs are comparable.
func workload(n, batch int) ([]request, error) {
	rng := rand.New(rand.NewPCG(1, 2))
	received := time.Now()
	out := make([]request, n)
	for i := range out {
		ld := logs(rng, batch, i)
		body, err := plogotlp.NewExportRequestFromLogs(ld).MarshalProto()
		if err != nil {
			return nil, err
		}
		recs := make([][]byte, 0, batch)
		err = records.FlattenLogs(ld, received, func(rec []byte) error { recs = append(recs, rec); return nil })
		if err != nil {
			return nil, err
		}
		out[i] = request{body: body, records: recs}
	}
	return out, nil
}

var (
	services = []string{"checkout", "payments", "cart", "frontend", "inventory", "shipping", "auth", "search"}
	envs     = []string{"production", "production", "production", "staging"}
	routes   = []string{"/api/v1/orders", "/api/v1/orders/{id}", "/api/v1/cart", "/api/v1/payments/authorize", "/healthz", "/api/v1/search"}
	methods  = []string{"GET", "GET", "GET", "POST", "PUT", "DELETE"}
	// Mostly INFO, some DEBUG and WARN, a few ERROR, as production logs look.
	severities = []struct {
		n    plog.SeverityNumber
		text string
	}{
		{plog.SeverityNumberInfo, "INFO"}, {plog.SeverityNumberInfo, "INFO"}, {plog.SeverityNumberInfo, "INFO"},
		{plog.SeverityNumberInfo, "INFO"}, {plog.SeverityNumberInfo, "INFO"}, {plog.SeverityNumberDebug, "DEBUG"},
		{plog.SeverityNumberDebug, "DEBUG"}, {plog.SeverityNumberWarn, "WARN"}, {plog.SeverityNumberError, "ERROR"},
	}
	messages = []string{
		"request completed",
		"payment authorized by provider after fraud screening",
		"cache miss, loading order from primary database",
		"upstream responded slowly, retrying with exponential backoff",
		"user session refreshed",
		"inventory reservation failed: insufficient stock for requested quantity",
	}
)

// logs is one request as an SDK or collector sends it: one resource (a pod of a
// service), one scope, batch records.
func logs(rng *rand.Rand, batch, seq int) plog.Logs {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	svc := services[rng.IntN(len(services))]
	ra := rl.Resource().Attributes()
	ra.PutStr("service.name", svc)
	ra.PutStr("k8s.pod.name", fmt.Sprintf("%s-%08x-%05x", svc, rng.Uint32(), rng.IntN(1<<20)))
	ra.PutStr("k8s.namespace.name", "shop-"+envs[rng.IntN(len(envs))])
	ra.PutStr("host.name", fmt.Sprintf("ip-10-0-%d-%d.eu-west-1.compute.internal", rng.IntN(256), rng.IntN(256)))
	ra.PutStr("deployment.environment", envs[rng.IntN(len(envs))])
	sl := rl.ScopeLogs().AppendEmpty()
	sl.Scope().SetName("github.com/acme/" + svc + "/internal/server")
	sl.Scope().SetVersion("1.4.2")
	base := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC).Add(time.Duration(seq) * time.Second)
	for k := 0; k < batch; k++ {
		lr := sl.LogRecords().AppendEmpty()
		ts := base.Add(time.Duration(rng.IntN(int(time.Second))))
		lr.SetTimestamp(pcommon.NewTimestampFromTime(ts))
		lr.SetObservedTimestamp(pcommon.NewTimestampFromTime(ts.Add(3 * time.Millisecond)))
		sev := severities[rng.IntN(len(severities))]
		lr.SetSeverityNumber(sev.n)
		lr.SetSeverityText(sev.text)
		lr.Body().SetStr(body(rng))
		a := lr.Attributes()
		a.PutStr("http.method", methods[rng.IntN(len(methods))])
		a.PutStr("http.route", routes[rng.IntN(len(routes))])
		a.PutInt("http.status_code", []int64{200, 200, 200, 201, 204, 400, 404, 500}[rng.IntN(8)])
		a.PutDouble("duration_ms", float64(rng.IntN(500000))/1000)
		a.PutBool("cache.hit", rng.IntN(2) == 0)
		a.PutStr("user.id", fmt.Sprintf("usr_%012x", rng.Uint64()>>16))
		if rng.IntN(10) < 9 { // most records are inside a trace
			var tid pcommon.TraceID
			var sid pcommon.SpanID
			for i := range tid {
				tid[i] = byte(rng.Uint32())
			}
			for i := range sid {
				sid[i] = byte(rng.Uint32())
			}
			lr.SetTraceID(tid)
			lr.SetSpanID(sid)
		}
	}
	return ld
}

// body is a log message of 60 to 200 bytes.
func body(rng *rand.Rand) string {
	want := 60 + rng.IntN(141)
	var b strings.Builder
	b.WriteString(messages[rng.IntN(len(messages))])
	fmt.Fprintf(&b, " order_id=A-%07d", rng.IntN(10_000_000))
	for b.Len() < want {
		fmt.Fprintf(&b, " k%d=%x", rng.IntN(100), rng.Uint32())
	}
	return b.String()[:want]
}
