package ottlevent

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.uber.org/zap/zapcore"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/records"
)

// Signals a record can come from (the Svc-Signal header, docs/contract.md#section-4).
const (
	SignalLog    = "log"
	SignalSpan   = "span"
	SignalMetric = "metric"
	SignalEvent  = "event"
	SignalSource = "source"
)

// Record is one flat record being evaluated or transformed; it is the OTTL
// transform context of this package. A Record is not safe for concurrent use, but
// compiled expressions are, so each goroutine evaluates its own records.
type Record struct {
	m       pcommon.Map
	signal  string
	changed bool
	// writes counts writes (and hand-outs of the map, which an editor may change), so
	// Apply checks the record's size only after a statement that may have grown it.
	writes uint64
	// max is the record's size limit (limits.go); 0 is DefaultMaxRecordBytes.
	max int
	// top indexes the top-level fields every trigger reads (see topFields), so that
	// a path like severity_number costs no search of the record's keys: that search
	// is the main cost the event context adds over OTTL's log context, which reads
	// a struct field. indexed says top may be used; it is cleared for good by
	// anything that could move the top-level entries (a write, or handing out the
	// record's map, which an editor may then change in place).
	top     [numTopFields]pcommon.Value
	present uint32 // bit i set: top[i] holds the field
	indexed bool
}

// topFields are the fields indexed by Record.top: those of docs/contract.md#section-4 that
// triggers and group keys commonly name, and the snake_case names the aliases fall
// back to.
var topFields = [...]string{
	"resourceAttributes", "severityNumber", "severityText", "body", "attributes",
	"traceId", "spanId", "status", "name", "_event_type", "_source", "timestamp",
	"payload", "labels", "trace_id", "span_id",
}

const numTopFields = len(topFields)

func topSlot(key string) int {
	switch key {
	case "resourceAttributes":
		return 0
	case "severityNumber":
		return 1
	case "severityText":
		return 2
	case "body":
		return 3
	case "attributes":
		return 4
	case "traceId":
		return 5
	case "spanId":
		return 6
	case "status":
		return 7
	case "name":
		return 8
	case "_event_type":
		return 9
	case "_source":
		return 10
	case "timestamp":
		return 11
	case "payload":
		return 12
	case "labels":
		return 13
	case "trace_id":
		return 14
	case "span_id":
		return 15
	}
	return -1
}

// index fills r.top from the record's map, once it is complete.
func (r *Record) index() {
	for k, v := range r.m.All() {
		if i := topSlot(k); i >= 0 {
			r.top[i] = v
			r.present |= 1 << i
		}
	}
	r.indexed = true
}

// lookupTop returns the top-level field key, whose slot in top is slot (-1 if it
// has none).
func (r *Record) lookupTop(key string, slot int) (pcommon.Value, bool) {
	if slot >= 0 && r.indexed {
		return r.top[slot], r.present&(1<<slot) != 0
	}
	return r.m.Get(key)
}

// unindex stops the use of r.top: after a write, its entries may point to moved or
// removed fields.
func (r *Record) unindex() {
	if r.indexed {
		r.indexed = false
		r.top = [numTopFields]pcommon.Value{}
	}
}

// NewRecord wraps m, which the record then owns: statements modify it in place.
func NewRecord(m pcommon.Map, signal string) *Record {
	r := &Record{m: m, signal: signal}
	r.index()
	return r
}

// Changed reports whether a statement wrote to the record. It is set by any write,
// even one that leaves the same content (delete_key of a missing key, set to the
// current value): a deep comparison would cost more than re-encoding the rare record
// a no-op write touched, and the record stays equivalent JSON either way.
func (r *Record) Changed() bool { return r.changed }

// Map returns the record's map. Writes through it are not tracked by Changed.
func (r *Record) Map() pcommon.Map {
	r.writes++
	r.unindex()
	return r.m
}

// Signal returns the kind of record (log, span, metric, event or source).
func (r *Record) Signal() string { return r.signal }

// AppendJSON appends the record as one JSON object, in the map's key order, with
// values written by records.AppendValue so that a changed record follows the same
// conventions as the records the collector produced (NaN and ±Inf as strings, bytes
// as base64, empty values as null).
func (r *Record) AppendJSON(dst []byte) []byte {
	// r.m directly, not Map(): encoding does not write, so the index stays valid.
	return records.AppendMap(dst, r.m)
}

// MarshalLogObject lets OTTL's debug logging show the record being transformed.
func (r *Record) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	enc.AddString("signal", r.signal)
	enc.AddByteString("record", r.AppendJSON(nil))
	enc.AddBool("changed", r.changed)
	return nil
}
