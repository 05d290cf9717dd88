package deliverylog

import (
	"encoding/base64"
	"encoding/json"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"
)

// appendDelivery appends d as encoding/json would encode it, byte for byte
// (TestAppendDeliveryIsEncodingJSON, FuzzAppendDelivery). Hand-written because the
// writer encodes every delivery it logs and encoding/json's reflection (its map of
// request headers above all, and a Marshaler call for every time) was half of the
// writer's CPU; no library in the module encodes this struct with omitzero as
// encoding/json does. A time encoding/json refuses (a year past 9999, an offset of a
// day) goes through encoding/json, which reports the error.
func appendDelivery(b []byte, d *Delivery) ([]byte, error) {
	if !jsonTime(d.CreatedAt) || !jsonTime(d.UpdatedAt) || !jsonTime(d.NextAttemptAt) {
		return appendStd(b, d)
	}
	for i := range d.AttemptLog {
		if !jsonTime(d.AttemptLog[i].At) {
			return appendStd(b, d)
		}
	}
	b = append(b, `{"id":`...)
	b = appendString(b, d.ID)
	b = append(b, `,"kind":`...)
	b = appendString(b, d.Kind)
	b = append(b, `,"sink_id":`...)
	b = appendString(b, d.SinkID)
	b = append(b, `,"request_id":`...)
	b = appendString(b, d.RequestID)
	b = append(b, `,"state":`...)
	b = appendString(b, d.State)
	b = append(b, `,"attempts":`...)
	b = strconv.AppendInt(b, int64(d.Attempts), 10)
	b = append(b, `,"status_code":`...)
	b = strconv.AppendInt(b, int64(d.StatusCode), 10)
	b = append(b, `,"error":`...)
	b = appendString(b, d.Error)
	b = append(b, `,"latency_ms":`...)
	b = strconv.AppendInt(b, d.LatencyMS, 10)
	b = append(b, `,"records":`...)
	b = strconv.AppendInt(b, int64(d.Records), 10)
	b = append(b, `,"created_at":`...)
	b = appendTime(b, d.CreatedAt)
	b = append(b, `,"updated_at":`...)
	b = appendTime(b, d.UpdatedAt)
	if d.ReplayOf != "" {
		b = append(b, `,"replay_of":`...)
		b = appendString(b, d.ReplayOf)
	}
	if d.ReplayedBy != "" {
		b = append(b, `,"replayed_by":`...)
		b = appendString(b, d.ReplayedBy)
	}
	if d.SinkKind != "" {
		b = append(b, `,"sink_kind":`...)
		b = appendString(b, d.SinkKind)
	}
	if len(d.Seqs) > 0 {
		b = append(b, `,"seqs":[`...)
		for i, s := range d.Seqs {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendUint(b, s, 10)
		}
		b = append(b, ']')
	}
	if d.SourceSeq != 0 {
		b = append(b, `,"source_seq":`...)
		b = strconv.AppendUint(b, d.SourceSeq, 10)
	}
	if d.DeadLetterSeq != 0 {
		b = append(b, `,"dead_letter_seq":`...)
		b = strconv.AppendUint(b, d.DeadLetterSeq, 10)
	}
	if d.Unmatched {
		b = append(b, `,"unmatched":true`...)
	}
	if d.TraceID != "" {
		b = append(b, `,"trace_id":`...)
		b = appendString(b, d.TraceID)
	}
	if !d.NextAttemptAt.IsZero() {
		b = append(b, `,"next_attempt_at":`...)
		b = appendTime(b, d.NextAttemptAt)
	}
	if len(d.AttemptLog) > 0 {
		b = append(b, `,"attempt_log":[`...)
		for i := range d.AttemptLog {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendAttempt(b, &d.AttemptLog[i])
		}
		b = append(b, ']')
	}
	if len(d.RequestBody) > 0 {
		b = append(b, `,"request_body":"`...)
		b = base64.StdEncoding.AppendEncode(b, d.RequestBody)
		b = append(b, '"')
	}
	if d.RequestTruncated {
		b = append(b, `,"request_truncated":true`...)
	}
	if len(d.Answer) > 0 {
		b = append(b, `,"answer":"`...)
		b = base64.StdEncoding.AppendEncode(b, d.Answer)
		b = append(b, '"')
	}
	if d.AnswerTruncated {
		b = append(b, `,"answer_truncated":true`...)
	}
	return append(b, '}'), nil
}

func appendAttempt(b []byte, a *Attempt) []byte {
	b = append(b, `{"at":`...)
	b = appendTime(b, a.At)
	b = append(b, `,"status_code":`...)
	b = strconv.AppendInt(b, int64(a.StatusCode), 10)
	b = append(b, `,"error":`...)
	b = appendString(b, a.Error)
	b = append(b, `,"latency_ms":`...)
	b = strconv.AppendInt(b, a.LatencyMS, 10)
	if len(a.RequestHeaders) > 0 {
		// encoding/json writes a map's keys sorted.
		var small [MaxHeaders]string
		keys := small[:0]
		for k := range a.RequestHeaders {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b = append(b, `,"request_headers":{`...)
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, k)
			b = append(b, ':')
			b = appendString(b, a.RequestHeaders[k])
		}
		b = append(b, '}')
	}
	return append(b, '}')
}

// appendStd is encoding/json's encoding of d, without the newline Encoder adds.
func appendStd(b []byte, d *Delivery) ([]byte, error) {
	j, err := json.Marshal(d)
	if err != nil {
		return b, err
	}
	return append(b, j...), nil
}

// jsonTime says whether t is a time encoding/json encodes (Time.MarshalJSON): a year
// of four digits and an offset under a day.
func jsonTime(t time.Time) bool {
	_, off := t.Zone()
	y := t.Year()
	return y >= 0 && y <= 9999 && off > -24*3600 && off < 24*3600 && off%60 == 0
}

func appendTime(b []byte, t time.Time) []byte {
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

const hexDigits = "0123456789abcdef"

// appendString is encoding/json's string encoding (with its default HTML escaping).
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
