package ingestreceiver

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/records"
	"github.com/otelcol-svc/otelcol-svc/internal/eventjson"
	"github.com/otelcol-svc/otelcol-svc/internal/pipelinectx"
	"github.com/otelcol-svc/otelcol-svc/internal/sourcepreset"
)

// CloudEvents media types of the HTTP binding's structured and batched modes.
const (
	ceStructured = "application/cloudevents+json"
	ceBatch      = "application/cloudevents-batch+json"
)

// isCloudEvents tells a CloudEvents request to /v1/events apart, as the HTTP binding
// does: structured or batched by its media type, binary mode by its ce-specversion header
// (whatever the Content-Type of its data). Anything else is a plain JSON event.
func isCloudEvents(req *http.Request) bool {
	switch mediaType(req) {
	case ceStructured, ceBatch:
		return true
	}
	return req.Header.Get("Ce-Specversion") != ""
}

// cloudEvents stores a CloudEvents request to /v1/events (docs/contract.md#section-3):
// each event is one event record, its data (an object; anything else as {"data": ...})
// with _event_type from its type, _source from its source and _time from its time, and
// its source and id as the message id, so a producer's redelivery is stored once.
// X-Event-Type and X-Source do not apply: the event names its own.
func (r *ingestReceiver) cloudEvents(ctx context.Context, w http.ResponseWriter, req *http.Request) *apierror.Error {
	idem := req.Header.Get("Idempotency-Key")
	if len(idem) > maxHeaderValue {
		return apierror.New(http.StatusBadRequest, apierror.InvalidBody, fmt.Sprintf("Idempotency-Key is longer than %d bytes", maxHeaderValue))
	}
	t, body, aerr := r.admittedBody(ctx, req)
	if aerr != nil {
		return aerr
	}
	defer t.release()
	evs, err := sourcepreset.Split(sourcepreset.CloudEvents, req.Header, body, sourcepreset.Limits{MaxEvents: r.cfg.MaxObjectsPerRequest})
	if err != nil {
		return r.countRefusal(ctx, apierror.New(http.StatusBadRequest, apierror.InvalidBody, err.Error()+"; nothing was stored"), 1)
	}
	objs := make([][]byte, 0, len(evs))
	ids := make([]string, len(evs))
	for i, ev := range evs {
		// The same rules as any event's JSON (UTF-8, nesting), which the data may break.
		obj, err := eventjson.Object(ev.Payload)
		if err != nil {
			return r.countRefusal(ctx, bodyError(err), len(evs))
		}
		fields := []eventjson.Field{{Name: "_event_type", Value: ev.EventType}}
		if ev.Source != "" {
			fields = append(fields, eventjson.Field{Name: "_source", Value: ev.Source})
		}
		if !ev.Time.IsZero() {
			fields = append(fields, eventjson.Field{Name: "_time", Value: ev.Time.UTC().Format(time.RFC3339Nano)})
		}
		objs = append(objs, eventjson.WithFields(obj, fields...))
		if ev.DedupID != "" {
			ids[i] = "ce:" + ev.DedupID
		}
	}
	if len(objs) == 0 {
		writeJSON(w, http.StatusAccepted, map[string]int{"accepted": 0})
		return nil
	}
	quota := new(pipelinectx.Quota)
	info := pipelinectx.Ingest{Prebuilt: records.SignalEvent, IdempotencyKey: idem, RecordIDs: ids, Quota: quota}
	if idem != "" {
		// In binary mode the ce-* headers shape the record as much as the body does.
		parts := []string{"cloudevents", req.Header.Get("Content-Type")}
		var names []string
		for name := range req.Header {
			if strings.HasPrefix(strings.ToLower(name), "ce-") {
				names = append(names, name)
			}
		}
		sort.Strings(names)
		for _, name := range names {
			parts = append(parts, strings.ToLower(name), req.Header.Get(name))
		}
		info.RequestDigest = requestDigest(body, parts...)
	}
	return r.storeAccepted(ctx, w, info, objs)
}
