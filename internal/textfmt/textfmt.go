// Package textfmt renders the short texts people read: a chat message from an agent's
// result, a push source's display text. Templates use {field} and {a.b.c} placeholders
// over a JSON payload's fields; a missing field renders empty, so one template serves
// payloads that differ a little.
package textfmt

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
)

// Decode reads a JSON payload for Resolve and Render, keeping numbers as their text
// (12345678901234567890 and 1.50 render as sent).
func Decode(payload []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// Resolve follows a dot path (a.b.c; a numeric segment indexes an array) through a
// decoded payload. ok is false when any segment is missing.
func Resolve(doc any, path string) (any, bool) {
	if path == "" {
		return nil, false
	}
	cur := doc
	for _, seg := range strings.Split(path, ".") {
		switch v := cur.(type) {
		case map[string]any:
			next, ok := v[seg]
			if !ok {
				return nil, false
			}
			cur = next
		case []any:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(v) {
				return nil, false
			}
			cur = v[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// String is how a value appears in a text: strings as they are, numbers as sent,
// null as empty, objects and arrays as compact JSON.
func String(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case json.Number:
		return x.String()
	case bool:
		return strconv.FormatBool(x)
	default:
		b, err := json.Marshal(x)
		if err != nil {
			return ""
		}
		return string(b)
	}
}

// Render fills a template's placeholders from doc. It returns the text and the
// placeholders that named no field (rendered empty), for a preview to warn about. "{{"
// and "}}" write literal braces; a "{" without its "}" is kept as written.
func Render(tpl string, doc any) (string, []string) {
	text, _, missing, _ := render(tpl, doc, func(s string) string { return s })
	return text, missing
}

// render is Render with each substituted value passed through esc (the template's own
// text is kept as written), also counting the placeholders that named a field and
// returning where the substituted values are in the text (byte ranges, in order).
func render(tpl string, doc any, esc func(string) string) (string, int, []string, [][2]int) {
	var b strings.Builder
	var missing []string
	var spans [][2]int
	found := 0
	for i := 0; i < len(tpl); {
		c := tpl[i]
		switch {
		case c == '{' && i+1 < len(tpl) && tpl[i+1] == '{':
			b.WriteByte('{')
			i += 2
		case c == '}' && i+1 < len(tpl) && tpl[i+1] == '}':
			b.WriteByte('}')
			i += 2
		case c == '{':
			end := strings.IndexByte(tpl[i+1:], '}')
			if end < 0 {
				b.WriteString(tpl[i:])
				return b.String(), found, missing, spans
			}
			path := strings.TrimSpace(tpl[i+1 : i+1+end])
			if v, ok := Resolve(doc, path); ok {
				start := b.Len()
				b.WriteString(esc(String(v)))
				spans = append(spans, [2]int{start, b.Len()})
				found++
			} else {
				missing = append(missing, path)
			}
			i += end + 2
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String(), found, missing, spans
}

// Placeholders lists a template's placeholders, for checking a template when it is saved.
func Placeholders(tpl string) []string {
	var out []string
	for i := 0; i < len(tpl); i++ {
		if tpl[i] == '{' {
			if i+1 < len(tpl) && tpl[i+1] == '{' {
				i++
				continue
			}
			if end := strings.IndexByte(tpl[i+1:], '}'); end >= 0 {
				out = append(out, strings.TrimSpace(tpl[i+1:i+1+end]))
				i += end + 1
			}
		}
	}
	return out
}
