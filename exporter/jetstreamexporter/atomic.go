package jetstreamexporter

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"

	"github.com/otelcol-svc/otelcol-svc/exporter/jetstreamexporter/internal/atomicbatch"
)

// publishAtomic stores a request's records as atomic batches of at most
// atomicbatch.MaxSize records, in order. A request of up to that many records is stored
// whole or not at all, whatever happens to this process, the connection or the request:
// so a client that retries a failed or unanswered request without an Idempotency-Key
// duplicates it only when it was stored whole and the answer was lost, never in part. A
// larger request (up to 10,000 records) is stored chunk by chunk, each whole or not at
// all: one that fails half way leaves its first chunks stored, which a retry with a key
// finds duplicates and a retry without one stores again. It returns how many records
// JetStream added, as publishAsync does.
func (e *jsExporter) publishAtomic(ctx context.Context, projectID, stream, subject string, n int, header headerFunc, keyed bool, walk func(emitFunc) error) (int, error) {
	chunk := make([]atomicbatch.Record, 0, min(n, atomicbatch.MaxSize))
	added, i := 0, 0
	flush := func() error {
		k, err := e.publishChunk(ctx, projectID, stream, subject, chunk, keyed)
		added += k
		chunk = chunk[:0]
		return err
	}
	err := walk(func(signal string, rec []byte) error {
		chunk = append(chunk, atomicbatch.Record{Data: rec, Header: header(signal, i, rec)})
		i++
		if len(chunk) == atomicbatch.MaxSize {
			return flush()
		}
		return nil
	})
	if err == nil && len(chunk) > 0 {
		err = flush()
	}
	return added, err
}

// warnSmallBatches says once per process that the server takes smaller atomic batches
// than its default.
var warnSmallBatches sync.Once

// publishChunk stores one atomic batch and returns how many of its records were added.
// When the server refuses the batch before storing any of it for a reason that is not the
// records' (atomic publishing off on the stream, a max_batch_size below the default, more
// than 50 batches open on the stream for half the publish timeout), or because some of its
// message ids are already stored (a retry with an Idempotency-Key), the chunk is published
// record by record instead, which loses whole-or-nothing for that chunk but never a record.
func (e *jsExporter) publishChunk(ctx context.Context, projectID, stream, subject string, chunk []atomicbatch.Record, keyed bool) (int, error) {
	start := time.Now()
	cctx, cancel := context.WithTimeout(ctx, e.cfg.PublishTimeout)
	defer cancel()
	// Requests past atomicbatch.InFlight wait here, where a crash stores nothing of them,
	// rather than at the server, where it would store them unanswered.
	slots, _ := e.atomicSlots.LoadOrStore(stream, make(chan struct{}, atomicbatch.InFlight))
	select {
	case slots.(chan struct{}) <- struct{}{}:
		defer func() { <-slots.(chan struct{}) }()
	case <-cctx.Done():
		return 0, errAckTimeout
	}
	for wait := time.Millisecond; ; wait = min(2*wait, 50*time.Millisecond) {
		err := e.atomic.Publish(cctx, subject, chunk)
		if err == nil {
			return len(chunk), nil
		}
		switch atomicbatch.Code(err) {
		case atomicbatch.ErrCodeTooManyInflight:
			// Open batches commit within milliseconds; wait for a place rather than give
			// up the guarantee, for half the timeout.
			if time.Since(start)+wait < e.cfg.PublishTimeout/2 {
				time.Sleep(wait)
				continue
			}
			e.logger.Debug("too many atomic batches open on the stream; publishing record by record", zap.String("project_id", projectID))
		case atomicbatch.ErrCodeDuplicate:
			// Only per-record acks tell which records a retried request still lacks.
		case atomicbatch.ErrCodeDisabled:
			// Switched off by hand: the next request sets it again.
			e.ensured.Delete(stream)
		case atomicbatch.ErrCodeTooLarge:
			warnSmallBatches.Do(func() {
				e.logger.Warn("nats-server refuses atomic batches of 1000 records (its max_batch_size is lower); larger requests are published record by record and may be stored in part when they fail",
					zap.String("project_id", projectID), zap.Error(err))
			})
		default:
			if errors.Is(err, atomicbatch.ErrAckTimeout) {
				return 0, errAckTimeout
			}
			return 0, e.classify(projectID, err)
		}
		return e.publishAsync(ctx, projectID, subject, len(chunk),
			func(_ string, i int, _ []byte) nats.Header { return chunk[i].Header }, keyed,
			func(emit emitFunc) error {
				for _, r := range chunk {
					if err := emit("", r.Data); err != nil {
						return err
					}
				}
				return nil
			})
	}
}
