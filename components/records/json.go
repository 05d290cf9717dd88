package records

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"math"
	"strconv"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/collector/pdata/pcommon"
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
		s := v.Slice()
		dst = append(dst, '[')
		for i := 0; i < s.Len(); i++ {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = AppendValue(dst, s.At(i))
		}
		return append(dst, ']')
	default:
		return append(dst, "null"...)
	}
}

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

const hexDigits = "0123456789abcdef"

// AppendString appends s as a JSON string with the conventions of this package; other
// packages that write records (a transformed record) use it so all records agree.
func AppendString(dst []byte, s string) []byte { return appendString(dst, s) }

// appendString quotes s as a JSON string. Output is always valid UTF-8: invalid
// bytes become U+FFFD, as with encoding/json, because downstream consumers
// reject invalid UTF-8. HTML characters are left alone: nothing here is embedded
// in HTML, and escaping them would make triggers harder to write and read.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i++
			start = i
			continue
		}
		// U+2028 and U+2029 are valid JSON but end a line in JavaScript; escape
		// them as encoding/json does so records can be pasted into JS safely.
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// AppendTimestamp appends t as a quoted RFC 3339 UTC timestamp with exactly nine
// fractional digits. A fixed width keeps timestamps sortable as strings; the
// digits are written by hand because time.AppendFormat is a noticeable share of
// the per-record cost.
func AppendTimestamp(dst []byte, t time.Time) []byte {
	t = t.UTC()
	year, month, day := t.Date()
	if year < 0 || year > 9999 {
		dst = append(dst, '"')
		dst = t.AppendFormat(dst, "2006-01-02T15:04:05.000000000Z")
		return append(dst, '"')
	}
	hour, minute, sec := t.Clock()
	dst = append(dst, '"')
	dst = appendDigits(dst, year, 4)
	dst = append(dst, '-')
	dst = appendDigits(dst, int(month), 2)
	dst = append(dst, '-')
	dst = appendDigits(dst, day, 2)
	dst = append(dst, 'T')
	dst = appendDigits(dst, hour, 2)
	dst = append(dst, ':')
	dst = appendDigits(dst, minute, 2)
	dst = append(dst, ':')
	dst = appendDigits(dst, sec, 2)
	dst = append(dst, '.')
	dst = appendDigits(dst, t.Nanosecond(), 9)
	return append(dst, 'Z', '"')
}

// appendDigits writes the non-negative n zero-padded to width digits.
func appendDigits(dst []byte, n, width int) []byte {
	var buf [9]byte
	for i := width - 1; i >= 0; i-- {
		buf[i] = byte('0' + n%10)
		n /= 10
	}
	return append(dst, buf[:width]...)
}

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
