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

// The records are shaped like bench/ingest's workload (production-looking logs: one
// resource with 5 attributes, 6 record attributes, a 60-200 byte body, trace and span
// ids), so both benchmarks move the same ~750-byte flat records. Only the severities are
// chosen here, since they decide what the trigger matches.

var (
	services = []string{"checkout", "payments", "cart", "frontend", "inventory", "shipping", "auth", "search"}
	envs     = []string{"production", "production", "production", "staging"}
	routes   = []string{"/api/v1/orders", "/api/v1/orders/{id}", "/api/v1/cart", "/api/v1/payments/authorize", "/healthz", "/api/v1/search"}
	methods  = []string{"GET", "GET", "GET", "POST", "PUT", "DELETE"}
	messages = []string{
		"request completed",
		"payment authorized by provider after fraud screening",
		"cache miss, loading order from primary database",
		"upstream responded slowly, retrying with exponential backoff",
		"user session refreshed",
		"inventory reservation failed: insufficient stock for requested quantity",
	}
	// Below the trigger (severity_number >= 17): mostly INFO, some DEBUG and WARN.
	quiet = []plog.SeverityNumber{9, 9, 9, 9, 9, 5, 5, 13}
)

var severityText = map[plog.SeverityNumber]string{5: "DEBUG", 9: "INFO", 10: "INFO2", 11: "INFO3", 12: "INFO4",
	13: "WARN", 17: "ERROR", 18: "ERROR2", 19: "ERROR3", 20: "ERROR4"}

// gen produces records from a seeded generator, so runs are comparable.
type gen struct{ rng *rand.Rand }

func newGen(seed uint64) *gen { return &gen{rng: rand.New(rand.NewPCG(seed, 2))} }

// resource fills a resource as an SDK on a pod of a service would, and returns the
// scope's log record slice.
func (g *gen) resource(rl plog.ResourceLogs) plog.LogRecordSlice {
	svc := services[g.rng.IntN(len(services))]
	ra := rl.Resource().Attributes()
	ra.PutStr("service.name", svc)
	ra.PutStr("k8s.pod.name", fmt.Sprintf("%s-%08x-%05x", svc, g.rng.Uint32(), g.rng.IntN(1<<20)))
	ra.PutStr("k8s.namespace.name", "shop-"+envs[g.rng.IntN(len(envs))])
	ra.PutStr("host.name", fmt.Sprintf("ip-10-0-%d-%d.eu-west-1.compute.internal", g.rng.IntN(256), g.rng.IntN(256)))
	ra.PutStr("deployment.environment", envs[g.rng.IntN(len(envs))])
	sl := rl.ScopeLogs().AppendEmpty()
	sl.Scope().SetName("github.com/acme/" + svc + "/internal/server")
	sl.Scope().SetVersion("1.4.2")
	return sl.LogRecords()
}

// record fills one log record.
func (g *gen) record(lr plog.LogRecord, sev plog.SeverityNumber, ts time.Time, trace pcommon.TraceID) {
	lr.SetTimestamp(pcommon.NewTimestampFromTime(ts))
	lr.SetObservedTimestamp(pcommon.NewTimestampFromTime(ts.Add(3 * time.Millisecond)))
	lr.SetSeverityNumber(sev)
	lr.SetSeverityText(severityText[sev])
	lr.Body().SetStr(g.body())
	a := lr.Attributes()
	a.PutStr("http.method", methods[g.rng.IntN(len(methods))])
	a.PutStr("http.route", routes[g.rng.IntN(len(routes))])
	a.PutInt("http.status_code", []int64{200, 200, 200, 201, 204, 400, 404, 500}[g.rng.IntN(8)])
	a.PutDouble("duration_ms", float64(g.rng.IntN(500000))/1000)
	a.PutBool("cache.hit", g.rng.IntN(2) == 0)
	a.PutStr("user.id", fmt.Sprintf("usr_%012x", g.rng.Uint64()>>16))
	if !trace.IsEmpty() {
		var sid pcommon.SpanID
		for i := range sid {
			sid[i] = byte(g.rng.Uint32())
		}
		lr.SetTraceID(trace)
		lr.SetSpanID(sid)
	}
}

func (g *gen) traceID() pcommon.TraceID {
	var t pcommon.TraceID
	for i := range t {
		t[i] = byte(g.rng.Uint32())
	}
	return t
}

// body is a log message of 60 to 200 bytes.
func (g *gen) body() string {
	want := 60 + g.rng.IntN(141)
	var b strings.Builder
	b.WriteString(messages[g.rng.IntN(len(messages))])
	fmt.Fprintf(&b, " order_id=A-%07d", g.rng.IntN(10_000_000))
	for b.Len() < want {
		fmt.Fprintf(&b, " k%d=%x", g.rng.IntN(100), g.rng.Uint32())
	}
	return b.String()[:want]
}

// flatRecords returns distinct flat log records (a multiple of 100) exactly as the
// receiver's exporter publishes them: in each run of 100, exactly one has severity 17
// (ERROR) at a random place, so the trigger matches 1%.
func flatRecords(distinct int) ([][]byte, error) {
	g := newGen(1)
	base := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	var out [][]byte
	for req := 0; req < distinct/100; req++ {
		ld := plog.NewLogs()
		lrs := g.resource(ld.ResourceLogs().AppendEmpty())
		hit := g.rng.IntN(100)
		for k := 0; k < 100; k++ {
			sev := quiet[g.rng.IntN(len(quiet))]
			if k == hit {
				sev = 17
			}
			var trace pcommon.TraceID
			if g.rng.IntN(10) < 9 { // most records are inside a trace
				trace = g.traceID()
			}
			g.record(lrs.AppendEmpty(), sev, base.Add(time.Duration(req)*time.Second+time.Duration(k)*time.Millisecond), trace)
		}
		err := records.FlattenLogs(ld, base, func(rec []byte) error { out = append(out, rec); return nil })
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Attributes the latency phase puts on its trigger records, so the agent can tell when
// and which one was sent.
const (
	attrSent = "bench.sent_unix_nano"
	attrSeq  = "bench.seq"
)

// latencyGen builds the latency phase's requests: one log record each, over a fixed set
// of trace ids (the window's group key); every triggerEvery-th record is a trigger
// (severity 17-20), the others have severity 9-13, so they pass the context filter
// (severity_number >= 9) and are stored in their trace's window.
type latencyGen struct {
	*gen
	traces []pcommon.TraceID
}

const triggerEvery = 20 // 5% of the records

func newLatencyGen(traces int) *latencyGen {
	g := &latencyGen{gen: newGen(3)}
	for range traces {
		g.traces = append(g.traces, g.traceID())
	}
	return g
}

// request returns the protobuf body of record i and whether it is a trigger; a trigger
// carries its sequence number and sent, the time it is sent at.
func (g *latencyGen) request(i int, sent time.Time) ([]byte, bool) {
	ld := plog.NewLogs()
	lr := g.resource(ld.ResourceLogs().AppendEmpty()).AppendEmpty()
	trigger := i%triggerEvery == 0
	sev := plog.SeverityNumber(9 + g.rng.IntN(5))
	if trigger {
		sev = plog.SeverityNumber(17 + g.rng.IntN(4))
	}
	g.record(lr, sev, sent, g.traces[g.rng.IntN(len(g.traces))])
	if trigger {
		lr.Attributes().PutInt(attrSent, sent.UnixNano())
		lr.Attributes().PutInt(attrSeq, int64(i))
	}
	body, err := plogotlp.NewExportRequestFromLogs(ld).MarshalProto()
	if err != nil {
		panic(err) // a plog built here always marshals
	}
	return body, trigger
}
