package ottlevent

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"unicode/utf16"
	"unicode/utf8"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/xpdata"
)

// maxDepth matches encoding/json, so that anything the ingest side accepted as JSON
// also decodes here.
const maxDepth = 10000

// SyntaxError is a flat record that is not one JSON object. Records on the stream were
// checked at ingest, so this means a corrupted or foreign message.
type SyntaxError struct {
	Offset int // byte offset of the problem in the input
	Msg    string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("record is not a JSON object: %s at offset %d", e.Msg, e.Offset)
}

// DecodeRecord parses a flat record (one JSON object) into a Record.
//
// Values map to pcommon as encoding/json would map them to Go values, with these
// choices:
//   - a number without fraction or exponent that fits int64 becomes Int, so
//     severityNumber and integer attributes compare and re-encode exactly;
//   - any other number becomes Double: integers beyond int64 keep their float64
//     approximation (exact up to 2^53), and magnitudes beyond float64 become ±Inf,
//     which AppendJSON writes as "Infinity"/"-Infinity" (the records convention);
//   - null becomes an empty value (written back as null);
//   - a duplicated key keeps its last value, as encoding/json does;
//   - invalid UTF-8 and lone surrogates in strings become U+FFFD, as encoding/json does.
//
// Keys keep their order, so a changed record re-encodes in its original order.
//
// The decoder is hand-written because this runs for every record a pipeline with
// triggers or transforms reads: encoding/json would first build map[string]any and
// lose key order, and its token API costs an allocation per token.
func DecodeRecord(data []byte, signal string) (*Record, error) {
	return decodeTop(nil, data, signal, true, (*decoder).object)
}

// decodeTop decodes one JSON object with body filling the map from after its '{', into
// reuse when not nil (emptied first), else into a new record.
// shared: the strings decoded share one copy of data; else each is copied on its own,
// which costs less when only a few of them are decoded.
func decodeTop(reuse *Record, data []byte, signal string, shared bool, body func(*decoder, pcommon.Map) error) (*Record, error) {
	d := decoders.Get().(*decoder)
	defer d.release()
	// One copy of the input backs every string without escapes (most of them),
	// instead of one allocation per string. The record keeps that copy, never data,
	// which the caller may reuse.
	if shared {
		d.src = string(data)
	}
	d.shared = shared
	d.data = data
	d.pos = 0
	d.skipWS()
	if d.pos >= len(d.data) {
		return nil, d.errorf("unexpected end of input")
	}
	if d.data[d.pos] != '{' {
		return nil, d.errorf("invalid character %q, want '{'", d.data[d.pos])
	}
	d.pos++
	var m pcommon.Map
	if reuse != nil {
		m = reuse.m
		m.RemoveIf(func(string, pcommon.Value) bool { return true }) // keeps the storage, unlike Clear
	} else {
		m = pcommon.NewMap()
	}
	if err := body(d, m); err != nil {
		return nil, err
	}
	d.skipWS()
	if d.pos != len(d.data) {
		return nil, d.errorf("invalid character %q after the object", d.data[d.pos])
	}
	if reuse != nil {
		*reuse = Record{m: m, signal: signal}
		reuse.index()
		return reuse, nil
	}
	return NewRecord(m, signal), nil
}

// DecodeRecordFields decodes only the top-level members named in fields and skips the
// others without building them: evaluating a trigger that reads one field of a 750-byte
// record then costs a fraction of a full decode. The skipped parts are not validated;
// records come from the stream, where the receiver stored only valid JSON. The result
// serves to evaluate expressions, never to re-encode the record.
func DecodeRecordFields(data []byte, signal string, fields map[string]bool) (*Record, error) {
	return DecodeRecordFieldsInto(nil, data, signal, NewFieldSet(fields))
}

// FieldSet is a set of top-level field names made for DecodeRecordFieldsInto, which
// looks up every key of every record in it: most keys are not in it, and their length
// says so without hashing them.
type FieldSet struct {
	m    map[string]bool
	lens [2]uint64 // bit n: some field is n bytes long, for n < 128
	long bool      // some field is 128 bytes or longer
}

// NewFieldSet makes a FieldSet of the fields set true.
func NewFieldSet(fields map[string]bool) *FieldSet {
	s := &FieldSet{m: fields}
	for f, in := range fields {
		switch n := len(f); {
		case !in:
		case n < 128:
			s.lens[n>>6] |= 1 << (n & 63)
		default:
			s.long = true
		}
	}
	return s
}

func (s *FieldSet) has(key []byte) bool {
	if n := len(key); n < 128 {
		if s.lens[n>>6]&(1<<(n&63)) == 0 {
			return false
		}
	} else if !s.long {
		return false
	}
	return s.m[string(key)]
}

// DecodeRecordFieldsInto is DecodeRecordFields into r, a record the caller got from an
// earlier DecodeRecordFieldsInto (or DecodeRecordReadsInto) and is done with, or nil for
// a new one: a trigger that drops most records then decodes them one after another into
// the same record and map instead of allocating both for each. r's values from before
// are invalid afterwards, also on error.
func DecodeRecordFieldsInto(r *Record, data []byte, signal string, fields *FieldSet) (*Record, error) {
	// The few values kept are copied each, rather than the whole record once.
	return decodeTop(r, data, signal, false, func(d *decoder, m pcommon.Map) error {
		d.skipWS()
		if d.pos < len(d.data) && d.data[d.pos] == '}' {
			d.pos++
			return nil
		}
		m.EnsureCapacity(len(fields.m))
		for {
			key, err := d.rawKey()
			if err != nil {
				return err
			}
			if fields.has(key) {
				err = d.value(putLast(m, keyString(key)))
			} else {
				err = d.skipValue()
			}
			if err != nil {
				return err
			}
			if more, err := d.next(); err != nil || !more {
				return err
			}
		}
	})
}

// keyString is a top-level key the record keeps: the indexed fields' names are
// constants, which saves copying the key for the fields triggers read most.
func keyString(key []byte) string {
	if i := topSlot(string(key)); i >= 0 {
		return topFields[i]
	}
	return string(key)
}

// skipValue moves past one JSON value without decoding it.
func (d *decoder) skipValue() error {
	depth := 0
	for d.pos < len(d.data) {
		switch c := d.data[d.pos]; c {
		case '"':
			if !d.skipString() {
				return d.errorf("unexpected end of input")
			}
			if depth == 0 {
				return nil
			}
		case '{', '[':
			depth++
			d.pos++
		case '}', ']':
			if depth == 0 {
				return nil // a scalar ended by its container
			}
			depth--
			d.pos++
			if depth == 0 {
				return nil
			}
		case ',':
			if depth == 0 {
				return nil
			}
			d.pos++
		default:
			d.pos++
		}
	}
	return d.errorf("unexpected end of input")
}

// skipString moves past the string whose opening quote is at d.pos, finding each
// candidate closing quote with bytes.IndexByte (strings are most of a record's bytes):
// a quote is escaped when an odd number of backslashes stands right before it.
func (d *decoder) skipString() bool {
	data := d.data
	i := d.pos + 1
	for {
		j := bytes.IndexByte(data[i:], '"')
		if j < 0 {
			d.pos = len(data)
			return false
		}
		q := i + j
		k := q - 1
		for data[k] == '\\' { // stops at the opening quote at the latest
			k--
		}
		i = q + 1
		if (q-1-k)%2 == 0 {
			d.pos = i
			return true
		}
	}
}

var decoders = sync.Pool{New: func() any { return new(decoder) }}

func (d *decoder) release() {
	d.data, d.src, d.depth = nil, "", 0
	if cap(d.buf) > 64<<10 {
		d.buf = nil
	}
	decoders.Put(d)
}

type decoder struct {
	data   []byte
	src    string // a copy of data, when shared
	shared bool
	pos    int
	depth  int
	// buf is scratch space for strings with escapes or invalid UTF-8.
	buf []byte
}

func (d *decoder) errorf(format string, args ...any) error {
	return &SyntaxError{Offset: d.pos, Msg: fmt.Sprintf(format, args...)}
}

func (d *decoder) skipWS() {
	for d.pos < len(d.data) {
		switch d.data[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

// smallObject is the size up to which members go straight into the map, whose
// search for an existing key on each insertion costs less than a builder below that
// size.
const smallObject = 16

// putLast returns the value to fill for key: a duplicated key keeps its last value, in
// its own place, as for large objects and as encoding/json does.
func putLast(m pcommon.Map, key string) pcommon.Value {
	v, dup := m.GetOrPutEmpty(key)
	if dup {
		m.Remove(key)
		v = m.PutEmpty(key)
	}
	return v
}

// object decodes the members of an object whose '{' was consumed into m.
func (d *decoder) object(m pcommon.Map) error {
	d.depth++
	if d.depth > maxDepth {
		return d.errorf("exceeded max depth")
	}
	defer func() { d.depth-- }()

	d.skipWS()
	if d.pos < len(d.data) && d.data[d.pos] == '}' {
		d.pos++
		return nil
	}
	// Sizing the storage exactly saves the growth steps, which cost more than the
	// scan.
	n := d.countMembers()
	if n <= smallObject {
		m.EnsureCapacity(n)
		return d.members(func(key string) (pcommon.Value, bool) { return putLast(m, key), true }, nil)
	}
	// Large objects use xpdata.MapBuilder: Map.PutEmpty searches all keys on every
	// call, which would make a 100k-key event quadratic. The builder does not look
	// for duplicates, so they are counted here and settled at the end.
	var mb xpdata.MapBuilder
	mb.EnsureCapacity(n)
	seen := make(map[string]int, n)
	dups := false
	return d.members(func(key string) (pcommon.Value, bool) {
		seen[key]++
		dups = dups || seen[key] > 1
		return mb.AppendEmpty(key), true
	}, func() {
		mb.UnsafeIntoMap(m)
		if dups {
			dropEarlierDuplicates(m, seen)
		}
	})
}

// members decodes "key": value pairs up to the closing '}', putting each value where
// put says; done runs after the '}'.
func (d *decoder) members(put func(key string) (pcommon.Value, bool), done func()) error {
	for {
		key, err := d.key()
		if err != nil {
			return err
		}
		// The value is filled before the next put: a builder's value is only
		// valid until the next append.
		v, keep := put(key)
		if !keep {
			err = d.skipValue()
		} else {
			err = d.value(v)
		}
		if err != nil {
			return err
		}
		more, err := d.next()
		if err != nil {
			return err
		}
		if !more {
			if done != nil {
				done()
			}
			return nil
		}
	}
}

// key reads a member's key and its ':', leaving d.pos at the value.
func (d *decoder) key() (string, error) {
	if err := d.keyStart(); err != nil {
		return "", err
	}
	key, err := d.str()
	if err != nil {
		return "", err
	}
	return key, d.colon()
}

// rawKey is key with the key's bytes as rawStr gives them.
func (d *decoder) rawKey() ([]byte, error) {
	if err := d.keyStart(); err != nil {
		return nil, err
	}
	key, err := d.rawStr()
	if err != nil {
		return nil, err
	}
	return key, d.colon()
}

func (d *decoder) keyStart() error {
	d.skipWS()
	if d.pos >= len(d.data) {
		return d.errorf("unexpected end of input")
	}
	if d.data[d.pos] != '"' {
		return d.errorf("invalid character %q, want a string key", d.data[d.pos])
	}
	return nil
}

func (d *decoder) colon() error {
	d.skipWS()
	if d.pos >= len(d.data) {
		return d.errorf("unexpected end of input")
	}
	if d.data[d.pos] != ':' {
		return d.errorf("invalid character %q, want ':'", d.data[d.pos])
	}
	d.pos++
	d.skipWS()
	return nil
}

// next moves past the ',' after a member (more) or the object's closing '}'.
func (d *decoder) next() (more bool, err error) {
	d.skipWS()
	if d.pos >= len(d.data) {
		return false, d.errorf("unexpected end of input")
	}
	switch d.data[d.pos] {
	case ',':
		d.pos++
		return true, nil
	case '}':
		d.pos++
		return false, nil
	default:
		return false, d.errorf("invalid character %q, want ',' or '}'", d.data[d.pos])
	}
}

// countMembers counts the members of the object starting at d.pos (after '{'),
// skipping nested values and strings. On invalid input the count is only wrong, and
// never more than the bytes left, so it cannot ask for absurd memory.
func (d *decoder) countMembers() int {
	data := d.data
	depth, n := 0, 1
	for i := d.pos; i < len(data); i++ {
		switch data[i] {
		case '"':
			for {
				j := bytes.IndexByte(data[i+1:], '"')
				if j < 0 {
					return n
				}
				i += j + 1
				k := i - 1
				for k >= 0 && data[k] == '\\' {
					k--
				}
				if (i-1-k)%2 == 0 {
					break
				}
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return n
			}
			depth--
		case ',':
			if depth == 0 {
				n++
			}
		}
	}
	return n
}

// dropEarlierDuplicates keeps only the last occurrence of each key, which is what
// encoding/json (and so every other reader of the record) sees. count is how many
// times each key occurs, and is consumed.
func dropEarlierDuplicates(m pcommon.Map, count map[string]int) {
	m.RemoveIf(func(k string, _ pcommon.Value) bool {
		count[k]--
		return count[k] > 0
	})
}

func (d *decoder) value(v pcommon.Value) error {
	if d.pos >= len(d.data) {
		return d.errorf("unexpected end of input")
	}
	switch c := d.data[d.pos]; c {
	case '"':
		s, err := d.str()
		if err != nil {
			return err
		}
		v.SetStr(s)
		return nil
	case '{':
		d.pos++
		return d.object(v.SetEmptyMap())
	case '[':
		d.pos++
		return d.array(v.SetEmptySlice())
	case 't':
		if err := d.literal("true"); err != nil {
			return err
		}
		v.SetBool(true)
		return nil
	case 'f':
		if err := d.literal("false"); err != nil {
			return err
		}
		v.SetBool(false)
		return nil
	case 'n':
		// The value is already empty, which is how pcommon says null.
		return d.literal("null")
	default:
		if c == '-' || (c >= '0' && c <= '9') {
			return d.number(v)
		}
		return d.errorf("invalid character %q looking for beginning of value", c)
	}
}

func (d *decoder) array(s pcommon.Slice) error {
	d.depth++
	if d.depth > maxDepth {
		return d.errorf("exceeded max depth")
	}
	defer func() { d.depth-- }()

	d.skipWS()
	if d.pos < len(d.data) && d.data[d.pos] == ']' {
		d.pos++
		return nil
	}
	for {
		d.skipWS()
		if err := d.value(s.AppendEmpty()); err != nil {
			return err
		}
		d.skipWS()
		if d.pos >= len(d.data) {
			return d.errorf("unexpected end of input")
		}
		switch d.data[d.pos] {
		case ',':
			d.pos++
		case ']':
			d.pos++
			return nil
		default:
			return d.errorf("invalid character %q, want ',' or ']'", d.data[d.pos])
		}
	}
}

func (d *decoder) literal(lit string) error {
	if len(d.data)-d.pos < len(lit) || string(d.data[d.pos:d.pos+len(lit)]) != lit {
		return d.errorf("invalid literal, want %s", lit)
	}
	d.pos += len(lit)
	return nil
}

// number follows the JSON grammar exactly: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (d *decoder) number(v pcommon.Value) error {
	start := d.pos
	i := d.pos
	data := d.data
	if data[i] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(data) && data[i] >= '0' && data[i] <= '9' {
			i++
			n++
		}
		return n
	}
	intStart := i
	n := digits()
	if n == 0 {
		d.pos = i
		return d.errorf("invalid number, want a digit")
	}
	if n > 1 && data[intStart] == '0' {
		d.pos = intStart + 1
		return d.errorf("invalid number, leading zero")
	}
	isInt := true
	if i < len(data) && data[i] == '.' {
		i++
		isInt = false
		if digits() == 0 {
			d.pos = i
			return d.errorf("invalid number, want a digit after '.'")
		}
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		i++
		isInt = false
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		if digits() == 0 {
			d.pos = i
			return d.errorf("invalid number, want a digit in the exponent")
		}
	}
	d.pos = i

	if isInt && n <= 18 {
		// At most 18 digits always fits int64: no overflow checks needed.
		var x int64
		for _, c := range data[intStart:i] {
			x = x*10 + int64(c-'0')
		}
		if data[start] == '-' {
			x = -x
		}
		v.SetInt(x)
		return nil
	}
	s := d.text(start, i)
	if isInt {
		if x, err := strconv.ParseInt(s, 10, 64); err == nil {
			v.SetInt(x)
			return nil
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		// Text that passed the grammar can only fail by range, and then f is the
		// nearest value: ±Inf, kept as documented on DecodeRecord.
		var ne *strconv.NumError
		if !errors.As(err, &ne) || ne.Err != strconv.ErrRange {
			d.pos = start
			return d.errorf("invalid number")
		}
	}
	v.SetDouble(f)
	return nil
}

// str decodes the string starting at d.pos (on the opening quote).
func (d *decoder) str() (string, error) {
	start := d.pos + 1
	data := d.data
	i := start
	ascii := true
	for i < len(data) {
		c := data[i]
		if c == '"' {
			raw := data[start:i]
			if !ascii && !utf8.Valid(raw) {
				break
			}
			d.pos = i + 1
			return d.text(start, i), nil
		}
		if c == '\\' || c < 0x20 {
			break
		}
		if c >= utf8.RuneSelf {
			ascii = false
		}
		i++
	}
	return d.slowStr(start)
}

// text is data[start:end] as a string the record may keep.
func (d *decoder) text(start, end int) string {
	if d.shared {
		return d.src[start:end]
	}
	return string(d.data[start:end])
}

// rawStr is str for a key only looked up: the string's bytes as they stand in data
// when it has no escapes and is valid UTF-8 (the usual case), read without copying;
// else its decoded text. The bytes are valid until the next call.
func (d *decoder) rawStr() ([]byte, error) {
	start := d.pos + 1
	data := d.data
	ascii := true
	for i := start; i < len(data); i++ {
		c := data[i]
		if c == '"' {
			if !ascii && !utf8.Valid(data[start:i]) {
				break
			}
			d.pos = i + 1
			return data[start:i], nil
		}
		if c == '\\' || c < 0x20 {
			break
		}
		if c >= utf8.RuneSelf {
			ascii = false
		}
	}
	if _, err := d.slowStr(start); err != nil {
		return nil, err
	}
	return d.buf, nil
}

// slowStr handles escapes and invalid UTF-8, decoding into a scratch buffer the way
// encoding/json does.
func (d *decoder) slowStr(start int) (string, error) {
	data := d.data
	b := d.buf[:0]
	i := start
	for {
		if i >= len(data) {
			d.pos = i
			return "", d.errorf("unexpected end of input in string")
		}
		c := data[i]
		switch {
		case c == '"':
			d.pos = i + 1
			d.buf = b
			return string(b), nil
		case c < 0x20:
			d.pos = i
			return "", d.errorf("invalid control character %q in string", c)
		case c == '\\':
			if i+1 >= len(data) {
				d.pos = i
				return "", d.errorf("unexpected end of input in string escape")
			}
			switch e := data[i+1]; e {
			case '"', '\\', '/':
				b = append(b, e)
				i += 2
			case 'b':
				b = append(b, '\b')
				i += 2
			case 'f':
				b = append(b, '\f')
				i += 2
			case 'n':
				b = append(b, '\n')
				i += 2
			case 'r':
				b = append(b, '\r')
				i += 2
			case 't':
				b = append(b, '\t')
				i += 2
			case 'u':
				r, ok := hex4(data, i+2)
				if !ok {
					d.pos = i
					return "", d.errorf("invalid \\u escape in string")
				}
				i += 6
				if utf16.IsSurrogate(r) {
					r2, ok2 := rune(-1), false
					if i+1 < len(data) && data[i] == '\\' && data[i+1] == 'u' {
						r2, ok2 = hex4(data, i+2)
					}
					if dec := utf16.DecodeRune(r, r2); ok2 && dec != utf8.RuneError {
						r = dec
						i += 6
					} else {
						r = utf8.RuneError
					}
				}
				b = utf8.AppendRune(b, r)
			default:
				d.pos = i
				return "", d.errorf("invalid escape character %q in string", e)
			}
		case c < utf8.RuneSelf:
			b = append(b, c)
			i++
		default:
			r, size := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && size == 1 {
				b = append(b, "\uFFFD"...)
			} else {
				b = append(b, data[i:i+size]...)
			}
			i += size
		}
	}
}

func hex4(data []byte, i int) (rune, bool) {
	if i+4 > len(data) {
		return 0, false
	}
	var r rune
	for _, c := range data[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}
