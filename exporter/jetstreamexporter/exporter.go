package jetstreamexporter

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"

	"github.com/otelcol-svc/otelcol-svc/exporter/jetstreamexporter/internal/atomicbatch"
	"github.com/otelcol-svc/otelcol-svc/exporter/jetstreamexporter/internal/fastbatch"
	"github.com/otelcol-svc/otelcol-svc/exporter/jetstreamexporter/internal/metadata"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelinedata"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/principal"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/records"
	"github.com/otelcol-svc/otelcol-svc/internal/pipelinectx"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
	"github.com/otelcol-svc/otelcol-svc/internal/usage"
)

// Errors a client sees (in a 503's message) when storage cannot take its records. They
// are retryable: nothing about the request itself is wrong.
var (
	errNotConnected = errors.New("storage (NATS JetStream) is unreachable; retry later")
	errStreamFull   = errors.New("the project's storage is full (its stream is at its limit); retry later, once the pipeline has caught up and older records expire, or raise the stream limit")
	errAckTimeout   = errors.New("storage did not confirm the records in time; retry later")
)

type jsExporter struct {
	cfg    *Config
	logger *zap.Logger

	nc *nats.Conn
	js jetstream.JetStream
	// fast publishes fast batches; nil unless cfg.Publish is PublishFastBatch.
	fast *fastbatch.Publisher
	// atomic publishes atomic batches; nil unless cfg.Publish is PublishAtomicBatch.
	atomic *atomicbatch.Publisher
	// atomicSlots holds each stream's atomic batches in flight (atomic.go).
	atomicSlots sync.Map
	// idem binds Idempotency-Keys to their request (idempotency.go).
	idem idempotency

	// ensured remembers the projects whose stream this process has created or checked,
	// and whether that stream takes the batches of the publish mode (a bool).
	ensured sync.Map
	// storage holds each project to its byte limit (storage.go).
	storage *storageGuard
	waker   *waker
	// usage is nil when cfg.Usage.Enabled is false.
	usage *metering
	tel   *metadata.TelemetryBuilder
}

func newExporter(cfg *Config, set exporter.Settings) *jsExporter {
	tel, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		// Only an instrument the meter provider refuses: the exporter works without it.
		set.Logger.Warn("cannot create the exporter's metrics", zap.Error(err))
	}
	return &jsExporter{cfg: cfg, logger: set.Logger, tel: tel}
}

func (e *jsExporter) Start(_ context.Context, host component.Host) error {
	nc, js, err := e.cfg.NATS.ConnectJetStream(host, "otelcol-svc jetstream exporter", e.logger,
		jetstream.WithPublishAsyncMaxPending(e.cfg.MaxPending),
		jetstream.WithPublishAsyncTimeout(e.cfg.PublishTimeout),
	)
	if err != nil {
		return err
	}
	if e.cfg.Publish == PublishFastBatch {
		if e.fast, err = fastbatch.New(nc, e.cfg.PublishTimeout); err != nil {
			nc.Close()
			return err
		}
	}
	if e.cfg.Publish == PublishAtomicBatch {
		if e.atomic, err = atomicbatch.New(nc); err != nil {
			nc.Close()
			return err
		}
	}
	e.nc, e.js = nc, js
	e.storage = newStorageGuard(js, e.cfg.Stream.MaxBytes, e.logger)
	e.waker = &waker{nc: nc, every: wakeInterval}
	if e.cfg.Usage.Enabled {
		e.usage = newMetering(e.cfg.Usage, e)
		if err := e.usage.start(host, js); err != nil {
			nc.Close()
			e.nc = nil
			return err
		}
	}
	return nil
}

func (e *jsExporter) Shutdown(ctx context.Context) error {
	if e.usage != nil {
		e.usage.shutdown(ctx)
	}
	if e.nc != nil {
		// Drain lets in-flight publishes complete and their acks arrive.
		_ = e.nc.Drain()
		e.nc = nil
	}
	return nil
}

func (e *jsExporter) pushLogs(ctx context.Context, ld plog.Logs) error {
	info := pipelinectx.IngestFrom(ctx)
	if info.Prebuilt != "" {
		return e.publish(ctx, info, ld.LogRecordCount(), func(emit emitFunc) error {
			return eachBody(ld, func(b []byte) error { return emit(info.Prebuilt, b) })
		})
	}
	received := time.Now()
	return e.publish(ctx, info, ld.LogRecordCount(), func(emit emitFunc) error {
		return records.FlattenLogs(ld, received, func(rec []byte) error { return emit(records.SignalLog, rec) })
	})
}

func (e *jsExporter) pushTraces(ctx context.Context, td ptrace.Traces) error {
	return e.publish(ctx, pipelinectx.IngestFrom(ctx), td.SpanCount(), func(emit emitFunc) error {
		return records.FlattenTraces(td, func(rec []byte) error { return emit(records.SignalSpan, rec) })
	})
}

func (e *jsExporter) pushMetrics(ctx context.Context, md pmetric.Metrics) error {
	return e.publish(ctx, pipelinectx.IngestFrom(ctx), md.DataPointCount(), func(emit emitFunc) error {
		return records.FlattenMetrics(md, func(rec []byte) error { return emit(records.SignalMetric, rec) })
	})
}

// eachBody walks prebuilt records: each log record's body holds one record's JSON bytes.
func eachBody(ld plog.Logs, fn func([]byte) error) error {
	for lr := range pipelinedata.All(ld) {
		if err := fn(lr.Body().Bytes().AsRaw()); err != nil {
			return err
		}
	}
	return nil
}

type emitFunc func(signal string, rec []byte) error

// publish sends every record of one request, as one fast batch or as async publishes,
// and returns once JetStream has confirmed them all. JetStream's acks, not the publishes,
// are what make the 2xx truthful.
func (e *jsExporter) publish(ctx context.Context, info pipelinectx.Ingest, n int, walk func(emitFunc) error) error {
	p, ok := principal.FromContext(ctx)
	if !ok {
		return consumererror.NewPermanent(errors.New("the request carries no authenticated project; the jetstream exporter must sit behind the projectauth authenticator with no asynchronous processor (batch) in between, which otelcol-svc validate refuses"))
	}
	if !streams.ValidProjectID(p.ProjectID) {
		return consumererror.NewPermanent(fmt.Errorf("project id %q cannot name a stream", p.ProjectID))
	}
	if n == 0 {
		return nil
	}
	recs, err := e.collect(walk, n)
	if err != nil {
		if !info.Output {
			e.usage.countRefused(p, usage.ReasonTooLarge, n)
		}
		return err
	}
	walk = recs.walk
	if e.nc == nil || !e.nc.IsConnected() {
		return errNotConnected
	}
	cfg := streams.RawConfig(p.ProjectID, e.cfg.Stream)
	if info.Output {
		cfg = streams.OutputConfig(p.ProjectID, e.cfg.Stream)
	}
	fast, err := e.ensureStream(ctx, cfg)
	if err != nil {
		return err
	}
	if err := e.storage.admit(cfg.Name); err != nil {
		return err
	}
	if info.IdempotencyKey != "" && info.RequestDigest != "" && !info.Output {
		if err := e.bindKey(ctx, p.ProjectID, info); err != nil {
			return err
		}
	}
	// Raw records count against the account's month and the project's rate; agent
	// results (and usage notices) never do. Counted before publishing, so that two
	// receivers cannot both take the account's last records; settle then gives back
	// what was not stored (usage.go): only stored records stay counted, once.
	var res usage.Reservation
	if e.usage != nil && !info.Output {
		if res, err = e.usage.reserve(ctx, p, n, info.Quota); err != nil {
			return err
		}
	}
	var size int64
	counted := func(emit emitFunc) error {
		return walk(func(signal string, rec []byte) error {
			size += int64(len(rec)) + messageOverhead
			return emit(signal, rec)
		})
	}
	added, err := e.publishTo(ctx, p.ProjectID, cfg, fast, n, info, counted)
	e.settle(ctx, p.ProjectID, res, n, keptCount(info, added, err))
	if err == nil {
		e.storage.stored(cfg.Name, size)
		kind := streams.WakeRaw
		if info.Output {
			kind = streams.WakeOutput
		}
		e.waker.wake(kind, p.ProjectID)
	}
	if err != nil && !errors.Is(err, errStreamFull) && !errors.Is(err, errStorageFull) {
		// Whatever went wrong (the stream deleted behind our back, a server restarted
		// without it, acks that never came), the next request checks the stream again
		// rather than trust what this process remembered about it.
		e.ensured.Delete(cfg.Name)
	}
	return err
}

// pendingRecords are a request's records, flattened and checked, not yet published.
type pendingRecords []pendingRecord

type pendingRecord struct {
	signal string
	rec    []byte
}

func (p pendingRecords) walk(emit emitFunc) error {
	for _, r := range p {
		if err := emit(r.signal, r.rec); err != nil {
			return err
		}
	}
	return nil
}

// collect flattens a request's records and checks each against the record size limit
// before any is published: neither publish mode can take back what it stored, so a
// request failing on its n-th record would leave the first n-1 stored on every retry.
// Holding the records costs little more than before: async publishing keeps each one
// until its ack anyway.
func (e *jsExporter) collect(walk func(emitFunc) error, n int) (pendingRecords, error) {
	limit := e.recordLimit()
	recs := make(pendingRecords, 0, n)
	err := walk(func(signal string, rec []byte) error {
		if len(rec) > limit {
			return consumererror.NewPermanent(&records.TooLargeError{Index: len(recs), Size: len(rec), Limit: limit})
		}
		recs = append(recs, pendingRecord{signal: signal, rec: rec})
		return nil
	})
	return recs, err
}

// maxHeaderBytes is room kept for a message's headers below the server's max_payload,
// which counts headers and body together.
const maxHeaderBytes = 4096

// recordLimit is max_record_bytes, or less when the connected server takes smaller
// messages (max_payload is the server's setting, known only once connected).
func (e *jsExporter) recordLimit() int {
	limit := e.cfg.MaxRecordBytes
	if e.nc != nil {
		if server := int(e.nc.MaxPayload()) - maxHeaderBytes; server > 0 && server < limit {
			limit = server
		}
	}
	return limit
}

// publishTo stores a request's records on cfg's stream: as one fast batch when the stream
// takes them, else (or when the server refuses the batch before storing any of it)
// asynchronously. It returns how many records JetStream added to the stream, which is
// fewer than n when some were duplicates of messages already stored (see publishAsync).
func (e *jsExporter) publishTo(ctx context.Context, projectID string, cfg jetstream.StreamConfig, fast bool, n int, info pipelinectx.Ingest, walk func(emitFunc) error) (int, error) {
	header := headers(info, n)
	keyed := info.HasMsgIDs() && !info.Output
	if e.atomic != nil && fast && n >= 2 {
		return e.publishAtomic(ctx, projectID, cfg.Name, cfg.Subjects[0], n, header, keyed, walk)
	}
	// One record is one message either way; a batch would add an end message and an ack.
	// A request with an Idempotency-Key goes async too: a fast batch's ack counts a
	// duplicate like a stored record (nats-server 2.15 skips it silently), so only
	// per-message acks tell how many of a retried request's records were new, which
	// is what the account is charged for.
	if fast && n >= 2 && !keyed {
		err := e.publishFastBatch(ctx, projectID, cfg.Subjects[0], header, walk)
		var fe *fastbatch.Error
		if !errors.As(err, &fe) || !fe.NotStarted {
			if err != nil {
				return 0, err
			}
			return n, nil
		}
		// The server refused the batch before storing any of it: too many batches are in
		// flight on the stream, or batch publishing was switched off on it (by hand: the
		// exporters leave the flag as they find it, streams.Current; the next request sets
		// it again). This request goes the async way.
		e.logger.Debug("fast batch refused, publishing asynchronously", zap.String("project_id", projectID), zap.Error(err))
		if fe.API != nil && fe.API.ErrorCode == fastbatch.ErrCodeBatchPublishDisabled {
			e.ensured.Delete(cfg.Name)
		}
	}
	return e.publishAsync(ctx, projectID, cfg.Subjects[0], n, header, keyed, walk)
}

// headerFunc gives the headers of the i-th record of a request. The maps it returns for
// records without a message id are shared and must not be modified.
type headerFunc func(signal string, i int, rec []byte) nats.Header

func headers(info pipelinectx.Ingest, n int) headerFunc {
	// A push source's records name their source; one read-only header map serves them all.
	var sourceHeader nats.Header
	if info.SourceID != "" && !info.Output {
		sourceHeader = nats.Header{streams.HeaderSignal: []string{info.Prebuilt}, streams.HeaderSourceID: []string{info.SourceID}}
	}
	return func(signal string, i int, rec []byte) nats.Header {
		switch {
		case info.Output:
			return outputHeader(info.RequestID, info.Unmatched, rec)
		case info.MsgID(i, n) != "":
			id := info.MsgID(i, n)
			h := nats.Header{streams.HeaderSignal: []string{signal}, streams.HeaderMsgID: []string{id}}
			if info.SourceID != "" {
				h[streams.HeaderSourceID] = []string{info.SourceID}
			}
			return h
		case sourceHeader != nil:
			return sourceHeader
		default:
			return signalHeader(signal)
		}
	}
}

// publishAsync sends every record asynchronously, then waits for all acks. It returns how
// many records JetStream added: an ack flagged Duplicate (a message id already stored
// within the stream's duplicate window) added nothing.
//
// With drain set (records with message ids), a failure still waits, within the same
// publish timeout, for the acks of every record sent, so that the count includes each
// record this attempt stored: its retry will find them duplicates and not count them.
// Without message ids a retry stores everything again and the failed attempt counts
// nothing, so the first failure ends the wait, as before.
func (e *jsExporter) publishAsync(ctx context.Context, projectID, subject string, n int, header headerFunc, drain bool, walk func(emitFunc) error) (int, error) {
	futures := make([]jetstream.PubAckFuture, 0, n)
	stall := jetstream.WithStallWait(e.cfg.PublishTimeout)
	i := 0
	failed := walk(func(signal string, rec []byte) error {
		msg := &nats.Msg{Subject: subject, Data: rec, Header: header(signal, i, rec)}
		i++
		f, err := e.js.PublishMsgAsync(msg, stall)
		if err != nil {
			return e.classify(projectID, err)
		}
		futures = append(futures, f)
		return nil
	})
	if failed != nil && !drain {
		return 0, failed
	}
	timer := time.NewTimer(e.cfg.PublishTimeout)
	defer timer.Stop()
	added := 0
	for _, f := range futures {
		select {
		case ack := <-f.Ok():
			if !ack.Duplicate {
				added++
			}
		case err := <-f.Err():
			if failed == nil {
				failed = e.classify(projectID, err)
			}
			if !drain {
				return added, failed
			}
		case <-timer.C:
			// The records still unacknowledged may be stored yet: counted by nobody if
			// they are (the retry finds them duplicates), never counted twice.
			return added, cmp.Or(failed, errAckTimeout)
		case <-ctx.Done():
			return added, cmp.Or(failed, errAckTimeout)
		}
	}
	return added, failed
}

// publishFastBatch sends every record as one fast batch (internal/fastbatch) and waits for the
// commit's PubAck, which counts every stored record. Message ids would work as with async
// publishing (the server deduplicates each message of a batch against the stream's
// duplicate window, skips a duplicate and still counts it), but the PubAck cannot tell
// how many were duplicates, so publishTo sends requests with message ids async. Errors
// are those of the async path; a *fastbatch.Error with NotStarted set means nothing was
// stored and the caller may publish otherwise.
func (e *jsExporter) publishFastBatch(ctx context.Context, projectID, subject string, header headerFunc, walk func(emitFunc) error) error {
	if err := ctx.Err(); err != nil {
		return errAckTimeout
	}
	b := e.fast.Begin(subject)
	defer e.fast.End(b)
	i := 0
	err := walk(func(signal string, rec []byte) error {
		err := b.Add(ctx, rec, header(signal, i, rec))
		i++
		return err
	})
	if err == nil {
		err = b.Commit(ctx)
	}
	if err == nil {
		return nil
	}
	b.Abandon()
	var fe *fastbatch.Error
	if errors.As(err, &fe) && fe.NotStarted {
		return fe
	}
	if errors.Is(err, fastbatch.ErrAckTimeout) {
		return errAckTimeout
	}
	if errors.Is(err, fastbatch.ErrProtocol) {
		e.logger.Warn("fast batch publishing failed; it needs nats-server 2.14 or later", zap.String("project_id", projectID), zap.Error(err))
	}
	return e.classify(projectID, err)
}

// signalHeaders are shared, read-only headers of records without a message id: one map
// per record was a measurable share of the ingest path's allocations.
// nats.go writes to a message's headers only for publish options we do not use (message
// id, expectations); pass such options and these must become per-message copies.
var signalHeaders = func() map[string]nats.Header {
	m := map[string]nats.Header{}
	for _, s := range []string{records.SignalLog, records.SignalSpan, records.SignalMetric, records.SignalEvent, records.SignalSource} {
		m[s] = nats.Header{streams.HeaderSignal: []string{s}}
	}
	return m
}()

func signalHeader(signal string) nats.Header {
	if h, ok := signalHeaders[signal]; ok {
		return h
	}
	return nats.Header{streams.HeaderSignal: []string{signal}}
}

// outputHeader carries an agent result's request id, and whether the service issued it
// to the project; its message id makes the same result posted twice (an agent retrying)
// one message, while different results for one request are all kept.
func outputHeader(requestID string, unmatched bool, payload []byte) nats.Header {
	sum := sha256.Sum256(payload)
	h := nats.Header{
		streams.HeaderSignal:    []string{"agent_output"},
		streams.HeaderRequestID: []string{requestID},
		streams.HeaderMsgID:     []string{"out:" + requestID + ":" + hex.EncodeToString(sum[:12])},
	}
	if unmatched {
		h[streams.HeaderUnmatched] = []string{"1"}
	}
	return h
}

// ensureStream creates or updates the stream once per process and reports whether it
// takes the batches of the publish mode: in fast batch mode the stream is created or
// updated with AllowBatchPublish (kept by nats-server 2.14+), in atomic batch mode with
// AllowAtomicPublish (2.12+); an older server drops the flag.
func (e *jsExporter) ensureStream(ctx context.Context, cfg jetstream.StreamConfig) (bool, error) {
	if v, ok := e.ensured.Load(cfg.Name); ok {
		return v.(bool), nil
	}
	cctx, cancel := context.WithTimeout(ctx, e.cfg.PublishTimeout)
	defer cancel()
	cfg.AllowBatchPublish = e.fast != nil
	cfg.AllowAtomicPublish = e.atomic != nil
	si, err := streams.EnsureInfo(cctx, e.js, cfg)
	if err != nil {
		if streams.IsStorageFull(err) {
			e.logger.Error("cannot create stream: nats-server's JetStream store is full (raise its max_store or free disk)", zap.String("stream", cfg.Name), zap.Error(err))
			return false, errStorageFull
		}
		e.logger.Warn("cannot create stream", zap.String("stream", cfg.Name), zap.Error(err))
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) {
			// JetStream answered, so it is not unreachable: say what it refused.
			return false, fmt.Errorf("storage (NATS JetStream) refused to prepare the project's stream (%v); retry later", apiErr)
		}
		return false, errNotConnected
	}
	e.storage.known(si)
	fast := false
	if e.fast != nil {
		if fast = si.Config.AllowBatchPublish; !fast {
			e.logger.Warn("the stream does not take fast batches (nats-server 2.14 or later is needed); publishing asynchronously", zap.String("stream", cfg.Name))
		}
	}
	if e.atomic != nil {
		if fast = si.Config.AllowAtomicPublish; !fast {
			e.logger.Warn("the stream does not take atomic batches (nats-server 2.12 or later is needed); publishing asynchronously, so a request that fails may be stored in part", zap.String("stream", cfg.Name))
		}
	}
	e.ensured.Store(cfg.Name, fast)
	return fast, nil
}

// classify turns a publish failure into the error the client is told about.
func (e *jsExporter) classify(projectID string, err error) error {
	var apiErr *jetstream.APIError
	switch {
	case errors.As(err, &apiErr) && apiErr.ErrorCode == 10047:
		e.logger.Error("publish refused: nats-server's JetStream store is full (raise its max_store or free disk)", zap.String("project_id", projectID), zap.Error(err))
		return errStorageFull
	case errors.As(err, &apiErr) && isStoreFull(apiErr):
		return errStreamFull
	case errors.Is(err, nats.ErrMaxPayload), errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamMessageExceedsMaximum:
		// collect checked the sizes, so this is a server whose max_payload shrank since, or
		// a stream with a smaller max_msg_size: retrying cannot help.
		e.logger.Warn("a record is larger than the NATS server or stream accepts; lower max_record_bytes", zap.String("project_id", projectID), zap.Error(err))
		return consumererror.NewPermanent(&records.TooLargeError{Index: -1, Limit: e.recordLimit()})
	case errors.Is(err, nats.ErrConnectionClosed), errors.Is(err, nats.ErrConnectionDraining), errors.Is(err, nats.ErrConnectionReconnecting), errors.Is(err, nats.ErrDisconnected):
		return errNotConnected
	case errors.Is(err, jetstream.ErrNoStreamResponse), errors.Is(err, nats.ErrNoResponders):
		// The stream was deleted behind our back; create it again on the next request.
		e.ensured.Delete(streams.RawStream(projectID))
		e.ensured.Delete(streams.OutputStream(projectID))
		return errNotConnected
	case errors.Is(err, jetstream.ErrAsyncPublishTimeout), errors.Is(err, jetstream.ErrTooManyStalledMsgs):
		return errAckTimeout
	default:
		// Not known to be permanent (JetStream answers such as "no quorum" pass), so the
		// client may retry; but the log and the answer say what happened rather than
		// blame an unreachable server.
		e.logger.Warn("publish failed", zap.String("project_id", projectID), zap.Error(err))
		return fmt.Errorf("storage (NATS JetStream) refused the records (%v); retry later", err)
	}
}

// isStoreFull recognises a DiscardNew refusal: nats-server answers 10077 (store failed)
// with "maximum bytes exceeded" / "maximum messages exceeded", or 10047 when the
// server's JetStream storage as a whole is exhausted.
func isStoreFull(e *jetstream.APIError) bool {
	return e.ErrorCode == 10047 || e.ErrorCode == 10077 && strings.Contains(e.Description, "maximum")
}
