// Package eventjson reads JSON events as clients send them and keeps their bytes: a record
// on the stream is the object as sent (large integers and number text like 1.50 survive
// untouched), so nothing here decodes values into Go types.
package eventjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// Error is a client mistake in a body. Index is the element it concerns in a batch, or -1
// for the body as a whole. Syntax is true when the bytes are not JSON at all (answered as
// invalid_json), false when they are JSON of the wrong shape (invalid_body). Limit is set
// when the body holds more objects than the caller's maximum (answered as
// payload_too_large); it is that maximum.
type Error struct {
	Index  int
	Syntax bool
	Limit  int
	Msg    string
}

// tooMany is the error of a body with more than max objects.
func tooMany(max int) *Error {
	return &Error{Index: -1, Limit: max, Msg: fmt.Sprintf("the body holds more than %d objects; send at most %d per request", max, max)}
}

func (e *Error) Error() string {
	if e.Index >= 0 {
		return fmt.Sprintf("element %d: %s", e.Index, e.Msg)
	}
	return e.Msg
}

// Object checks that body is exactly one JSON object and returns it without surrounding
// white space.
func Object(body []byte) ([]byte, error) {
	obj := bytes.TrimSpace(body)
	if len(obj) == 0 {
		return nil, &Error{Index: -1, Syntax: true, Msg: "the body is empty; send one JSON object"}
	}
	if err := Check(body); err != nil {
		return nil, err
	}
	if err := syntaxError(obj); err != nil {
		return nil, &Error{Index: -1, Syntax: true, Msg: err.Error()}
	}
	if obj[0] != '{' {
		return nil, &Error{Index: -1, Msg: "the body is " + kind(obj) + ", not a JSON object"}
	}
	return obj, nil
}

// Split returns the objects of a batch: a JSON array of objects, NDJSON (one object per
// line), or, leniently, a single object. ndjson says the client declared NDJSON; content
// decides otherwise. One element that is not an object fails the whole batch, naming its
// index, so a batch is stored entirely or not at all. A body of more than max objects
// (max > 0) fails as soon as the object past max is reached: a few megabytes of {} are
// millions of objects, too many to hold, let alone store, for one request.
func Split(body []byte, ndjson bool, max int) ([][]byte, error) {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return nil, &Error{Index: -1, Syntax: true, Msg: "the body is empty; send a JSON array of objects or NDJSON"}
	}
	if err := Check(body); err != nil {
		return nil, err
	}
	if !ndjson && trimmed[0] == '[' {
		return splitArray(trimmed, max)
	}
	return splitLines(trimmed, max)
}

// Objects returns the objects of a push: one JSON object (formatted any way, e.g. pretty
// printed over many lines), a JSON array of objects, or NDJSON (one object per line). The
// content decides, whatever the client declared: a body starting with '[' is an array; a
// body that is one valid object is that object; anything else is read line by line, so
// several lines of objects are NDJSON even when sent as application/json, and one object
// over many lines is one object even when sent as application/x-ndjson. As with Split, one
// element that is not an object fails the whole body, naming its index, and more than max
// objects (max > 0) fail it too.
func Objects(body []byte, max int) ([][]byte, error) {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return nil, &Error{Index: -1, Syntax: true, Msg: "the body is empty; send a JSON object, a JSON array of objects, or NDJSON"}
	}
	if err := Check(body); err != nil {
		return nil, err
	}
	switch {
	case trimmed[0] == '[':
		return splitArray(trimmed, max)
	case trimmed[0] == '{' && bytes.IndexByte(trimmed, '\n') >= 0 && json.Valid(trimmed):
		return [][]byte{trimmed}, nil
	}
	return splitLines(trimmed, max)
}

func splitArray(body []byte, max int) ([][]byte, error) {
	if err := syntaxError(body); err != nil {
		return nil, &Error{Index: -1, Syntax: true, Msg: err.Error()}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if _, err := dec.Token(); err != nil { // '['
		return nil, &Error{Index: -1, Syntax: true, Msg: err.Error()}
	}
	var out [][]byte
	for i := 0; dec.More(); i++ {
		if max > 0 && i == max {
			return nil, tooMany(max)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, &Error{Index: i, Syntax: true, Msg: err.Error()}
		}
		if raw[0] != '{' {
			return nil, &Error{Index: i, Msg: kind(raw) + " is not a JSON object"}
		}
		out = append(out, raw)
	}
	if len(out) == 0 {
		return nil, &Error{Index: -1, Msg: "the batch is empty; send at least one event"}
	}
	return out, nil
}

func splitLines(body []byte, max int) ([][]byte, error) {
	var out [][]byte
	line := 0
	for len(body) > 0 {
		line++
		var l []byte
		if i := bytes.IndexByte(body, '\n'); i >= 0 {
			l, body = body[:i], body[i+1:]
		} else {
			l, body = body, nil
		}
		l = bytes.TrimSpace(l)
		if len(l) == 0 {
			continue
		}
		idx := len(out)
		if max > 0 && idx == max {
			return nil, tooMany(max)
		}
		if err := syntaxError(l); err != nil {
			return nil, &Error{Index: idx, Syntax: true, Msg: fmt.Sprintf("line %d: %v", line, err)}
		}
		if l[0] != '{' {
			return nil, &Error{Index: idx, Msg: fmt.Sprintf("line %d: %s is not a JSON object", line, kind(l))}
		}
		out = append(out, l)
	}
	if len(out) == 0 {
		return nil, &Error{Index: -1, Msg: "the batch is empty; send at least one event"}
	}
	return out, nil
}

// syntaxError reports why b is not one JSON value, with the byte offset.
func syntaxError(b []byte) error {
	if json.Valid(b) {
		return nil
	}
	var v json.RawMessage
	err := json.Unmarshal(b, &v)
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Errorf("invalid JSON at byte %d: %s", se.Offset, se.Error())
	}
	if err == nil {
		err = errors.New("trailing data after the JSON value")
	}
	return fmt.Errorf("invalid JSON: %v", err)
}

func kind(v []byte) string {
	switch v[0] {
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	case '{':
		return "an object"
	}
	return "a number"
}

// Field is a top-level member to set on an object.
type Field struct {
	Name  string
	Value string // a string value; JSON-encoded on insertion
}

// WithFields returns obj with fields set as top-level string members. A member of the same
// name that the object already had is replaced (the header wins). When nothing has to be
// replaced the object's bytes are kept exactly and the fields are appended before its
// closing brace. obj must be a valid JSON object (from Object or Split).
func WithFields(obj []byte, fields ...Field) []byte {
	if len(fields) == 0 {
		return obj
	}
	members, err := scanMembers(obj)
	if err != nil {
		// Unreachable for validated input; keep the bytes rather than lose the event.
		return obj
	}
	drop := map[int]bool{}
	for i, m := range members {
		for _, f := range fields {
			if m.name == f.Name {
				drop[i] = true
			}
		}
	}
	var out []byte
	if len(drop) == 0 {
		end := bytes.LastIndexByte(obj, '}')
		out = append(out, obj[:end]...)
		if len(members) > 0 {
			out = append(out, ',')
		}
	} else {
		out = append(out, '{')
		n := 0
		for i, m := range members {
			if drop[i] {
				continue
			}
			if n > 0 {
				out = append(out, ',')
			}
			out = append(out, obj[m.start:m.end]...)
			n++
		}
		if n > 0 {
			out = append(out, ',')
		}
	}
	for i, f := range fields {
		if i > 0 {
			out = append(out, ',')
		}
		out = strconv.AppendQuote(out, f.Name) // names are ours: plain ASCII
		out = append(out, ':')
		out = appendJSONString(out, f.Value)
	}
	return append(out, '}')
}

type member struct {
	name       string
	start, end int // bytes of `"key": value`
}

// scanMembers finds the top-level members of an object with their byte spans.
func scanMembers(obj []byte) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(obj))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, errors.New("not an object")
	}
	var out []member
	prev := int(dec.InputOffset())
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		name, _ := t.(string)
		start := prev
		for start < len(obj) && (obj[start] == ',' || isSpace(obj[start])) {
			start++
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, err
		}
		end := int(dec.InputOffset())
		out = append(out, member{name: name, start: start, end: end})
		prev = end
	}
	if _, err := dec.Token(); err != nil { // '}'
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data")
	}
	return out, nil
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func appendJSONString(dst []byte, s string) []byte {
	b, _ := json.Marshal(s)
	return append(dst, b...)
}
