// Package fieldstats is the statistics of the Fields view: which field paths a project's
// records hold, how often and with which JSON types. The receiver's console read API
// (Fields) and the data plane's pipeline check (internal/collector/validationresponder, which
// warns about triggers naming fields the project never had) compute it with this one
// code, so a warning and the Fields page never disagree.
package fieldstats

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"sort"

	"github.com/otelcol-svc/otelcol-svc/internal/ottlpath"
)

// Field paths of the Fields view.
//
//   - Object members are joined with dots: payload.repo.name. A key that itself holds
//     dots (attributes "http.method") is joined as it is (attributes.http.method), so
//     path alone cannot tell a dotted key from nested objects: ottl is the field in
//     OTTL (package ottlevent's paths), built from the records' own keys, and is what
//     a trigger should use (attributes["http.method"]). See ottlPath.
//   - An array is a field of type "array" at its own path, and the values inside it are
//     counted under the path with "[]" appended, whatever their index: items[] for the
//     elements themselves, items[].sku for a member of object elements, matrix[][] for
//     nested arrays.
//   - count is the number of sampled records that have the path at least once; types are
//     the JSON types seen at the path, in the order string, number, boolean, object,
//     array, null.
//   - Paths deeper than MaxDepth levels are not listed, and at most MaxPaths
//     distinct paths are (then truncated is true), so one odd record cannot blow up the
//     answer. Sampling also stops after maxReadBytes of records (truncated again), so
//     a read of large records costs bounded time.
const (
	MaxDepth = 32
	MaxPaths = 2000
)

// JSON types, as bits of a mask and as named in answers.
const (
	typeString uint8 = 1 << iota
	typeNumber
	typeBoolean
	typeObject
	typeArray
	typeNull
)

var typeNames = []struct {
	bit  uint8
	name string
}{{typeString, "string"}, {typeNumber, "number"}, {typeBoolean, "boolean"}, {typeObject, "object"}, {typeArray, "array"}, {typeNull, "null"}}

// Field is one path of the Fields view.
type Field struct {
	Path string `json:"path"`
	// OTTL reads the field, from the keys of the first sampled record that has it;
	// absent for the elements of a record that is an array (records are objects).
	OTTL  string   `json:"ottl,omitempty"`
	Count int      `json:"count"`
	Types []string `json:"types"`
}

type fieldAcc struct {
	count int
	types uint8
	ottl  string
}

// fieldKey is one step of a field: an object member's key, or an array index.
type fieldKey = ottlpath.Key

// Stats accumulates field paths over sampled records.
type Stats struct {
	sampled   int
	truncated bool
	fields    map[string]*fieldAcc
	seen      map[string]uint8 // the current record's paths
	// ottl holds the OTTL of the current record's paths not listed yet, so an
	// expression is built once per listed path rather than for every value walked.
	ottl map[string]string
	keys []fieldKey // the path being walked, as keys
}

func New() *Stats {
	return &Stats{fields: map[string]*fieldAcc{}, seen: map[string]uint8{}, ottl: map[string]string{}}
}

// Add walks one record. A record that is not valid JSON counts as sampled and contributes
// no field.
func (s *Stats) Add(rec []byte) {
	s.sampled++
	clear(s.seen)
	clear(s.ottl)
	dec := json.NewDecoder(bytes.NewReader(rec))
	dec.UseNumber()
	if err := s.walk(dec, "", 0); err != nil {
		return
	}
	if _, err := dec.Token(); err != io.EOF {
		return // trailing data: not one JSON value
	}
	for path, types := range s.seen {
		acc, ok := s.fields[path]
		if !ok {
			if len(s.fields) >= MaxPaths {
				s.truncated = true
				continue
			}
			acc = &fieldAcc{ottl: s.ottl[path]}
			s.fields[path] = acc
		}
		acc.count++
		acc.types |= types
	}
}

var errNotJSON = errors.New("not JSON")

// walk reads one value at path. The root (depth 0) is not a field itself.
func (s *Stats) walk(dec *json.Decoder, path string, depth int) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	var t uint8
	switch v := tok.(type) {
	case json.Delim:
		switch v {
		case '{':
			t = typeObject
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return err
				}
				key, ok := k.(string)
				if !ok {
					return errNotJSON
				}
				child := key
				if depth > 0 {
					child = path + "." + key
				}
				s.keys = append(s.keys[:depth], fieldKey{Name: key})
				if err := s.walk(dec, child, depth+1); err != nil {
					return err
				}
			}
		case '[':
			t = typeArray
			for i := 0; dec.More(); i++ {
				s.keys = append(s.keys[:depth], fieldKey{Index: i, IsIdx: true})
				if err := s.walk(dec, path+"[]", depth+1); err != nil {
					return err
				}
			}
		default:
			return errNotJSON
		}
		if _, err := dec.Token(); err != nil { // the closing delimiter
			return err
		}
	case string:
		t = typeString
	case json.Number:
		t = typeNumber
	case bool:
		t = typeBoolean
	case nil:
		t = typeNull
	default:
		return errNotJSON
	}
	if depth > 0 && depth <= MaxDepth {
		s.seen[path] |= t
		if _, listed := s.fields[path]; !listed {
			if _, ok := s.ottl[path]; !ok {
				s.ottl[path] = ottlPath(s.keys[:depth])
			}
		}
	}
	return nil
}

// ottlPath writes keys as an OTTL path by internal/ottlpath's rules, the ones the
// pipeline's OTTL context reads paths by: attributes["http.method"],
// event["_event_type"], payload["labels"][0]["name"]. An array element is the index
// where a sampled record had the field, so the expression reads a value that exists.
// The dashboard's ottlpath.ts writes paths by the same rules (generated from them) for
// answers from receivers without "ottl".
func ottlPath(keys []fieldKey) string { return ottlpath.Path(keys) }

// Result lists the paths in path order.
func (s *Stats) Result() []Field {
	out := make([]Field, 0, len(s.fields))
	for path, acc := range s.fields {
		out = append(out, Field{Path: path, OTTL: acc.ottl, Count: acc.count, Types: typeList(acc.types)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// Sampled is how many records Add walked.
func (s *Stats) Sampled() int { return s.sampled }

// Truncated reports that paths were left out (past MaxPaths).
func (s *Stats) Truncated() bool { return s.truncated }

// Types returns the JSON types seen at a path (as Field.Path spells it), in the order
// of Field.Types; ok is false when no sampled record had the path.
func (s *Stats) Types(path string) (types []string, ok bool) {
	acc, ok := s.fields[path]
	if !ok {
		return nil, false
	}
	return typeList(acc.types), true
}

func typeList(mask uint8) []string {
	out := make([]string, 0, 2)
	for _, tn := range typeNames {
		if mask&tn.bit != 0 {
			out = append(out, tn.name)
		}
	}
	return out
}
