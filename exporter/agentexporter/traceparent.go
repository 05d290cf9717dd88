package agentexporter

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"math/rand/v2"
)

// W3C trace context (https://www.w3.org/TR/trace-context/): every agent call carries
// traceparent "00-<trace id>-<span id>-01", the trace id of the record that triggered it
// when it has one, so the customer's agent can join its own spans to the telemetry that
// caused the call.

// traceparent is the header's value for a call in trace traceID with a new span id.
func traceparent(traceID string) string {
	var span [8]byte
	for {
		binary.LittleEndian.PutUint64(span[:], rand.Uint64())
		if span != [8]byte{} { // the all-zero span id is invalid
			break
		}
	}
	b := make([]byte, 0, 55)
	b = append(b, "00-"...)
	b = append(b, traceID...)
	b = append(b, '-')
	b = hex.AppendEncode(b, span[:])
	return string(append(b, "-01"...))
}

// newTraceID is a random trace id for a call whose records carry none. Not a secret, so
// math/rand's generator (seeded from the system's randomness) is enough.
func newTraceID() string {
	var t [16]byte
	for t == [16]byte{} {
		binary.LittleEndian.PutUint64(t[:8], rand.Uint64())
		binary.LittleEndian.PutUint64(t[8:], rand.Uint64())
	}
	return hex.EncodeToString(t[:])
}

var traceIDKey = []byte(`"traceId"`)

// recordTraceID is the "traceId" of a record (span and log records have one,
// docs/contract.md#section-4), or of a window call's trigger; "" when it has none or it is not a valid W3C
// trace id (32 lowercase hex, not all zero).
//
// It reads only the top level of the JSON object, never decoding it: records are sent
// byte for byte and most are small, but an attribute may be large, and this runs for
// every call. A record without the key anywhere costs one bytes.Index.
func recordTraceID(body []byte, window bool) string {
	if !bytes.Contains(body, traceIDKey) {
		return ""
	}
	if window {
		trigger, ok := topLevel(body, "trigger")
		if !ok {
			return ""
		}
		body = trigger
	}
	v, ok := topLevel(body, "traceId")
	if !ok || len(v) != 34 || v[0] != '"' || v[33] != '"' {
		return ""
	}
	id := v[1:33]
	zero := true
	for _, c := range id {
		switch {
		case c >= '0' && c <= '9', c >= 'a' && c <= 'f':
			if c != '0' {
				zero = false
			}
		default:
			return ""
		}
	}
	if zero {
		return ""
	}
	return string(id)
}

// topLevel returns the raw value of key in the JSON object b (top level only; a key
// written with escapes does not match). Malformed input yields false, never a panic.
func topLevel(b []byte, key string) ([]byte, bool) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return nil, false
	}
	i++
	for {
		i = skipSpace(b, i)
		if i >= len(b) || b[i] != '"' {
			return nil, false
		}
		end := skipString(b, i)
		if end < 0 {
			return nil, false
		}
		k := b[i+1 : end-1]
		i = skipSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return nil, false
		}
		i = skipSpace(b, i+1)
		vend := skipValue(b, i)
		if vend < 0 {
			return nil, false
		}
		if string(k) == key {
			return b[i:vend], true
		}
		i = skipSpace(b, vend)
		if i >= len(b) || b[i] != ',' {
			return nil, false
		}
		i++
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the string starting at b[i] == '"', or -1. It jumps
// from quote to quote (bytes.IndexByte), counting the backslashes before each.
func skipString(b []byte, i int) int {
	start := i
	i++
	for {
		j := bytes.IndexByte(b[i:], '"')
		if j < 0 {
			return -1
		}
		i += j
		n := 0
		for k := i - 1; k > start && b[k] == '\\'; k-- {
			n++
		}
		if n%2 == 0 {
			return i + 1
		}
		i++
	}
}

// skipValue returns the index after the value starting at b[i], or -1. Objects and
// arrays are skipped by counting brackets outside strings.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				end := skipString(b, i)
				if end < 0 {
					return -1
				}
				i = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
		return -1
	}
	start := i
	for i < len(b) && b[i] != ',' && b[i] != '}' && b[i] != ']' && b[i] != ' ' && b[i] != '\t' && b[i] != '\n' && b[i] != '\r' {
		i++
	}
	if i == start {
		return -1
	}
	return i
}
