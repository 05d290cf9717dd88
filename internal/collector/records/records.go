package records

import (
	"encoding/base64"
	"strconv"
	"sync"
	"time"
	"unsafe"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Signal values travel in the NATS header "Svc-Signal".
const (
	SignalLog    = "log"
	SignalSpan   = "span"
	SignalMetric = "metric"
	SignalEvent  = "event"
	SignalSource = "source"
)

// encoder reuses its buffers across records so that the only allocation per
// record is the copy handed to emit.
type encoder struct {
	res    []byte // `{"resourceAttributes":{...}`, shared by a resource's records
	prefix []byte // res plus `,"scope":{...}`, shared by a scope's records
	metric []byte // prefix plus the metric's descriptive fields
	buf    []byte // the record being built
	tmp    []byte // scratch for non-string log bodies
}

// encoders are pooled because requests are often small (a handful of records),
// where growing fresh buffers would cost more allocations than the records themselves.
var encoders = sync.Pool{New: func() any { return new(encoder) }}

func getEncoder() *encoder { return encoders.Get().(*encoder) }

// put returns e to the pool unless one outsized record grew its buffers: keeping
// those alive would pin memory for the sake of a rare case.
func (e *encoder) put() {
	if cap(e.res)+cap(e.prefix)+cap(e.metric)+cap(e.buf)+cap(e.tmp) <= 1<<20 {
		encoders.Put(e)
	}
}

func (e *encoder) startResource(r pcommon.Resource) {
	e.res = append(e.res[:0], `{"resourceAttributes":`...)
	e.res = appendMap(e.res, r.Attributes())
}

func (e *encoder) startScope(s pcommon.InstrumentationScope) {
	e.prefix = append(e.prefix[:0], e.res...)
	e.prefix = append(e.prefix, `,"scope":{"name":`...)
	e.prefix = appendString(e.prefix, s.Name())
	if v := s.Version(); v != "" {
		e.prefix = append(e.prefix, `,"version":`...)
		e.prefix = appendString(e.prefix, v)
	}
	e.prefix = append(e.prefix, '}')
}

// emit closes the record and hands a copy to fn, which may keep it.
func (e *encoder) emit(fn func([]byte) error) error {
	e.buf = append(e.buf, '}')
	rec := make([]byte, len(e.buf)) // make+copy is compiled to an allocation without zeroing
	copy(rec, e.buf)
	return fn(rec)
}

func (e *encoder) key(k string) {
	e.buf = append(e.buf, ',', '"')
	e.buf = append(e.buf, k...)
	e.buf = append(e.buf, '"', ':')
}

// FlattenLogs calls emit once per log record, in order, with that record's JSON.
// received is the timestamp of last resort, used when the record carries neither
// a time nor an observed time. emit owns the slice it is given. An error from
// emit stops the walk and is returned.
func FlattenLogs(ld plog.Logs, received time.Time, emit func(rec []byte) error) error {
	e := getEncoder()
	defer e.put()
	rls := ld.ResourceLogs()
	for i := 0; i < rls.Len(); i++ {
		rl := rls.At(i)
		e.startResource(rl.Resource())
		sls := rl.ScopeLogs()
		for j := 0; j < sls.Len(); j++ {
			sl := sls.At(j)
			e.startScope(sl.Scope())
			lrs := sl.LogRecords()
			for k := 0; k < lrs.Len(); k++ {
				e.log(lrs.At(k), received)
				if err := e.emit(emit); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func (e *encoder) log(lr plog.LogRecord, received time.Time) {
	e.buf = append(e.buf[:0], e.prefix...)
	e.key("severityNumber")
	e.buf = strconv.AppendInt(e.buf, int64(lr.SeverityNumber()), 10)
	e.key("severityText")
	e.buf = appendString(e.buf, lr.SeverityText())
	e.key("body")
	// body is always a string so triggers can match it the same way whatever the
	// producer sent; structured bodies keep their content as JSON text.
	switch body := lr.Body(); body.Type() {
	case pcommon.ValueTypeStr:
		e.buf = appendString(e.buf, body.Str())
	case pcommon.ValueTypeEmpty:
		e.buf = append(e.buf, `""`...)
	case pcommon.ValueTypeBytes:
		// The base64 text itself, as for a bytes attribute: quoting it again helps nobody.
		e.tmp = base64.StdEncoding.AppendEncode(e.tmp[:0], body.Bytes().AsRaw())
		e.buf = appendString(e.buf, unsafe.String(unsafe.SliceData(e.tmp), len(e.tmp)))
	default:
		e.tmp = AppendValue(e.tmp[:0], body)
		// tmp is not touched again until appendString returns, so the string view is safe.
		e.buf = appendString(e.buf, unsafe.String(unsafe.SliceData(e.tmp), len(e.tmp)))
	}
	e.key("attributes")
	e.buf = appendMap(e.buf, lr.Attributes())
	e.key("traceId")
	tid := lr.TraceID()
	e.buf = appendID(e.buf, tid[:])
	e.key("spanId")
	sid := lr.SpanID()
	e.buf = appendID(e.buf, sid[:])
	e.key("timestamp")
	switch {
	case lr.Timestamp() != 0:
		e.buf = appendTS(e.buf, lr.Timestamp())
	case lr.ObservedTimestamp() != 0:
		e.buf = appendTS(e.buf, lr.ObservedTimestamp())
	default:
		e.buf = AppendTimestamp(e.buf, received)
	}
	// Added after the original fields (contract §4 is extended, never reordered);
	// always present, "" when unset, so a trigger can test it like traceId.
	e.key("eventName")
	e.buf = appendString(e.buf, lr.EventName())
}

// FlattenTraces calls emit once per span, in order, with that span's JSON.
func FlattenTraces(td ptrace.Traces, emit func(rec []byte) error) error {
	e := getEncoder()
	defer e.put()
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		e.startResource(rs.Resource())
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			ss := sss.At(j)
			e.startScope(ss.Scope())
			spans := ss.Spans()
			for k := 0; k < spans.Len(); k++ {
				e.span(spans.At(k))
				if err := e.emit(emit); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

var spanKinds = [...]string{
	ptrace.SpanKindUnspecified: "unspecified",
	ptrace.SpanKindInternal:    "internal",
	ptrace.SpanKindServer:      "server",
	ptrace.SpanKindClient:      "client",
	ptrace.SpanKindProducer:    "producer",
	ptrace.SpanKindConsumer:    "consumer",
}

var statusCodes = [...]string{
	ptrace.StatusCodeUnset: "unset",
	ptrace.StatusCodeOk:    "ok",
	ptrace.StatusCodeError: "error",
}

// enumName maps an OTLP enum to its contract name. Values outside the known set
// (a newer producer, or garbage) fall back to the "unspecified" entry at index 0
// rather than inventing names users cannot anticipate.
func enumName[T ~int32](names []string, v T) string {
	if v < 0 || int(v) >= len(names) {
		return names[0]
	}
	return names[v]
}

func (e *encoder) span(s ptrace.Span) {
	e.buf = append(e.buf[:0], e.prefix...)
	e.key("traceId")
	tid := s.TraceID()
	e.buf = appendID(e.buf, tid[:])
	e.key("spanId")
	sid := s.SpanID()
	e.buf = appendID(e.buf, sid[:])
	e.key("parentSpanId")
	pid := s.ParentSpanID()
	e.buf = appendID(e.buf, pid[:])
	e.key("name")
	e.buf = appendString(e.buf, s.Name())
	e.key("kind")
	e.buf = appendString(e.buf, enumName(spanKinds[:], s.Kind()))
	e.key("startTime")
	e.buf = appendTS(e.buf, s.StartTimestamp())
	e.key("endTime")
	e.buf = appendTS(e.buf, s.EndTimestamp())
	e.key("durationMs")
	// Signed difference: a span whose end precedes its start shows a negative
	// duration instead of a huge wrapped-around one.
	e.buf = appendFloat(e.buf, float64(int64(s.EndTimestamp())-int64(s.StartTimestamp()))/1e6)
	e.key("status")
	e.buf = append(e.buf, `{"code":`...)
	e.buf = appendString(e.buf, enumName(statusCodes[:], s.Status().Code()))
	e.buf = append(e.buf, `,"message":`...)
	e.buf = appendString(e.buf, s.Status().Message())
	e.buf = append(e.buf, '}')
	e.key("attributes")
	e.buf = appendMap(e.buf, s.Attributes())
	e.key("events")
	e.buf = append(e.buf, '[')
	evs := s.Events()
	for i := 0; i < evs.Len(); i++ {
		ev := evs.At(i)
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		e.buf = append(e.buf, `{"name":`...)
		e.buf = appendString(e.buf, ev.Name())
		e.buf = append(e.buf, `,"timestamp":`...)
		e.buf = appendTS(e.buf, ev.Timestamp())
		e.buf = append(e.buf, `,"attributes":`...)
		e.buf = appendMap(e.buf, ev.Attributes())
		e.buf = append(e.buf, '}')
	}
	e.buf = append(e.buf, ']')
	// The fields below were added later and follow the original ones (contract §4).
	e.key("traceState")
	e.buf = appendString(e.buf, s.TraceState().AsRaw())
	e.key("links")
	e.buf = append(e.buf, '[')
	links := s.Links()
	for i := 0; i < links.Len(); i++ {
		l := links.At(i)
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		e.buf = append(e.buf, '{')
		e.ids(l.TraceID(), l.SpanID())
		e.buf = append(e.buf, `,"traceState":`...)
		e.buf = appendString(e.buf, l.TraceState().AsRaw())
		e.buf = append(e.buf, `,"attributes":`...)
		e.buf = appendMap(e.buf, l.Attributes())
		e.buf = append(e.buf, '}')
	}
	e.buf = append(e.buf, ']')
	// timestamp repeats startTime under the name logs and metrics use, so triggers
	// and the Recent events view can sort every signal on one field.
	e.key("timestamp")
	e.buf = appendTS(e.buf, s.StartTimestamp())
}

// FlattenMetrics calls emit once per data point, in order, with that point's JSON.
func FlattenMetrics(md pmetric.Metrics, emit func(rec []byte) error) error {
	e := getEncoder()
	defer e.put()
	rms := md.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		rm := rms.At(i)
		e.startResource(rm.Resource())
		sms := rm.ScopeMetrics()
		for j := 0; j < sms.Len(); j++ {
			sm := sms.At(j)
			e.startScope(sm.Scope())
			ms := sm.Metrics()
			for k := 0; k < ms.Len(); k++ {
				if err := e.metricPoints(ms.At(k), emit); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

var temporalities = [...]string{
	pmetric.AggregationTemporalityUnspecified: "unspecified",
	pmetric.AggregationTemporalityDelta:       "delta",
	pmetric.AggregationTemporalityCumulative:  "cumulative",
}

func (e *encoder) startMetric(m pmetric.Metric, typ string) {
	e.metric = append(e.metric[:0], e.prefix...)
	e.metric = append(e.metric, `,"name":`...)
	e.metric = appendString(e.metric, m.Name())
	e.metric = append(e.metric, `,"description":`...)
	e.metric = appendString(e.metric, m.Description())
	e.metric = append(e.metric, `,"unit":`...)
	e.metric = appendString(e.metric, m.Unit())
	e.metric = append(e.metric, `,"type":"`...)
	e.metric = append(e.metric, typ...)
	e.metric = append(e.metric, '"')
}

// ids writes the traceId and spanId members of an object nested in a record (a
// link, an exemplar), which point at another span.
func (e *encoder) ids(tid pcommon.TraceID, sid pcommon.SpanID) {
	e.buf = append(e.buf, `"traceId":`...)
	e.buf = appendID(e.buf, tid[:])
	e.buf = append(e.buf, `,"spanId":`...)
	e.buf = appendID(e.buf, sid[:])
}

// exemplars writes the point's exemplars, the links from a metric point to the
// traces behind it. It comes last in a point's record because it was added after
// the original fields (contract §4).
func (e *encoder) exemplars(xs pmetric.ExemplarSlice) {
	e.key("exemplars")
	e.buf = append(e.buf, '[')
	for i := 0; i < xs.Len(); i++ {
		x := xs.At(i)
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		e.buf = append(e.buf, `{"timestamp":`...)
		e.buf = appendTS(e.buf, x.Timestamp())
		e.buf = append(e.buf, `,"value":`...)
		switch x.ValueType() {
		case pmetric.ExemplarValueTypeInt:
			e.buf = strconv.AppendInt(e.buf, x.IntValue(), 10)
		case pmetric.ExemplarValueTypeDouble:
			e.buf = appendFloat(e.buf, x.DoubleValue())
		default:
			e.buf = append(e.buf, "null"...)
		}
		e.buf = append(e.buf, ',')
		e.ids(x.TraceID(), x.SpanID())
		e.buf = append(e.buf, `,"filteredAttributes":`...)
		e.buf = appendMap(e.buf, x.FilteredAttributes())
		e.buf = append(e.buf, '}')
	}
	e.buf = append(e.buf, ']')
}

// point starts a data point record with the fields every point type shares.
func (e *encoder) point(attrs pcommon.Map, ts, start pcommon.Timestamp) {
	e.buf = append(e.buf[:0], e.metric...)
	e.key("attributes")
	e.buf = appendMap(e.buf, attrs)
	e.key("timestamp")
	e.buf = appendTS(e.buf, ts)
	e.key("startTimestamp")
	// A zero start time means "unknown"; rendering it as 1970 would look like data.
	if start == 0 {
		e.buf = append(e.buf, `""`...)
	} else {
		e.buf = appendTS(e.buf, start)
	}
}

func (e *encoder) number(dp pmetric.NumberDataPoint) {
	e.point(dp.Attributes(), dp.Timestamp(), dp.StartTimestamp())
	e.key("value")
	switch dp.ValueType() {
	case pmetric.NumberDataPointValueTypeInt:
		e.buf = strconv.AppendInt(e.buf, dp.IntValue(), 10)
	case pmetric.NumberDataPointValueTypeDouble:
		e.buf = appendFloat(e.buf, dp.DoubleValue())
	default:
		e.buf = append(e.buf, "null"...)
	}
}

func (e *encoder) optFloat(k string, has bool, f float64) {
	if has {
		e.key(k)
		e.buf = appendFloat(e.buf, f)
	}
}

func (e *encoder) uints(s pcommon.UInt64Slice) {
	e.buf = append(e.buf, '[')
	for i := 0; i < s.Len(); i++ {
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		e.buf = strconv.AppendUint(e.buf, s.At(i), 10)
	}
	e.buf = append(e.buf, ']')
}

func (e *encoder) buckets(k string, b pmetric.ExponentialHistogramDataPointBuckets) {
	e.key(k)
	e.buf = append(e.buf, `{"offset":`...)
	e.buf = strconv.AppendInt(e.buf, int64(b.Offset()), 10)
	e.buf = append(e.buf, `,"bucketCounts":`...)
	e.uints(b.BucketCounts())
	e.buf = append(e.buf, '}')
}

func (e *encoder) temporality(t pmetric.AggregationTemporality) {
	e.key("aggregationTemporality")
	e.buf = appendString(e.buf, enumName(temporalities[:], t))
}

func (e *encoder) metricPoints(m pmetric.Metric, emit func([]byte) error) error {
	switch m.Type() {
	case pmetric.MetricTypeGauge:
		e.startMetric(m, "gauge")
		dps := m.Gauge().DataPoints()
		for i := 0; i < dps.Len(); i++ {
			dp := dps.At(i)
			e.number(dp)
			e.exemplars(dp.Exemplars())
			if err := e.emit(emit); err != nil {
				return err
			}
		}
	case pmetric.MetricTypeSum:
		e.startMetric(m, "sum")
		sum := m.Sum()
		dps := sum.DataPoints()
		for i := 0; i < dps.Len(); i++ {
			dp := dps.At(i)
			e.number(dp)
			e.key("isMonotonic")
			e.buf = strconv.AppendBool(e.buf, sum.IsMonotonic())
			e.temporality(sum.AggregationTemporality())
			e.exemplars(dp.Exemplars())
			if err := e.emit(emit); err != nil {
				return err
			}
		}
	case pmetric.MetricTypeHistogram:
		e.startMetric(m, "histogram")
		h := m.Histogram()
		dps := h.DataPoints()
		for i := 0; i < dps.Len(); i++ {
			dp := dps.At(i)
			e.distribution(dp)
			e.key("bucketCounts")
			e.uints(dp.BucketCounts())
			e.key("explicitBounds")
			e.buf = append(e.buf, '[')
			bounds := dp.ExplicitBounds()
			for j := 0; j < bounds.Len(); j++ {
				if j > 0 {
					e.buf = append(e.buf, ',')
				}
				e.buf = appendFloat(e.buf, bounds.At(j))
			}
			e.buf = append(e.buf, ']')
			e.temporality(h.AggregationTemporality())
			e.exemplars(dp.Exemplars())
			if err := e.emit(emit); err != nil {
				return err
			}
		}
	case pmetric.MetricTypeExponentialHistogram:
		e.startMetric(m, "exponential_histogram")
		h := m.ExponentialHistogram()
		dps := h.DataPoints()
		for i := 0; i < dps.Len(); i++ {
			dp := dps.At(i)
			e.distribution(dp)
			e.key("scale")
			e.buf = strconv.AppendInt(e.buf, int64(dp.Scale()), 10)
			e.key("zeroCount")
			e.buf = strconv.AppendUint(e.buf, dp.ZeroCount(), 10)
			e.buckets("positive", dp.Positive())
			e.buckets("negative", dp.Negative())
			e.temporality(h.AggregationTemporality())
			e.exemplars(dp.Exemplars())
			if err := e.emit(emit); err != nil {
				return err
			}
		}
	case pmetric.MetricTypeSummary:
		e.startMetric(m, "summary")
		dps := m.Summary().DataPoints()
		for i := 0; i < dps.Len(); i++ {
			dp := dps.At(i)
			e.point(dp.Attributes(), dp.Timestamp(), dp.StartTimestamp())
			e.key("count")
			e.buf = strconv.AppendUint(e.buf, dp.Count(), 10)
			e.key("sum")
			e.buf = appendFloat(e.buf, dp.Sum())
			e.key("quantileValues")
			e.buf = append(e.buf, '[')
			qs := dp.QuantileValues()
			for j := 0; j < qs.Len(); j++ {
				if j > 0 {
					e.buf = append(e.buf, ',')
				}
				q := qs.At(j)
				e.buf = append(e.buf, `{"quantile":`...)
				e.buf = appendFloat(e.buf, q.Quantile())
				e.buf = append(e.buf, `,"value":`...)
				e.buf = appendFloat(e.buf, q.Value())
				e.buf = append(e.buf, '}')
			}
			e.buf = append(e.buf, ']')
			if err := e.emit(emit); err != nil {
				return err
			}
		}
	}
	return nil
}

// CountLogs returns the number of records FlattenLogs would emit.
func CountLogs(ld plog.Logs) int { return ld.LogRecordCount() }

// CountSpans returns the number of records FlattenTraces would emit.
func CountSpans(td ptrace.Traces) int { return td.SpanCount() }

// CountDataPoints returns the number of records FlattenMetrics would emit.
func CountDataPoints(md pmetric.Metrics) int { return md.DataPointCount() }

// distributionPoint is what histogram and exponential-histogram points have in common.
type distributionPoint interface {
	Attributes() pcommon.Map
	Timestamp() pcommon.Timestamp
	StartTimestamp() pcommon.Timestamp
	Count() uint64
	HasSum() bool
	Sum() float64
	HasMin() bool
	Min() float64
	HasMax() bool
	Max() float64
}

// distribution writes a distribution point's common fields: attributes and times, then
// count, and sum, min and max when the point has them.
func (e *encoder) distribution(dp distributionPoint) {
	e.point(dp.Attributes(), dp.Timestamp(), dp.StartTimestamp())
	e.key("count")
	e.buf = strconv.AppendUint(e.buf, dp.Count(), 10)
	e.optFloat("sum", dp.HasSum(), dp.Sum())
	e.optFloat("min", dp.HasMin(), dp.Min())
	e.optFloat("max", dp.HasMax(), dp.Max())
}
