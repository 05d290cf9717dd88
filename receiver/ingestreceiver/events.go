package ingestreceiver

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/records"
	"github.com/otelcol-svc/otelcol-svc/internal/eventjson"
	"github.com/otelcol-svc/otelcol-svc/internal/pipelinectx"
)

// maxHeaderValue bounds X-Event-Type, X-Source and Idempotency-Key: they become record
// fields and message ids, not free-form payload.
const maxHeaderValue = 256

// eventsScope names the scope that carries prebuilt event records through the pipeline.
const eventsScope = "otelcol-svc/events"

func (r *ingestReceiver) handleEvent(w http.ResponseWriter, req *http.Request) {
	r.serveEvents(w, req, false)
}

func (r *ingestReceiver) handleEventBatch(w http.ResponseWriter, req *http.Request) {
	r.serveEvents(w, req, true)
}

func (r *ingestReceiver) serveEvents(w http.ResponseWriter, req *http.Request, batch bool) {
	if e := r.eventsRequest(w, req, batch); e != nil {
		apierror.Write(w, e)
	}
}

func (r *ingestReceiver) eventsRequest(w http.ResponseWriter, req *http.Request, batch bool) *apierror.Error {
	if req.Method != http.MethodPost {
		return methodNotAllowed(w)
	}
	if r.logs == nil {
		return apierror.New(http.StatusNotFound, apierror.NotFound, "this receiver is not part of a logs pipeline, which carries events")
	}
	ctx, aerr := r.authenticate(req)
	if aerr != nil {
		return aerr
	}
	if isCloudEvents(req) {
		return r.cloudEvents(ctx, w, req)
	}
	mt := mediaType(req)
	ndjson := mt == "application/x-ndjson" || mt == "application/ndjson" || mt == "application/jsonl"
	if !(mt == jsonContentType || strings.HasSuffix(mt, "+json") || batch && ndjson) {
		want := "application/json"
		if batch {
			want += " or application/x-ndjson"
		}
		return apierror.New(http.StatusUnsupportedMediaType, apierror.UnsupportedMediaType,
			fmt.Sprintf("unsupported Content-Type %q; send %s", req.Header.Get("Content-Type"), want))
	}
	fields, idem, aerr := eventHeaders(req)
	if aerr != nil {
		return aerr
	}
	t, body, aerr := r.admittedBody(ctx, req)
	if aerr != nil {
		return aerr
	}
	defer t.release()
	var objs [][]byte
	var err error
	if batch {
		objs, err = eventjson.Split(body, ndjson, r.cfg.MaxObjectsPerRequest)
	} else {
		var obj []byte
		obj, err = eventjson.Object(body)
		objs = [][]byte{obj}
	}
	if err != nil {
		return r.countRefusal(ctx, bodyError(err), 1)
	}
	for i := range objs {
		objs[i] = eventjson.WithFields(objs[i], fields...)
	}
	quota := new(pipelinectx.Quota)
	info := pipelinectx.Ingest{Prebuilt: records.SignalEvent, IdempotencyKey: idem, Quota: quota}
	if idem != "" {
		surface := "events"
		if batch {
			surface = "events/batch"
			if ndjson {
				surface += " ndjson"
			}
		}
		parts := []string{surface}
		for _, f := range fields {
			parts = append(parts, f.Name, f.Value)
		}
		info.RequestDigest = requestDigest(body, parts...)
	}
	return r.storeAccepted(ctx, w, info, objs)
}

// storeAccepted stores a request's prebuilt records and answers 202 with how many, and
// the account's quota as RateLimit-* headers (info.Quota, filled by the exporter).
func (r *ingestReceiver) storeAccepted(ctx context.Context, w http.ResponseWriter, info pipelinectx.Ingest, recs [][]byte) *apierror.Error {
	if err := r.consumePrebuilt(ctx, info, recs); err != nil {
		return r.consumeError(err)
	}
	writeQuota(w, info.Quota)
	writeJSON(w, http.StatusAccepted, map[string]int{"accepted": len(recs)})
	return nil
}

// requestDigest identifies a request for its Idempotency-Key: what shapes its records (the
// surface, the headers that become fields, given as parts) and its body, so that the same
// key with any other request is told apart (422) instead of its records being dropped as
// duplicates of the first one's.
func requestDigest(body []byte, parts ...string) string {
	h := sha256.New()
	var n [8]byte
	for _, p := range parts {
		// Length-prefixed: ("ab", "c") and ("a", "bc") differ.
		binary.BigEndian.PutUint64(n[:], uint64(len(p)))
		h.Write(n[:])
		h.Write([]byte(p))
	}
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil))
}

func bodyError(err error) *apierror.Error {
	var ee *eventjson.Error
	if errors.As(err, &ee) && ee.Limit > 0 {
		return apierror.New(http.StatusRequestEntityTooLarge, apierror.PayloadTooLarge, ee.Error()+"; nothing was stored")
	}
	if errors.As(err, &ee) && ee.Syntax {
		return apierror.New(http.StatusBadRequest, apierror.InvalidJSON, ee.Error()+"; nothing was stored")
	}
	return apierror.New(http.StatusBadRequest, apierror.InvalidBody, err.Error()+"; nothing was stored")
}

// eventHeaders reads the optional headers that become record fields and the message id.
func eventHeaders(req *http.Request) ([]eventjson.Field, string, *apierror.Error) {
	var fields []eventjson.Field
	for _, h := range []struct{ header, field string }{{"X-Event-Type", "_event_type"}, {"X-Source", "_source"}} {
		v, ok := req.Header[h.header]
		if !ok {
			continue
		}
		if len(v[0]) > maxHeaderValue {
			return nil, "", apierror.New(http.StatusBadRequest, apierror.InvalidBody, fmt.Sprintf("%s is longer than %d bytes", h.header, maxHeaderValue))
		}
		// The value becomes a field of a JSON record: the same rule as JSON bodies.
		if !utf8.ValidString(v[0]) {
			return nil, "", apierror.New(http.StatusBadRequest, apierror.InvalidBody, fmt.Sprintf("%s is not valid UTF-8; nothing was stored", h.header))
		}
		fields = append(fields, eventjson.Field{Name: h.field, Value: v[0]})
	}
	idem := req.Header.Get("Idempotency-Key")
	if len(idem) > maxHeaderValue {
		return nil, "", apierror.New(http.StatusBadRequest, apierror.InvalidBody, fmt.Sprintf("Idempotency-Key is longer than %d bytes", maxHeaderValue))
	}
	return fields, idem, nil
}

// consumePrebuilt sends finished records down the logs pipeline, one log record each with
// the record's bytes as its body; the JetStream exporter publishes them as they are.
func (r *ingestReceiver) consumePrebuilt(ctx context.Context, info pipelinectx.Ingest, recs [][]byte) error {
	ld := plog.NewLogs()
	sl := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty()
	sl.Scope().SetName(eventsScope)
	lrs := sl.LogRecords()
	lrs.EnsureCapacity(len(recs))
	for _, rec := range recs {
		lrs.AppendEmpty().Body().SetEmptyBytes().FromRaw(rec)
	}
	ctx = pipelinectx.WithIngest(ctx, info)
	ctx = r.obs.StartLogsOp(ctx)
	err := r.logs.ConsumeLogs(ctx, ld)
	r.obs.EndLogsOp(ctx, info.Prebuilt, len(recs), err)
	return err
}
