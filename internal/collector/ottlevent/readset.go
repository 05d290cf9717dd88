package ottlevent

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
)

// ReadSet is what expressions read of a record, finer than Reads: a top-level field
// whole, or only some keys of it when it is an object (and of the objects under those
// keys), as resource_attributes["service.name"] reads one key of resource_attributes.
// DecodeRecordReads decodes just that: a fingerprint over one resource attribute then
// costs one string, not the whole resource. The zero value reads nothing.
type ReadSet struct {
	top readNode
	// tree is top made for decoding (nil: reads nothing), once per set rather than
	// per record.
	tree *readTree
}

func newReadSet(top readNode) *ReadSet { return &ReadSet{top: top, tree: top.tree()} }

// readTree is a readNode for DecodeRecordReadsInto, which looks up every key of the
// objects it reads: most keys are not read, and their length says so without hashing
// them (as FieldSet does).
type readTree struct {
	lens [2]uint64 // bit n: some key is n bytes long, for n < 128
	long bool      // some key is 128 bytes or longer
	// kids are the keys read; a nil child reads the key's value whole.
	kids map[string]*readTree
}

func (n readNode) tree() *readTree {
	t := &readTree{kids: make(map[string]*readTree, len(n))}
	for k, child := range n {
		if child != nil {
			t.kids[k] = child.tree()
		} else {
			t.kids[k] = nil
		}
		if l := len(k); l < 128 {
			t.lens[l>>6] |= 1 << (l & 63)
		} else {
			t.long = true
		}
	}
	return t
}

// lookup says whether key is read, and below it which keys (nil: its whole value).
func (t *readTree) lookup(key []byte) (child *readTree, read bool) {
	if t == nil {
		return nil, false
	}
	if l := len(key); l < 128 {
		if t.lens[l>>6]&(1<<(l&63)) == 0 {
			return nil, false
		}
	} else if !t.long {
		return nil, false
	}
	child, read = t.kids[string(key)]
	return child, read
}

// readNode is the keys read of an object; a nil node under a key reads that key's
// value whole.
type readNode map[string]readNode

// add notes a path read from n: field, then keys as long as they are literal strings;
// past the last (or at an index or a key computed per record) the value is read whole.
func (n readNode) add(field string, keys []keySeg) {
	for {
		child, seen := n[field]
		if seen && child == nil {
			return // read whole already
		}
		if len(keys) == 0 || keys[0].kind != keyStr {
			n[field] = nil
			return
		}
		if child == nil {
			child = readNode{}
			n[field] = child
		}
		n, field, keys = child, keys[0].s, keys[1:]
	}
}

// union returns what n or o reads, sharing neither.
func (n readNode) union(o readNode) readNode {
	out := make(readNode, len(n)+len(o))
	for _, src := range []readNode{n, o} {
		for k, child := range src {
			cur, seen := out[k]
			switch {
			case !seen:
				if child != nil {
					child = child.union(nil)
				}
				out[k] = child
			case cur == nil || child == nil:
				out[k] = nil
			default:
				out[k] = cur.union(child)
			}
		}
	}
	return out
}

// Union returns what s or o reads.
func (s *ReadSet) Union(o *ReadSet) *ReadSet {
	var a, b readNode
	if s != nil {
		a = s.top
	}
	if o != nil {
		b = o.top
	}
	return newReadSet(a.union(b))
}

// ReadSet is Reads with the keys read below each field: ok is false when the condition
// may read the whole record.
func (c *Condition) ReadSet() (*ReadSet, bool) {
	return c.reads.readSet(c.cond == nil)
}

// ReadSet is Reads with the keys read below each field: ok is false when the
// expression may read the whole record.
func (v *ValueExpr) ReadSet() (*ReadSet, bool) {
	return v.reads.readSet(v.expr == nil)
}

func (rd *reads) readSet(empty bool) (*ReadSet, bool) {
	if rd.all || rd.fields == nil {
		if empty {
			return &ReadSet{}, true // an empty expression reads nothing
		}
		return nil, false
	}
	return newReadSet(rd.set.union(nil)), true
}

// DecodeRecordReads decodes what s reads of a record and skips the rest without building
// it, as DecodeRecordFields does for whole top-level fields: an object of which s reads
// some keys holds only those. Expressions whose ReadSet is within s evaluate on it as on
// the whole record; the result serves to evaluate them, never to re-encode the record.
func DecodeRecordReads(data []byte, signal string, s *ReadSet) (*Record, error) {
	return DecodeRecordReadsInto(nil, data, signal, s)
}

// DecodeRecordReadsInto is DecodeRecordReads into r, as DecodeRecordFieldsInto.
func DecodeRecordReadsInto(r *Record, data []byte, signal string, s *ReadSet) (*Record, error) {
	var top *readTree
	if s != nil {
		top = s.tree
	}
	// The few strings kept are copied each, rather than the whole record once.
	return decodeTop(r, data, signal, false, func(d *decoder, m pcommon.Map) error {
		return d.partialObject(m, top)
	})
}

// partialObject decodes the keys of n from the object whose '{' was consumed into m.
func (d *decoder) partialObject(m pcommon.Map, n *readTree) error {
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
	for {
		key, err := d.rawKey()
		if err != nil {
			return err
		}
		child, read := n.lookup(key)
		switch {
		case !read:
			err = d.skipValue()
		case child != nil && d.pos < len(d.data) && d.data[d.pos] == '{':
			d.pos++
			err = d.partialObject(putLast(m, keyString(key)).SetEmptyMap(), child)
		default:
			// Read whole, or not an object, of which keys read nothing.
			err = d.value(putLast(m, keyString(key)))
		}
		if err != nil {
			return err
		}
		if more, err := d.next(); err != nil || !more {
			return err
		}
	}
}
