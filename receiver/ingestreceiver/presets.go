package ingestreceiver

import (
	"context"
	"errors"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
	"github.com/otelcol-svc/otelcol-svc/internal/envelope"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/pipelinectx"
	"github.com/otelcol-svc/otelcol-svc/internal/sourcepreset"
)

// pushPreset stores a body of a source with a preset: one record per event its sender
// means (an alert of a notification, a CloudEvent of a batch, a GitHub delivery), each
// with the sender's delivery id as its message id, so that the sender's retries are
// stored once within the stream's duplicate window.
func (r *ingestReceiver) pushPreset(ctx context.Context, src mirror.Source, h http.Header, body []byte, received time.Time, info pipelinectx.Ingest) (int, *apierror.Error) {
	evs, err := sourcepreset.Split(src.Preset, h, body, sourcepreset.Limits{MaxEvents: r.cfg.MaxObjectsPerRequest})
	if err != nil {
		return 0, r.countRefusal(ctx, r.presetError(src, err), 1)
	}
	if len(evs) == 0 {
		// A notification without alerts: nothing to store, nothing wrong.
		return 0, nil
	}
	recs := make([][]byte, len(evs))
	ids := make([]string, len(evs))
	for i, ev := range evs {
		recs[i] = envelope.BuildPreset(src, ev, received).Record
		if ev.DedupID != "" {
			ids[i] = "src:" + src.ID + ":" + ev.DedupID
		}
	}
	info.RecordIDs = ids
	if err := r.consumePrebuilt(ctx, info, recs); err != nil {
		return 0, r.consumeError(err)
	}
	return len(recs), nil
}

// presetError answers a body the source's preset cannot read (400, what the sender sent
// wrong), or a preset this receiver does not know (a control plane newer than it: 500).
func (r *ingestReceiver) presetError(src mirror.Source, err error) *apierror.Error {
	var pe *sourcepreset.Error
	if errors.As(err, &pe) {
		return apierror.New(http.StatusBadRequest, apierror.InvalidBody, pe.Error()+"; nothing was stored")
	}
	if errors.Is(err, sourcepreset.ErrUnknownPreset) {
		r.settings.Logger.Error("a push source names a preset this receiver does not know", zap.String("source_id", src.ID), zap.String("preset", src.Preset))
	}
	return apierror.New(http.StatusInternalServerError, apierror.Internal, "this source's preset cannot be read because of a server configuration problem; nothing was stored")
}
