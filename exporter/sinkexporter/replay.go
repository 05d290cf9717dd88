package sinkexporter

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelinedata"
	"github.com/otelcol-svc/otelcol-svc/internal/delivery"
	"github.com/otelcol-svc/otelcol-svc/internal/deliverylog"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
)

// Why a result's replay could not be sent; the replay is logged as dead-lettered with it.
const (
	errPayloadGone  = "the original result is no longer stored (its dead letter and its output stream message expired); it cannot be replayed"
	errSinkGone     = "the destination no longer exists; the result cannot be replayed to it"
	errSinkDisabled = "the destination is disabled; enable it to replay to it"
)

// replaySink sends a result again to its destination (internal/delivery runs the
// replay queue).
func (e *sinkExporter) replaySink(ctx context.Context, proj mirror.Project, old deliverylog.Delivery, bulk bool) error {
	id := "snk_" + randomHex(16)
	d := deliverylog.Delivery{ID: id, Kind: deliverylog.KindSink, SinkID: old.SinkID, SinkKind: old.SinkKind,
		RequestID: old.RequestID, SourceSeq: old.SourceSeq, Records: 1, Unmatched: old.Unmatched, ReplayOf: old.ID}
	sink, ok := findSink(proj, old.SinkID)
	switch {
	case !ok:
		if !delivery.StillUnreplayable(old, errSinkGone, bulk) {
			e.engine.Unreplayable(proj.ID, old, d, errSinkGone)
		}
		return nil
	case !sink.Enabled:
		if !delivery.StillUnreplayable(old, errSinkDisabled, bulk) {
			e.engine.Unreplayable(proj.ID, old, d, errSinkDisabled)
		}
		return nil
	}
	// The dead letter holds the agent's payload whole; else the output stream may still.
	payload, err := e.engine.StoredBody(ctx, proj.ID, old.DeadLetterSeq, deadLetterKindSink)
	if err != nil {
		return err
	}
	if payload == nil && old.SourceSeq > 0 {
		if payload, err = e.engine.StoredMsg(ctx, streams.OutputStream(proj.ID), old.SourceSeq, streams.OutputSubject(proj.ID)); err != nil {
			return err
		}
	}
	if payload == nil {
		if !delivery.StillUnreplayable(old, errPayloadGone, bulk) {
			e.engine.Unreplayable(proj.ID, old, d, errPayloadGone)
		}
		return nil
	}
	// The new delivery id is the webhook-id: a receiving side that deduplicates takes
	// the replay it was asked for.
	it := pipelinedata.Item{Body: payload, Kind: pipelinedata.KindResult, Seq: old.SourceSeq, SinkID: sink.ID,
		RequestID: old.RequestID, MsgID: id, Unmatched: old.Unmatched}
	if _, err := e.deliverResult(ctx, proj, sink, it, id, old.ID); err != nil {
		return fmt.Errorf("%w: %v", delivery.ErrRequeue, err)
	}
	e.engine.Log().Superseded(proj.ID, old, id)
	if led, err := e.engine.Log().LedgerNow(ctx); err == nil {
		led.Add(proj.ID, deliverylog.Counters{Replayed: 1})
	}
	return nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
