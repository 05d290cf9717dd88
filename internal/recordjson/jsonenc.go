// Package jsonenc writes the JSON strings and timestamps of flat records (see
// internal/collector/records for the conventions). It is apart from records, which reads pdata,
// so that code without the collector (the control plane's push-source preview, through
// internal/envelope) writes records byte for byte as the data plane does.
package recordjson

import (
	"time"
	"unicode/utf8"
)

const hexDigits = "0123456789abcdef"

// AppendString quotes s as a JSON string. Output is always valid UTF-8: invalid
// bytes become U+FFFD, as with encoding/json, because downstream consumers
// reject invalid UTF-8. HTML characters are left alone: nothing here is embedded
// in HTML, and escaping them would make triggers harder to write and read.
func AppendString(dst []byte, s string) []byte {
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
