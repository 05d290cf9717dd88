// Package pipelinedata is how flat records travel through the collector pipeline of the
// pipeline role (and agent results through the sink role's), from the JetStream receiver through the trigger and window processors to
// the agent exporter. Each record is one plog.LogRecord whose body holds the record's JSON
// bytes exactly as they sit on the stream, so a record no transform touched reaches the
// agent byte for byte; metadata rides beside the record, never in it.
//
// What every item has rides in the log record's own fields, which cost no allocation:
// the signal in SeverityText, the kind in EventName (empty for KindRecord) and the stream
// sequence in ObservedTimestamp. Attributes carried them before, three allocations per
// record (the attribute storage and two values) in a pipeline that drops most records
// unread. What only some items have rides in attributes (Attr*).
//
// The project is not here: it is the request's authenticated identity (internal/collector/principal),
// set by the JetStream receiver for each project's consumer.
package pipelinedata

import (
	"iter"
	"unsafe"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
)

// Attribute names.
const (
	// AttrSuppressed is how many triggers of the record's dedup key a cooldown held back
	// since the last call for it, present only when some were: the agent
	// exporter tells the agent in a header.
	AttrSuppressed = "svc.suppressed"
	// AttrGroup is a window call's group key, present only when not empty: the agent
	// exporter delivers the calls of one group in order and different groups in parallel.
	AttrGroup = "svc.group"
	// AttrError is why a KindFailed item cannot be sent.
	AttrError = "svc.error"

	// The sink role's items: an agent result bound for one destination.
	AttrSink      = "svc.sink"       // the destination (sink id) the result is for
	AttrRequestID = "svc.request_id" // the agent call the result answers
	AttrMsgID     = "svc.msg_id"     // the output message's id: stable across redeliveries
	// AttrUnmatched is present (true) on a result whose request id was never issued to
	// the project.
	AttrUnmatched = "svc.unmatched"
)

// Kinds of item.
const (
	// KindRecord is a flat record; the agent gets such records in JSON-array batches.
	KindRecord = "record"
	// KindWindowCall is a finished window-mode call body, {"trigger": ..., "window": [...]},
	// sent to the agent on its own.
	KindWindowCall = "window_call"
	// KindFailed is a record (or window call) the pipeline cannot send, with why in
	// AttrError (a transform grew it past the record limit): the agent exporter settles
	// it as a dead-lettered delivery showing the error, without calling the agent, so it
	// is neither sent nor redelivered.
	KindFailed = "failed"
	// KindResult is an agent result from an output stream, to be delivered to the
	// destination named by AttrSink.
	KindResult = "result"
	// KindIncidentCall is a finished incident-mode call body (docs/incidents.md), made by
	// the incident processor under the request id it issued and recorded in AttrRequestID
	// (the same on every attempt, and after a takeover by another process), sent on its own.
	KindIncidentCall = "incident_call"
)

// Item is one record (or window call) in a pipeline batch.
type Item struct {
	// Body is the record's bytes. The batch shares them with whoever gave them to Append
	// and whoever takes them from Read: neither may change them.
	Body   []byte
	Signal string // records.Signal*: log, span, metric, event, source
	Kind   string // Kind*
	Seq    uint64 // the stream sequence: stable across redeliveries
	// Suppressed is what a cooldown held back before this record passed (0: none).
	Suppressed int64
	// Group is a window call's group key ("" for legacy records and the empty group).
	Group string
	// Error is why a KindFailed item cannot be sent.
	Error string

	// Set on KindResult items only (RequestID also on KindIncidentCall).
	SinkID    string
	RequestID string
	MsgID     string
	Unmatched bool
}

// Append adds an item to a batch. The batch keeps it.Body itself, not a copy: the caller
// must not change those bytes afterwards (a NATS message's data, a body just built).
func Append(lrs plog.LogRecordSlice, it Item) {
	lr := lrs.AppendEmpty()
	setBody(lr, it.Body)
	lr.SetSeverityText(it.Signal)
	if it.Kind != KindRecord {
		lr.SetEventName(it.Kind)
	}
	lr.SetObservedTimestamp(pcommon.Timestamp(it.Seq))
	var attrs pcommon.Map
	put := func() pcommon.Map {
		if attrs == (pcommon.Map{}) {
			attrs = lr.Attributes()
		}
		return attrs
	}
	if it.Suppressed > 0 {
		put().PutInt(AttrSuppressed, it.Suppressed)
	}
	if it.Group != "" {
		put().PutStr(AttrGroup, it.Group)
	}
	if it.Error != "" {
		put().PutStr(AttrError, it.Error)
	}
	if it.Kind == KindIncidentCall {
		put().PutStr(AttrRequestID, it.RequestID)
	}
	if it.Kind == KindResult {
		put().PutStr(AttrSink, it.SinkID)
		put().PutStr(AttrRequestID, it.RequestID)
		put().PutStr(AttrMsgID, it.MsgID)
		if it.Unmatched {
			put().PutBool(AttrUnmatched, true)
		}
	}
}

// New returns an empty batch and the slice to Append to.
func New() (plog.Logs, plog.LogRecordSlice) {
	ld := plog.NewLogs()
	lrs := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords()
	return ld, lrs
}

// Read returns the item a log record carries.
func Read(lr plog.LogRecord) Item {
	it := Item{Body: body(lr), Signal: lr.SeverityText(), Kind: KindOf(lr), Seq: uint64(lr.ObservedTimestamp())}
	attrs := lr.Attributes()
	if attrs.Len() == 0 {
		return it // most records: nothing more to look for
	}
	if v, ok := attrs.Get(AttrSuppressed); ok {
		it.Suppressed = v.Int()
	}
	if v, ok := attrs.Get(AttrGroup); ok {
		it.Group = v.Str()
	}
	if v, ok := attrs.Get(AttrError); ok {
		it.Error = v.Str()
	}
	if it.Kind == KindIncidentCall {
		v, _ := attrs.Get(AttrRequestID)
		it.RequestID = v.Str()
	}
	if it.Kind == KindResult {
		str := func(name string) string {
			v, _ := attrs.Get(name)
			return v.Str()
		}
		it.SinkID, it.RequestID, it.MsgID = str(AttrSink), str(AttrRequestID), str(AttrMsgID)
		if v, ok := attrs.Get(AttrUnmatched); ok {
			it.Unmatched = v.Bool()
		}
	}
	return it
}

// KindOf is the kind of item a log record carries, without reading the rest of it.
func KindOf(lr plog.LogRecord) string {
	if k := lr.EventName(); k != "" {
		return k
	}
	return KindRecord
}

// SetSuppressed records on a record passed through a cooldown how many triggers of its
// key were held back before it (n > 0).
func SetSuppressed(lr plog.LogRecord, n int64) {
	if n > 0 {
		lr.Attributes().PutInt(AttrSuppressed, n)
	}
}

// SetFailed makes a record a KindFailed item: it goes on to the agent exporter as it was
// stored, to be settled with the error instead of sent.
func SetFailed(lr plog.LogRecord, reason string) {
	lr.SetEventName(KindFailed)
	lr.Attributes().PutStr(AttrError, reason)
}

// SetBody replaces a record's bytes, after a transform changed it. As with Append, the
// record keeps b itself.
func SetBody(lr plog.LogRecord, b []byte) {
	setBody(lr, b)
}

// setBody and body keep a record's bytes in the log record's body as a string that
// shares their memory. pdata copies a bytes body on the way in (FromRaw) and again on
// the way out (AsRaw): two copies of every record, its largest allocations, in a
// pipeline that drops 99% of them unread. A string value is neither copied in nor out,
// and pdata never changes a string in place, so sharing is safe as long as the bytes
// themselves are not changed, which Append and Read ask of their callers.
func setBody(lr plog.LogRecord, b []byte) {
	lr.Body().SetStr(unsafe.String(unsafe.SliceData(b), len(b)))
}

func body(lr plog.LogRecord) []byte {
	switch v := lr.Body(); v.Type() {
	case pcommon.ValueTypeStr:
		s := v.Str()
		return unsafe.Slice(unsafe.StringData(s), len(s))
	case pcommon.ValueTypeBytes:
		return v.Bytes().AsRaw() // a batch built without Append
	default:
		return nil
	}
}

// All yields every log record of a batch, in order: the one walk over the
// resource/scope/record nesting, for this package's items and for the prebuilt records
// the jetstream exporter publishes.
func All(ld plog.Logs) iter.Seq[plog.LogRecord] {
	return func(yield func(plog.LogRecord) bool) {
		rls := ld.ResourceLogs()
		for i := 0; i < rls.Len(); i++ {
			sls := rls.At(i).ScopeLogs()
			for j := 0; j < sls.Len(); j++ {
				lrs := sls.At(j).LogRecords()
				for k := 0; k < lrs.Len(); k++ {
					if !yield(lrs.At(k)) {
						return
					}
				}
			}
		}
	}
}

// Each calls fn for every log record of a batch, in order.
func Each(ld plog.Logs, fn func(lr plog.LogRecord)) {
	for lr := range All(ld) {
		fn(lr)
	}
}

// RemoveIf drops the log records for which drop returns true.
func RemoveIf(ld plog.Logs, drop func(lr plog.LogRecord) bool) {
	rls := ld.ResourceLogs()
	for i := 0; i < rls.Len(); i++ {
		sls := rls.At(i).ScopeLogs()
		for j := 0; j < sls.Len(); j++ {
			sls.At(j).LogRecords().RemoveIf(drop)
		}
	}
}
