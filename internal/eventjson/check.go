package eventjson

import (
	"fmt"
	"unicode/utf8"
)

// MaxDepth is how deeply JSON may nest on every path that takes JSON (events, batches,
// push sources, agent results, OTLP/JSON): encoding/json's own limit, which the event
// paths always had, made explicit so that OTLP/JSON (decoded by pdata, which has none)
// stops at the same depth.
const MaxDepth = 10000

// Check applies the rules every JSON body must meet beyond syntax, in one pass over its
// bytes: it is UTF-8 (RFC 8259 section 8.1; encoding/json and pdata would otherwise store
// invalid bytes or turn them into U+FFFD silently), its \u escapes encode characters (no
// lone UTF-16 surrogate, which stands for no character), and it nests at most MaxDepth
// deep. Syntax is left to the parser that follows; on invalid JSON, Check may report
// nothing. Errors are *Error with Syntax set and the byte offset in the message.
func Check(b []byte) error {
	depth := 0
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '{', '[':
			if depth++; depth > MaxDepth {
				return checkError(i, fmt.Sprintf("the JSON nests deeper than %d levels", MaxDepth))
			}
		case '}', ']':
			depth--
		case '"':
			end, err := checkString(b, i+1)
			if err != nil {
				return err
			}
			i = end
		default:
			if b[i] >= utf8.RuneSelf {
				if r, size := utf8.DecodeRune(b[i:]); r == utf8.RuneError && size <= 1 {
					return checkError(i, "invalid UTF-8 (JSON text must be UTF-8)")
				}
			}
		}
	}
	return nil
}

// checkString checks the string whose contents start at i and returns the offset of its
// closing quote (len(b) when it has none, which the parser reports).
func checkString(b []byte, i int) (int, error) {
	for i < len(b) {
		c := b[i]
		switch {
		case c == '"':
			return i, nil
		case c == '\\':
			if i+1 < len(b) && b[i+1] == 'u' {
				r, ok := hex4(b, i+2)
				switch {
				case !ok:
					// Not a valid escape: a syntax error for the parser.
				case r >= 0xDC00 && r <= 0xDFFF:
					return 0, checkError(i, fmt.Sprintf(`a lone UTF-16 surrogate \u%04x, which encodes no character`, r))
				case r >= 0xD800 && r <= 0xDBFF:
					low, ok := rune(0), false
					if i+7 < len(b) && b[i+6] == '\\' && b[i+7] == 'u' {
						low, ok = hex4(b, i+8)
					}
					if !ok || low < 0xDC00 || low > 0xDFFF {
						return 0, checkError(i, fmt.Sprintf(`a lone UTF-16 surrogate \u%04x, which encodes no character`, r))
					}
					i += 12
					continue
				}
			}
			i += 2
		case c < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size <= 1 {
				return 0, checkError(i, "invalid UTF-8 (JSON text must be UTF-8)")
			}
			i += size
		}
	}
	return len(b), nil
}

// hex4 decodes the four hex digits at b[i:i+4].
func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

func checkError(offset int, what string) *Error {
	return &Error{Index: -1, Syntax: true, Msg: fmt.Sprintf("invalid JSON at byte %d: %s", offset, what)}
}
