package records

import (
	"encoding/json"
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// Counting the records of an OTLP request before decoding it: decoded pdata costs about
// 140 bytes per log record and flattening 220 more, so 10 MB of tiny records (3 million
// in JSON, more in protobuf) cost gigabytes; with the count known from the bytes alone,
// such a request is refused for what it holds before any of that memory is spent. pdata
// and protowire offer no counting without decoding, hence this walk.

// otlpPath is where one signal's records sit in an export request: the field names (JSON,
// camelCase and snake_case, as pdata accepts both) or numbers (protobuf) to follow, one
// set per level; each object or message at the last level is one record.
type otlpPath struct {
	json  []map[string]bool
	proto [][]protowire.Number
}

func names(s ...string) map[string]bool {
	m := map[string]bool{}
	for _, n := range s {
		m[n] = true
	}
	return m
}

var otlpPaths = map[string]otlpPath{
	SignalLog: {
		json:  []map[string]bool{names("resourceLogs", "resource_logs"), names("scopeLogs", "scope_logs"), names("logRecords", "log_records")},
		proto: [][]protowire.Number{{1}, {2}, {2}},
	},
	SignalSpan: {
		json:  []map[string]bool{names("resourceSpans", "resource_spans"), names("scopeSpans", "scope_spans"), names("spans")},
		proto: [][]protowire.Number{{1}, {2}, {2}},
	},
	SignalMetric: {
		// A metric's data sits in one of gauge (5), sum (7), histogram (9),
		// exponential_histogram (10) or summary (11); each holds data_points (1).
		json: []map[string]bool{names("resourceMetrics", "resource_metrics"), names("scopeMetrics", "scope_metrics"), names("metrics"),
			names("gauge", "sum", "histogram", "exponentialHistogram", "exponential_histogram", "summary"), names("dataPoints", "data_points")},
		proto: [][]protowire.Number{{1}, {2}, {2}, {5, 7, 9, 10, 11}, {1}},
	},
}

// CountOTLP returns how many records (log records, spans or metric data points, by
// signal) the OTLP export request body holds, without decoding it. For JSON the body
// should have passed eventjson.Check (the walk keeps a stack as deep as the body nests);
// on malformed JSON the count may be off, and decoding reports the error. Malformed
// protobuf is an error.
func CountOTLP(signal string, body []byte, isJSON bool) (int, error) {
	p, ok := otlpPaths[signal]
	if !ok {
		return 0, fmt.Errorf("unknown signal %q", signal)
	}
	if isJSON {
		return countJSON(body, p.json), nil
	}
	return countProto(body, p.proto)
}

var errProtoWire = errors.New("malformed protobuf")

func countProto(b []byte, steps [][]protowire.Number) (int, error) {
	n := 0
	for len(b) > 0 {
		num, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			return 0, errProtoWire
		}
		b = b[l:]
		if typ != protowire.BytesType {
			if l = protowire.ConsumeFieldValue(num, typ, b); l < 0 {
				return 0, errProtoWire
			}
			b = b[l:]
			continue
		}
		v, l := protowire.ConsumeBytes(b)
		if l < 0 {
			return 0, errProtoWire
		}
		b = b[l:]
		if !hasNumber(steps[0], num) {
			continue
		}
		if len(steps) == 1 {
			n++
			continue
		}
		c, err := countProto(v, steps[1:])
		if err != nil {
			return 0, err
		}
		n += c
	}
	return n, nil
}

func hasNumber(nums []protowire.Number, n protowire.Number) bool {
	for _, x := range nums {
		if x == n {
			return true
		}
	}
	return false
}

// countJSON walks the tokens of b, tracking for each open container how many levels of
// the path lead to it (-1: off the path).
func countJSON(b []byte, steps []map[string]bool) int {
	type frame struct {
		level int
		array bool
	}
	last := len(steps)
	var stack []frame
	n := 0
	keyLevel, pending := -1, -1 // the level the last key's value would be at; the same once ':' is read
	for i := 0; i < len(b); i++ {
		switch c := b[i]; c {
		case ' ', '\t', '\n', '\r':
		case ':':
			pending, keyLevel = keyLevel, -1
		case '{', '[':
			level := -1
			switch {
			case len(stack) == 0:
				if c == '{' {
					level = 0
				}
			case stack[len(stack)-1].array:
				level = stack[len(stack)-1].level
			default:
				level = pending
			}
			pending = -1
			if c == '{' && level == last {
				n++
				level = -1 // inside a record nothing more is counted
			}
			stack = append(stack, frame{level: level, array: c == '['})
		case '}', ']':
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
			pending = -1
		case '"':
			start := i
			i++
			escaped := false
			for i < len(b) && b[i] != '"' {
				if b[i] == '\\' {
					escaped = true
					i++
				}
				i++
			}
			pending, keyLevel = -1, -1
			j := i + 1
			for j < len(b) && (b[j] == ' ' || b[j] == '\t' || b[j] == '\n' || b[j] == '\r') {
				j++
			}
			if j >= len(b) || b[j] != ':' || len(stack) == 0 {
				continue
			}
			top := stack[len(stack)-1]
			if top.array || top.level < 0 || top.level >= last || i >= len(b) {
				continue
			}
			key := string(b[start+1 : i])
			if escaped {
				// A key may be escaped ("log\u0052ecords"); pdata's decoder unescapes it.
				_ = json.Unmarshal(b[start:i+1], &key)
			}
			if steps[top.level][key] {
				keyLevel = top.level + 1
			}
		default:
			pending = -1
		}
	}
	return n
}
