package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/url"
	"sort"

	"github.com/otelcol-svc/otelcol-svc/components/apierror"
)

// GET /console/v1/projects/{project_id}/fields?limit=100&source_id=<id>: the field paths
// of the project's newest records, what a user can write triggers against.
const (
	defaultFieldsLimit = 100
	maxFieldsLimit     = 1000
)

func fieldsEndpoint() endpoint {
	return endpoint{name: "fields", parse: query(func(q url.Values) (readFunc, *apierror.Error) {
		return recentRecords(q, defaultFieldsLimit, maxFieldsLimit, func(limit int) view {
			return &fieldsView{stats: newFieldStats(), limit: limit, maxBytes: maxReadBytes}
		})
	})}
}

// Field paths of the Fields view.
//
//   - Object members are joined with dots: payload.repo.name. A key that itself holds
//     dots (attributes "http.method") is joined as it is (attributes.http.method); in OTTL
//     write it as attributes["http.method"].
//   - An array is a field of type "array" at its own path, and the values inside it are
//     counted under the path with "[]" appended, whatever their index: items[] for the
//     elements themselves, items[].sku for a member of object elements, matrix[][] for
//     nested arrays.
//   - count is the number of sampled records that have the path at least once; types are
//     the JSON types seen at the path, in the order string, number, boolean, object,
//     array, null.
//   - Paths deeper than maxFieldDepth levels are not listed, and at most maxFieldPaths
//     distinct paths are (then truncated is true), so one odd record cannot blow up the
//     answer. Sampling also stops after maxReadBytes of records (truncated again), so
//     a read of large records costs bounded time.
const (
	maxFieldDepth = 32
	maxFieldPaths = 2000
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

// FieldStat is one path of the Fields view.
type FieldStat struct {
	Path  string   `json:"path"`
	Count int      `json:"count"`
	Types []string `json:"types"`
}

type fieldAcc struct {
	count int
	types uint8
}

// fieldStats accumulates field paths over sampled records.
type fieldStats struct {
	sampled   int
	truncated bool
	fields    map[string]*fieldAcc
	seen      map[string]uint8 // the current record's paths
}

func newFieldStats() *fieldStats {
	return &fieldStats{fields: map[string]*fieldAcc{}, seen: map[string]uint8{}}
}

// add walks one record. A record that is not valid JSON counts as sampled and contributes
// no field.
func (s *fieldStats) add(rec []byte) {
	s.sampled++
	clear(s.seen)
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
			if len(s.fields) >= maxFieldPaths {
				s.truncated = true
				continue
			}
			acc = &fieldAcc{}
			s.fields[path] = acc
		}
		acc.count++
		acc.types |= types
	}
}

var errNotJSON = errors.New("not JSON")

// walk reads one value at path. The root (depth 0) is not a field itself.
func (s *fieldStats) walk(dec *json.Decoder, path string, depth int) error {
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
				if err := s.walk(dec, child, depth+1); err != nil {
					return err
				}
			}
		case '[':
			t = typeArray
			for dec.More() {
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
	if depth > 0 && depth <= maxFieldDepth {
		s.seen[path] |= t
	}
	return nil
}

// result lists the paths in path order.
func (s *fieldStats) result() []FieldStat {
	out := make([]FieldStat, 0, len(s.fields))
	for path, acc := range s.fields {
		f := FieldStat{Path: path, Count: acc.count, Types: make([]string, 0, 2)}
		for _, tn := range typeNames {
			if acc.types&tn.bit != 0 {
				f.Types = append(f.Types, tn.name)
			}
		}
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// fieldsView walks each record as it arrives and keeps only the field statistics. Within
// a window it samples the oldest records first: with a source filter (windows of many
// sequences) the sample is of recent records rather than strictly the newest.
type fieldsView struct {
	stats           *fieldStats
	limit, maxBytes int
	bytes           int
	truncated       bool // sampling stopped at the byte budget
}

func (v *fieldsView) need() int {
	if v.truncated {
		return 0
	}
	return v.limit - v.stats.sampled
}

func (v *fieldsView) take(rec storedRecord) {
	if v.truncated || v.stats.sampled >= v.limit {
		return
	}
	if v.bytes+len(rec.data) > v.maxBytes {
		v.truncated = true
		return
	}
	v.bytes += len(rec.data)
	v.stats.add(rec.data)
}

func (v *fieldsView) endWindow() {}

func (v *fieldsView) answer() any {
	body := map[string]any{"sampled": v.stats.sampled, "fields": v.stats.result()}
	if v.truncated || v.stats.truncated {
		body["truncated"] = true
	}
	return body
}
