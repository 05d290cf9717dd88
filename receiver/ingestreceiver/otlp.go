package ingestreceiver

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/records"
	"github.com/otelcol-svc/otelcol-svc/internal/eventjson"
	"github.com/otelcol-svc/otelcol-svc/internal/pipelinectx"
	"github.com/otelcol-svc/otelcol-svc/receiver/ingestreceiver/internal/otlphttp"
)

// otlpEncodingOf returns the request's encoding, or false when it is neither OTLP
// encoding (errors are then answered in JSON).
func otlpEncodingOf(req *http.Request) (otlphttp.Encoding, bool) {
	return otlphttp.ForMediaType(mediaType(req))
}

// otlpSignals maps the OTLP paths' signal names to the records' signals.
var otlpSignals = map[string]string{"logs": records.SignalLog, "traces": records.SignalSpan, "metrics": records.SignalMetric}

func tooManyRecords(max int) *apierror.Error {
	return apierror.New(http.StatusRequestEntityTooLarge, apierror.PayloadTooLarge,
		fmt.Sprintf("the request holds more than %d records (log records, spans or metric data points; max_records_per_request); send at most %d per request, nothing was stored", max, max))
}

// otlpRequest is the part of handling that differs between signals.
type otlpRequest interface {
	unmarshal(enc otlphttp.Encoding, body []byte) error
	// count is the number of records decoded.
	count() int
	// consume sends the data down the pipeline and returns the number of items.
	consume(ctx context.Context, r *ingestReceiver, format string) (int, error)
	response(enc otlphttp.Encoding) ([]byte, error)
}

func (r *ingestReceiver) serveOTLP(w http.ResponseWriter, req *http.Request, enabled bool, signal string, or otlpRequest) {
	enc, known := otlpEncodingOf(req)
	fail := func(e *apierror.Error) { otlphttp.WriteError(w, enc, e) }
	if req.Method != http.MethodPost {
		fail(methodNotAllowed(w))
		return
	}
	if !enabled {
		fail(apierror.New(http.StatusNotFound, apierror.NotFound, "this receiver is not part of a "+signal+" pipeline"))
		return
	}
	ctx, aerr := r.authenticate(req)
	if aerr != nil {
		fail(aerr)
		return
	}
	if !known {
		fail(apierror.New(http.StatusUnsupportedMediaType, apierror.UnsupportedMediaType,
			"unsupported Content-Type "+strconv.Quote(req.Header.Get("Content-Type"))+"; send application/x-protobuf or application/json"))
		return
	}
	t := r.admit.ticket(tenantOf(ctx))
	defer t.release()
	body, aerr := r.readBody(req, t)
	if aerr != nil {
		fail(r.countRefusal(ctx, aerr, 1))
		return
	}
	if enc.JSON {
		// pdata's JSON decoder takes invalid UTF-8 and any depth: the rules of every other
		// JSON path apply first.
		if err := eventjson.Check(body); err != nil {
			fail(apierror.New(http.StatusBadRequest, apierror.InvalidJSON, "the body is not a valid OTLP "+signal+" export request: "+err.Error()))
			return
		}
	}
	n, err := records.CountOTLP(otlpSignals[signal], body, enc.JSON)
	if err != nil {
		fail(apierror.New(http.StatusBadRequest, apierror.InvalidBody, "the body is not a valid OTLP "+signal+" export request: "+err.Error()))
		return
	}
	if n > r.cfg.MaxRecordsPerRequest {
		fail(r.countRefusal(ctx, tooManyRecords(r.cfg.MaxRecordsPerRequest), n))
		return
	}
	if err := t.reserve(costPerBodyByte*int64(len(body)) + costPerRecord*int64(n)); err != nil {
		fail(r.countRefusal(ctx, r.busy(err), n))
		return
	}
	if err := or.unmarshal(enc, body); err != nil {
		fail(apierror.New(http.StatusBadRequest, apierror.InvalidBody, "the body is not a valid OTLP "+signal+" export request: "+err.Error()))
		return
	}
	format := "protobuf"
	if enc.JSON {
		format = "json"
	}
	if or.count() > r.cfg.MaxRecordsPerRequest {
		// The count from the bytes is what pdata decodes (records.FuzzCountOTLP); this
		// check keeps the limit exact whatever a lenient decoder makes of odd input.
		fail(r.countRefusal(ctx, tooManyRecords(r.cfg.MaxRecordsPerRequest), or.count()))
		return
	}
	quota := new(pipelinectx.Quota)
	if _, err := or.consume(pipelinectx.WithIngest(ctx, pipelinectx.Ingest{Quota: quota}), r, format); err != nil {
		fail(r.consumeError(err))
		return
	}
	msg, err := or.response(enc)
	if err != nil {
		fail(apierror.New(http.StatusInternalServerError, apierror.Internal, "could not encode the response"))
		return
	}
	writeQuota(w, quota)
	w.Header().Set("Content-Type", enc.ContentType())
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(msg)
}

type logsRequest struct{ req plogotlp.ExportRequest }

func (l *logsRequest) unmarshal(enc otlphttp.Encoding, body []byte) error {
	l.req = plogotlp.NewExportRequest()
	if enc.JSON {
		return l.req.UnmarshalJSON(body)
	}
	return l.req.UnmarshalProto(body)
}

func (l *logsRequest) count() int { return l.req.Logs().LogRecordCount() }

func (l *logsRequest) consume(ctx context.Context, r *ingestReceiver, format string) (int, error) {
	ld := l.req.Logs()
	n := ld.LogRecordCount()
	ctx = r.obs.StartLogsOp(ctx)
	err := r.logs.ConsumeLogs(ctx, ld)
	r.obs.EndLogsOp(ctx, format, n, err)
	return n, err
}

func (l *logsRequest) response(enc otlphttp.Encoding) ([]byte, error) {
	if enc.JSON {
		return plogotlp.NewExportResponse().MarshalJSON()
	}
	return plogotlp.NewExportResponse().MarshalProto()
}

type tracesRequest struct{ req ptraceotlp.ExportRequest }

func (t *tracesRequest) unmarshal(enc otlphttp.Encoding, body []byte) error {
	t.req = ptraceotlp.NewExportRequest()
	if enc.JSON {
		return t.req.UnmarshalJSON(body)
	}
	return t.req.UnmarshalProto(body)
}

func (t *tracesRequest) count() int { return t.req.Traces().SpanCount() }

func (t *tracesRequest) consume(ctx context.Context, r *ingestReceiver, format string) (int, error) {
	td := t.req.Traces()
	n := td.SpanCount()
	ctx = r.obs.StartTracesOp(ctx)
	err := r.traces.ConsumeTraces(ctx, td)
	r.obs.EndTracesOp(ctx, format, n, err)
	return n, err
}

func (t *tracesRequest) response(enc otlphttp.Encoding) ([]byte, error) {
	if enc.JSON {
		return ptraceotlp.NewExportResponse().MarshalJSON()
	}
	return ptraceotlp.NewExportResponse().MarshalProto()
}

type metricsRequest struct{ req pmetricotlp.ExportRequest }

func (m *metricsRequest) unmarshal(enc otlphttp.Encoding, body []byte) error {
	m.req = pmetricotlp.NewExportRequest()
	if enc.JSON {
		return m.req.UnmarshalJSON(body)
	}
	return m.req.UnmarshalProto(body)
}

func (m *metricsRequest) count() int { return m.req.Metrics().DataPointCount() }

func (m *metricsRequest) consume(ctx context.Context, r *ingestReceiver, format string) (int, error) {
	md := m.req.Metrics()
	n := md.DataPointCount()
	ctx = r.obs.StartMetricsOp(ctx)
	err := r.metrics.ConsumeMetrics(ctx, md)
	r.obs.EndMetricsOp(ctx, format, n, err)
	return n, err
}

func (m *metricsRequest) response(enc otlphttp.Encoding) ([]byte, error) {
	if enc.JSON {
		return pmetricotlp.NewExportResponse().MarshalJSON()
	}
	return pmetricotlp.NewExportResponse().MarshalProto()
}

func (r *ingestReceiver) handleLogs(w http.ResponseWriter, req *http.Request) {
	r.serveOTLP(w, req, r.logs != nil, "logs", &logsRequest{})
}

func (r *ingestReceiver) handleTraces(w http.ResponseWriter, req *http.Request) {
	r.serveOTLP(w, req, r.traces != nil, "traces", &tracesRequest{})
}

func (r *ingestReceiver) handleMetrics(w http.ResponseWriter, req *http.Request) {
	r.serveOTLP(w, req, r.metrics != nil, "metrics", &metricsRequest{})
}
