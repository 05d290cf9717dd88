package jetstreamexporter

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
	"github.com/otelcol-svc/otelcol-svc/internal/pipelinectx"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
)

// IdempotencyBucket is the KV bucket that binds each Idempotency-Key to the request it
// first came with: key "<project id>.<hash of the key>", value the request's digest
// (pipelinectx.Ingest.RequestDigest). One bucket serves every project; entries expire.
const IdempotencyBucket = "svc-idempotency"

// errKeyCheck: the binding could not be read or written; nothing was published.
var errKeyCheck = errors.New("storage (NATS JetStream) could not check the Idempotency-Key; retry later")

// idempotency holds the bucket, opened on the first keyed request.
type idempotency struct {
	mu sync.Mutex
	kv jetstream.KeyValue
}

// idempotencyTTL is how long a binding lives: the stream's duplicate window, within which
// the key's message ids are deduplicated, plus the publish timeout. A same-request retry
// renews the binding before it publishes, and what it stores lands within the publish
// timeout, so the binding outlives every message id stored under the key: a different
// request can never reuse a key while its ids would still be dropped as duplicates.
func (e *jsExporter) idempotencyTTL() time.Duration {
	w := e.cfg.Stream.DuplicateWindow
	if w <= 0 {
		w = 2 * time.Minute // nats-server's default duplicate window
	}
	return w + e.cfg.PublishTimeout
}

func (e *jsExporter) idempotencyKV(ctx context.Context) (jetstream.KeyValue, error) {
	e.idem.mu.Lock()
	defer e.idem.mu.Unlock()
	if e.idem.kv != nil {
		return e.idem.kv, nil
	}
	cfg := jetstream.KeyValueConfig{
		Bucket: IdempotencyBucket, History: 1, TTL: e.idempotencyTTL(),
		Storage: jetstream.FileStorage, Replicas: max(e.cfg.Stream.Replicas, 1),
		Description: "otelcol-svc: each Idempotency-Key's request digest, for its duplicate window",
	}
	kv, err := e.js.KeyValue(ctx, cfg.Bucket)
	if err == nil {
		if st, serr := kv.Status(ctx); serr == nil && st.TTL() != cfg.TTL {
			// Another duplicate window or timeout configured since: bring the TTL to ours.
			if updated, uerr := e.js.UpdateKeyValue(ctx, cfg); uerr == nil {
				kv = updated
			}
		}
	} else if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = e.js.CreateKeyValue(ctx, cfg)
		if err != nil {
			// Another process created it first.
			kv, err = e.js.KeyValue(ctx, cfg.Bucket)
		}
	}
	if err != nil {
		return nil, err
	}
	e.idem.kv = kv
	return kv, nil
}

// bindKey binds the request's Idempotency-Key to its digest, or finds it bound to the same
// digest, before anything is published. KV Create is a compare-and-set, so of two
// receivers taking the same key at once with different requests exactly one publishes; the
// other answers 422 idempotency_key_reused. The same request again (a retry, also while
// the first is still being stored) goes on: its message ids make it stored once.
func (e *jsExporter) bindKey(ctx context.Context, projectID string, info pipelinectx.Ingest) error {
	cctx, cancel := context.WithTimeout(ctx, e.cfg.PublishTimeout)
	defer cancel()
	kv, err := e.idempotencyKV(cctx)
	if err != nil {
		e.logger.Warn("cannot open the Idempotency-Key bucket", zap.String("bucket", IdempotencyBucket), zap.Error(err))
		return errKeyCheck
	}
	sum := sha256.Sum256([]byte(info.IdempotencyKey))
	key := projectID + "." + hex.EncodeToString(sum[:16])
	digest := []byte(info.RequestDigest)
	// Create when the key is free (also once its binding expired), else the same digest
	// renews it, so that the binding outlives what this attempt stores (idempotencyTTL);
	// losing a round to another attempt of the same request reads its renewal and renews
	// again, which serves as well.
	_, err = streams.UpdateKV(cctx, kv, key, func(old []byte, exists bool) ([]byte, error) {
		if exists && !bytes.Equal(old, digest) {
			return nil, &pipelinectx.Throttled{Status: http.StatusUnprocessableEntity, Code: apierror.IdempotencyKeyReused,
				Err: fmt.Errorf("this Idempotency-Key was sent within the last %s with a different request (another body, path or X-Event-Type/X-Source); nothing was stored: send a new request with a new key, or this one exactly as it was",
					e.idempotencyTTL().Round(time.Second))}
		}
		return digest, nil
	})
	var reused *pipelinectx.Throttled
	if err == nil || errors.As(err, &reused) {
		return err
	}
	e.logger.Warn("cannot check an Idempotency-Key", zap.String("project_id", projectID), zap.Error(err))
	return errKeyCheck
}
