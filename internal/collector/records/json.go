package records

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"math"
	"strconv"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelcol-svc/otelcol-svc/internal/recordjson"
)

// AppendValue appends the JSON form of v. Empty values become null so that a key
// is never silently dropped from an attribute object.
func AppendValue(dst []byte, v pcommon.Value) []byte {
	switch v.Type() {
	case pcommon.ValueTypeStr:
		return appendString(dst, v.Str())
	case pcommon.ValueTypeInt:
		return strconv.AppendInt(dst, v.Int(), 10)
	case pcommon.ValueTypeDouble:
		return appendFloat(dst, v.Double())
	case pcommon.ValueTypeBool:
		return strconv.AppendBool(dst, v.Bool())
	case pcommon.ValueTypeBytes:
		dst = append(dst, '"')
		dst = base64.StdEncoding.AppendEncode(dst, v.Bytes().AsRaw())
		return append(dst, '"')
	case pcommon.ValueTypeMap:
		return appendMap(dst, v.Map())
	case pcommon.ValueTypeSlice:
		return appendSlice(dst, v.Slice())
	default:
		return append(dst, "null"...)
	}
}

// AppendMap appends the JSON object of m, with the conventions of AppendValue: the one
// encoder of maps, for the records the collector produces and for those a transform
// changed (ottlevent).
func AppendMap(dst []byte, m pcommon.Map) []byte { return appendMap(dst, m) }

// AppendSlice appends the JSON array of s, with the conventions of AppendValue.
func AppendSlice(dst []byte, s pcommon.Slice) []byte { return appendSlice(dst, s) }

// appendMap keeps the map's own order: it is the order the producer sent, and
// sorting would cost time on every record for no contractual benefit.
func appendMap(dst []byte, m pcommon.Map) []byte {
	dst = append(dst, '{')
	first := true
	for k, v := range m.All() {
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = appendString(dst, k)
		dst = append(dst, ':')
		dst = AppendValue(dst, v)
	}
	return append(dst, '}')
}

func appendSlice(dst []byte, s pcommon.Slice) []byte {
	dst = append(dst, '[')
	for i := 0; i < s.Len(); i++ {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = AppendValue(dst, s.At(i))
	}
	return append(dst, ']')
}

// appendFloat writes the shortest representation that round-trips, formatted the
// way encoding/json does (no exponent for ordinary magnitudes). NaN and ±Inf have
// no JSON number form, so they become strings rather than invalid output.
func appendFloat(dst []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, `"NaN"`...)
	case math.IsInf(f, 1):
		return append(dst, `"Infinity"`...)
	case math.IsInf(f, -1):
		return append(dst, `"-Infinity"`...)
	}
	abs := math.Abs(f)
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		dst = strconv.AppendFloat(dst, f, 'e', -1, 64)
		// Turn e-07 into e-7, as encoding/json does.
		if n := len(dst); n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
		return dst
	}
	return strconv.AppendFloat(dst, f, 'f', -1, 64)
}

// AppendString appends s as a JSON string with the conventions of this package; other
// packages that write records (a transformed record) use it so all records agree.
func AppendString(dst []byte, s string) []byte { return recordjson.AppendString(dst, s) }

func appendString(dst []byte, s string) []byte { return recordjson.AppendString(dst, s) }

// AppendTimestamp appends t as a quoted RFC 3339 UTC timestamp with exactly nine
// fractional digits (recordjson.AppendTimestamp).
func AppendTimestamp(dst []byte, t time.Time) []byte { return recordjson.AppendTimestamp(dst, t) }

func appendTS(dst []byte, ts pcommon.Timestamp) []byte {
	return AppendTimestamp(dst, ts.AsTime())
}

// appendID writes a trace or span ID as lowercase hex, or "" when the ID is all
// zeros, which OTLP uses to mean "absent".
func appendID(dst []byte, id []byte) []byte {
	if bytes.Count(id, []byte{0}) == len(id) {
		return append(dst, `""`...)
	}
	dst = append(dst, '"')
	dst = hex.AppendEncode(dst, id)
	return append(dst, '"')
}
