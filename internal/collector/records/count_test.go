package records

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/otelcol-svc/otelcol-svc/internal/eventjson"
)

// pdataCount decodes body as pdata does and counts its records, or returns false when pdata
// refuses it.
func pdataCount(signal string, body []byte, isJSON bool) (int, bool) {
	var err error
	switch signal {
	case SignalLog:
		r := plogotlp.NewExportRequest()
		if isJSON {
			err = r.UnmarshalJSON(body)
		} else {
			err = r.UnmarshalProto(body)
		}
		return r.Logs().LogRecordCount(), err == nil
	case SignalSpan:
		r := ptraceotlp.NewExportRequest()
		if isJSON {
			err = r.UnmarshalJSON(body)
		} else {
			err = r.UnmarshalProto(body)
		}
		return r.Traces().SpanCount(), err == nil
	default:
		r := pmetricotlp.NewExportRequest()
		if isJSON {
			err = r.UnmarshalJSON(body)
		} else {
			err = r.UnmarshalProto(body)
		}
		return r.Metrics().DataPointCount(), err == nil
	}
}

func sampleMetrics() pmetric.Metrics {
	md := pmetric.NewMetrics()
	ms := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics()
	g := ms.AppendEmpty().SetEmptyGauge()
	g.DataPoints().AppendEmpty().SetIntValue(1)
	g.DataPoints().AppendEmpty().SetDoubleValue(2)
	ms.AppendEmpty().SetEmptySum().DataPoints().AppendEmpty()
	ms.AppendEmpty().SetEmptyHistogram().DataPoints().AppendEmpty()
	ms.AppendEmpty().SetEmptyExponentialHistogram().DataPoints().AppendEmpty()
	ms.AppendEmpty().SetEmptySummary().DataPoints().AppendEmpty()
	md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty().SetEmptyGauge().DataPoints().AppendEmpty()
	return md
}

func sampleTraces() ptrace.Traces {
	td := ptrace.NewTraces()
	for r := 0; r < 2; r++ {
		ss := td.ResourceSpans().AppendEmpty().ScopeSpans()
		for s := 0; s < 2; s++ {
			spans := ss.AppendEmpty().Spans()
			for i := 0; i < 3; i++ {
				sp := spans.AppendEmpty()
				sp.SetName("s")
				sp.Events().AppendEmpty().Attributes().PutStr("spans", "x")
			}
		}
	}
	return td
}

// The count from the bytes is the count pdata decodes, for every signal and encoding.
func TestCountOTLPMatchesPdata(t *testing.T) {
	logsJSON, err := os.ReadFile("testdata/logs.json")
	require.NoError(t, err)
	lreq := plogotlp.NewExportRequest()
	require.NoError(t, lreq.UnmarshalJSON(logsJSON))
	logsPB, err := lreq.MarshalProto()
	require.NoError(t, err)
	treq := ptraceotlp.NewExportRequestFromTraces(sampleTraces())
	tracesJSON, _ := treq.MarshalJSON()
	tracesPB, _ := treq.MarshalProto()
	mreq := pmetricotlp.NewExportRequestFromMetrics(sampleMetrics())
	metricsJSON, _ := mreq.MarshalJSON()
	metricsPB, _ := mreq.MarshalProto()
	cases := []struct {
		signal string
		body   string
		json   bool
	}{
		{SignalLog, string(logsJSON), true}, {SignalLog, string(logsPB), false},
		{SignalSpan, string(tracesJSON), true}, {SignalSpan, string(tracesPB), false},
		{SignalMetric, string(metricsJSON), true}, {SignalMetric, string(metricsPB), false},
		// snake_case names, escaped keys, keys of the same name elsewhere, null arrays
		{SignalLog, `{"resource_logs":[{"scope_logs":[{"log_records":[{},{"body":{"kvlistValue":{"values":[{"key":"logRecords","value":{"stringValue":"x"}}]}}}]}]}]}`, true},
		{SignalLog, `{"resourceLogs":[{"scopeLogs":[{"log\u0052ecords":[{},{},{}]},{"logRecords":null}]}]}`, true},
		{SignalLog, `{"resourceLogs":[{"scopeLogs":[{"logRecords":[{}]}],"scopeLogs":[{"logRecords":[{},{}]}]}]}`, true},
		{SignalLog, `{"resourceLogs":[{"resource":{"attributes":[{"key":"scopeLogs","value":{"arrayValue":{"values":[{"stringValue":"x"}]}}}]},"scopeLogs":[]}]}`, true},
		{SignalSpan, `{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"a","events":[{"name":"spans"}]},{"links":[{}]}]}]}]}`, true},
		{SignalLog, `{}`, true}, {SignalLog, ``, false},
	}
	for _, c := range cases {
		want, ok := pdataCount(c.signal, []byte(c.body), c.json)
		require.True(t, ok, "%s %.200q", c.signal, c.body)
		got, err := CountOTLP(c.signal, []byte(c.body), c.json)
		require.NoError(t, err)
		assert.Equal(t, want, got, "%s %.200q", c.signal, c.body)
	}
	assert.Greater(t, func() int { n, _ := CountOTLP(SignalMetric, metricsPB, false); return n }(), 5)

	_, err = CountOTLP(SignalLog, []byte{0x0a, 0xff}, false)
	assert.Error(t, err, "truncated protobuf")
}

// A 9 MB body of 3 million empty log records is counted without decoding it.
func TestCountOTLPHuge(t *testing.T) {
	body := `{"resourceLogs":[{"scopeLogs":[{"logRecords":[` + strings.TrimSuffix(strings.Repeat(`{},`, 3_000_000), ",") + `]}]}]}`
	n, err := CountOTLP(SignalLog, []byte(body), true)
	require.NoError(t, err)
	assert.Equal(t, 3_000_000, n)
	ld := plog.NewLogs()
	lrs := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords()
	for i := 0; i < 100_000; i++ {
		lrs.AppendEmpty()
	}
	pb, err := plogotlp.NewExportRequestFromLogs(ld).MarshalProto()
	require.NoError(t, err)
	n, err = CountOTLP(SignalLog, pb, false)
	require.NoError(t, err)
	assert.Equal(t, 100_000, n)
}

// Whatever pdata decodes and the count accepts, the count from the bytes matches (JSON
// and protobuf, logs).
func FuzzCountOTLP(f *testing.F) {
	seed, err := os.ReadFile("testdata/logs.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed, true)
	req := plogotlp.NewExportRequest()
	_ = req.UnmarshalJSON(seed)
	pb, _ := req.MarshalProto()
	f.Add(pb, false)
	f.Add([]byte(`{"resource_logs":[{"scope_logs":[{"log_records":[{},{}]}]}]}`), true)
	f.Fuzz(func(t *testing.T, body []byte, isJSON bool) {
		want, ok := pdataCount(SignalLog, body, isJSON)
		got, err := CountOTLP(SignalLog, body, isJSON)
		if !ok {
			return
		}
		if err != nil {
			// Refusing wire data pdata would skip (an unterminated group in an unknown
			// field) is safe; what matters is never counting less than pdata decodes.
			return
		}
		if isJSON && !validForCount(body) {
			return
		}
		if got != want {
			t.Fatalf("counted %d, pdata decoded %d: %q", got, want, body)
		}
	})
}

// validForCount: the receiver counts only bodies that are valid JSON and pass
// eventjson.Check; on others pdata's lenient decoder may read what the count does not.
func validForCount(b []byte) bool {
	return json.Valid(b) && eventjson.Check(b) == nil
}
