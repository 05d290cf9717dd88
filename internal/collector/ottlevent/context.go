package ottlevent

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl/ottlfuncs"

	"github.com/otelcol-svc/otelcol-svc/internal/ottlpath"
)

// ContextName is the name of the record as a whole in expressions (`event`, or the
// optional prefix `event.`). It, signal and the aliases of a log record's camelCase
// fields (severity_number...) are internal/ottlpath's, the rules the Fields view and
// the dashboard write paths by.
const ContextName = ottlpath.Context

var errSignalReadOnly = errors.New(`signal is read-only: it says where the record came from; write to event["signal"] to set a field of that name`)

// keySeg is one [key] of a path. Literal keys are resolved when the expression is
// compiled so that evaluating a path costs only the map lookups.
type keySeg struct {
	kind uint8 // keyStr, keyInt or keyDyn
	s    string
	i    int64
	dyn  ottl.Key[*Record]
}

const (
	keyStr uint8 = iota
	keyInt
	keyDyn
)

// resolve returns the key as a string (isInt false) or an int (isInt true). Literal
// keys are answered inline, without a call: paths are read on every record.
func (k *keySeg) resolve(ctx context.Context, r *Record) (s string, i int64, isInt bool, err error) {
	switch k.kind {
	case keyStr:
		return k.s, 0, false, nil
	case keyInt:
		return "", k.i, true, nil
	}
	return k.resolveDyn(ctx, r)
}

func (k *keySeg) resolveDyn(ctx context.Context, r *Record) (s string, i int64, isInt bool, err error) {
	g, err := k.dyn.ExpressionGetter(ctx, r)
	if err != nil {
		return "", 0, false, err
	}
	if g == nil {
		return "", 0, false, errors.New("invalid key")
	}
	v, err := g.Get(ctx, r)
	if err != nil {
		return "", 0, false, err
	}
	switch v := v.(type) {
	case string:
		return v, 0, false, nil
	case int64:
		return "", v, true, nil
	}
	return "", 0, false, fmt.Errorf("a key must be a string or an int, got %T", v)
}

// fieldPath is a path into the record: a top-level field (or the whole record) and
// keys below it.
type fieldPath struct {
	root bool // the whole record; keys (if any) start with a dynamic top-level key
	// field is the top-level key. For an alias it is the camelCase name and alt is
	// the name as written, used when only that one is present (an event sent with
	// its own "trace_id" field still answers to trace_id).
	field string
	alt   string
	// slot and altSlot are the places of field and alt in Record.top, or -1.
	slot, altSlot int
	keys          []keySeg
	text          string
}

func newFieldPath(field, alt string, keys []keySeg, text string) *fieldPath {
	p := &fieldPath{field: field, alt: alt, keys: keys, text: text, slot: topSlot(field), altSlot: -1}
	if alt != "" {
		p.altSlot = topSlot(alt)
	}
	return p
}

func (p *fieldPath) String() string { return p.text }

// Get never fails because of the record's shape: a missing field, a key into a
// scalar, a string key into a list or an index past its end all read as nil. Triggers
// run over records of every source, and a record that lacks a field simply does not
// match, which an error per record would only make noisy.
func (p *fieldPath) Get(ctx context.Context, r *Record) (any, error) {
	keys := p.keys
	var v pcommon.Value
	var ok bool
	switch {
	case p.root && len(keys) == 0:
		// The caller may change the map in place (delete_key(event, ...)).
		return r.Map(), nil
	case p.root:
		name, _, isInt, err := keys[0].resolve(ctx, r)
		if err != nil {
			return nil, err
		}
		if isInt {
			return nil, nil
		}
		v, ok = r.lookupTop(name, topSlot(name))
		keys = keys[1:]
	default:
		v, ok = r.lookupTop(p.field, p.slot)
		if !ok && p.alt != "" {
			v, ok = r.lookupTop(p.alt, p.altSlot)
		}
	}
	if !ok {
		return nil, nil
	}
	for i := range keys {
		k := &keys[i]
		s, idx, isInt := k.s, k.i, k.kind == keyInt
		if k.kind == keyDyn {
			var err error
			if s, idx, isInt, err = k.resolveDyn(ctx, r); err != nil {
				return nil, err
			}
		}
		switch v.Type() {
		case pcommon.ValueTypeMap:
			if isInt {
				return nil, nil
			}
			if v, ok = v.Map().Get(s); !ok {
				return nil, nil
			}
		case pcommon.ValueTypeSlice:
			if !isInt || idx < 0 || idx >= int64(v.Slice().Len()) {
				return nil, nil
			}
			v = v.Slice().At(int(idx))
		default:
			return nil, nil
		}
	}
	return getValue(v), nil
}

// Set creates what is missing along the path, as OTTL's own contexts do for
// attributes: set(event["a"]["b"], 1) on a record without "a" makes "a" an object.
// It refuses to replace a scalar or list by an object on the way, which would
// silently destroy data.
func (p *fieldPath) Set(ctx context.Context, r *Record, val any) error {
	if err := checkWrite(r, val); err != nil {
		return err
	}
	for i := range p.keys {
		if k := &p.keys[i]; k.kind == keyInt {
			// Refused before anything along the path is created.
			if err := checkListIndex(r, k.i); err != nil {
				return err
			}
		}
	}
	r.writes++
	r.changed = true
	r.unindex()
	keys := p.keys
	var v pcommon.Value
	switch {
	case p.root && len(keys) == 0:
		return setRecord(r, val)
	case p.root:
		name, _, isInt, err := keys[0].resolve(ctx, r)
		if err != nil {
			return err
		}
		if isInt {
			return fmt.Errorf("cannot set %s: the record is an object, its keys are strings", p.text)
		}
		v, _ = r.m.GetOrPutEmpty(name)
		keys = keys[1:]
	default:
		name := p.field
		if p.alt != "" {
			if _, ok := r.m.Get(p.field); !ok {
				if _, ok := r.m.Get(p.alt); ok {
					name = p.alt
				}
			}
		}
		v, _ = r.m.GetOrPutEmpty(name)
	}
	for i := range keys {
		s, idx, isInt, err := keys[i].resolve(ctx, r)
		if err != nil {
			return err
		}
		switch v.Type() {
		case pcommon.ValueTypeMap:
			if isInt {
				return fmt.Errorf("cannot set %s: an object is indexed by a string, not %d", p.text, idx)
			}
			v, _ = v.Map().GetOrPutEmpty(s)
		case pcommon.ValueTypeSlice:
			if !isInt {
				return fmt.Errorf("cannot set %s: a list is indexed by an int, not %q", p.text, s)
			}
			if idx < 0 || idx >= int64(v.Slice().Len()) {
				return fmt.Errorf("cannot set %s: index %d out of range (list of %d)", p.text, idx, v.Slice().Len())
			}
			v = v.Slice().At(int(idx))
		case pcommon.ValueTypeEmpty:
			if isInt {
				// set(event["x"][2000000], 1) would make two million empty values
				// before any size is measured: an index the record's limit cannot
				// hold fails first, allocating nothing.
				if err := checkListIndex(r, idx); err != nil {
					return err
				}
				sl := v.SetEmptySlice()
				for j := int64(0); j < idx; j++ {
					sl.AppendEmpty()
				}
				v = sl.AppendEmpty()
			} else {
				v = v.SetEmptyMap().PutEmpty(s)
			}
		default:
			return fmt.Errorf("cannot set %s: a %s value has no keys", p.text, strings.ToLower(v.Type().String()))
		}
	}
	return setValue(v, val)
}

func setRecord(r *Record, val any) error {
	switch v := val.(type) {
	case pcommon.Map:
		// A no-op when v is the record itself (delete_key(event, ...) writes back the
		// map it edited).
		v.CopyTo(r.m)
		return nil
	case map[string]any:
		return r.m.FromRaw(v)
	case nil:
		r.m.Clear()
		return nil
	}
	return fmt.Errorf("cannot set event to a %T: the record must stay an object", val)
}

// signalPath is the read-only `signal` path.
type signalPath struct{}

func (signalPath) Get(_ context.Context, r *Record) (any, error) { return r.signal, nil }

func (signalPath) Set(context.Context, *Record, any) error { return errSignalReadOnly }

// getValue is OTTL's usual mapping from pcommon values to Go values
// (ottlcommon.GetValue, which is internal).
func getValue(v pcommon.Value) any {
	switch v.Type() {
	case pcommon.ValueTypeStr:
		return v.Str()
	case pcommon.ValueTypeBool:
		return v.Bool()
	case pcommon.ValueTypeInt:
		return v.Int()
	case pcommon.ValueTypeDouble:
		return v.Double()
	case pcommon.ValueTypeMap:
		return v.Map()
	case pcommon.ValueTypeSlice:
		return v.Slice()
	case pcommon.ValueTypeBytes:
		return v.Bytes().AsRaw()
	}
	return nil
}

// setValue is OTTL's usual assignment of a Go value to a pcommon value
// (ctxutil.SetValue, which is internal), so that set() behaves here as it does on
// attributes in the collector's own contexts.
func setValue(value pcommon.Value, val any) error {
	switch v := val.(type) {
	case nil:
		pcommon.NewValueEmpty().CopyTo(value)
	case string:
		value.SetStr(v)
	case bool:
		value.SetBool(v)
	case int64:
		value.SetInt(v)
	case float64:
		value.SetDouble(v)
	case []byte:
		value.SetEmptyBytes().FromRaw(v)
	case []string:
		s := value.SetEmptySlice()
		s.EnsureCapacity(len(v))
		for _, x := range v {
			s.AppendEmpty().SetStr(x)
		}
	case []bool:
		s := value.SetEmptySlice()
		s.EnsureCapacity(len(v))
		for _, x := range v {
			s.AppendEmpty().SetBool(x)
		}
	case []int64:
		s := value.SetEmptySlice()
		s.EnsureCapacity(len(v))
		for _, x := range v {
			s.AppendEmpty().SetInt(x)
		}
	case []float64:
		s := value.SetEmptySlice()
		s.EnsureCapacity(len(v))
		for _, x := range v {
			s.AppendEmpty().SetDouble(x)
		}
	case [][]byte:
		s := value.SetEmptySlice()
		s.EnsureCapacity(len(v))
		for _, x := range v {
			s.AppendEmpty().SetEmptyBytes().FromRaw(x)
		}
	case []any:
		s := value.SetEmptySlice()
		s.EnsureCapacity(len(v))
		for _, x := range v {
			if err := setValue(s.AppendEmpty(), x); err != nil {
				return err
			}
		}
	case pcommon.Slice:
		if value.Type() == pcommon.ValueTypeSlice {
			v.CopyTo(value.Slice())
		} else {
			v.CopyTo(value.SetEmptySlice())
		}
	case pcommon.Map:
		if value.Type() == pcommon.ValueTypeMap {
			v.CopyTo(value.Map())
		} else {
			v.CopyTo(value.SetEmptyMap())
		}
	case pcommon.Value:
		v.CopyTo(value)
	case map[string]any:
		return value.FromRaw(v)
	default:
		return fmt.Errorf("cannot set a value of type %T", val)
	}
	return nil
}

// parsePath is the PathExpressionParser of the event context. The parser runs
// without context names (see newParser), so every path arrives as plain segments:
// `event.body` is the segments event, body.
func parsePath(path ottl.Path[*Record]) (ottl.GetSetter[*Record], error) {
	if path == nil {
		return nil, errors.New("empty path")
	}
	text := path.String()
	name, keys, next := path.Name(), path.Keys(), path.Next()
	prefixed := false
	if name == ContextName && next != nil {
		if len(keys) > 0 {
			return nil, fmt.Errorf(`invalid path %q: a field below a key is reached with another key, e.g. event["a"]["b"]`, text)
		}
		// event.x is the explicit form of x, as log.body is of body in OTTL's log
		// context.
		name, keys, next = next.Name(), next.Keys(), next.Next()
		prefixed = true
	}
	if next != nil {
		return nil, fmt.Errorf(`invalid path %q: nested fields are reached with keys, e.g. %s["%s"]; top-level fields are bare names (body) or event["name"]`, text, name, next.Name())
	}
	segs, err := compileKeys(keys)
	if err != nil {
		return nil, fmt.Errorf("invalid path %q: %w", text, err)
	}
	switch {
	case name == ContextName && !prefixed:
		if len(segs) > 0 {
			switch segs[0].kind {
			case keyInt:
				return nil, fmt.Errorf("invalid path %q: the record is an object, index it with a string key", text)
			case keyStr:
				// event["x"]... is the same path as the bare x..., minus aliases.
				return newFieldPath(segs[0].s, "", segs[1:], ContextName+keysText(segs)), nil
			}
		}
		return &fieldPath{root: true, keys: segs, text: ContextName + keysText(segs), slot: -1, altSlot: -1}, nil
	case name == ottlpath.Signal:
		if len(segs) > 0 {
			return nil, fmt.Errorf("invalid path %q: signal is a string and has no keys", text)
		}
		return signalPath{}, nil
	}
	if camel, ok := ottlpath.Field(name); ok {
		return newFieldPath(camel, name, segs, name+keysText(segs)), nil
	}
	return newFieldPath(name, "", segs, name+keysText(segs)), nil
}

// keysText writes keys the way users do (OTTL's own Path.String drops the quotes),
// for messages about a path.
func keysText(segs []keySeg) string {
	var b strings.Builder
	for _, k := range segs {
		switch k.kind {
		case keyStr:
			b.WriteString("[" + strconv.Quote(k.s) + "]")
		case keyInt:
			b.WriteString("[" + strconv.FormatInt(k.i, 10) + "]")
		default:
			b.WriteString("[...]")
		}
	}
	return b.String()
}

func compileKeys(keys []ottl.Key[*Record]) ([]keySeg, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	segs := make([]keySeg, len(keys))
	ctx := context.Background()
	for i, k := range keys {
		// Literal keys do not depend on the record; asking with a nil one is how
		// OTTL's own contexts read them too.
		s, err := k.String(ctx, nil)
		if err != nil {
			return nil, err
		}
		if s != nil {
			segs[i] = keySeg{kind: keyStr, s: *s}
			continue
		}
		n, err := k.Int(ctx, nil)
		if err != nil {
			return nil, err
		}
		if n != nil {
			segs[i] = keySeg{kind: keyInt, i: *n}
			continue
		}
		segs[i] = keySeg{kind: keyDyn, dyn: k}
	}
	return segs, nil
}

// severityEnums are OTTL's SEVERITY_NUMBER_* symbols, so that triggers written for the
// collector's log context (severity_number >= SEVERITY_NUMBER_ERROR) work unchanged.
var severityEnums = sync.OnceValue(func() map[ottl.EnumSymbol]ottl.Enum {
	m := make(map[ottl.EnumSymbol]ottl.Enum, 25)
	for n := plog.SeverityNumberUnspecified; n <= plog.SeverityNumberFatal4; n++ {
		m[ottl.EnumSymbol("SEVERITY_NUMBER_"+strings.ToUpper(n.String()))] = ottl.Enum(n)
	}
	return m
})

func parseEnum(sym *ottl.EnumSymbol) (*ottl.Enum, error) {
	if sym == nil {
		return nil, errors.New("enum symbol not provided")
	}
	if e, ok := severityEnums()[*sym]; ok {
		return &e, nil
	}
	return nil, fmt.Errorf("enum symbol %s not found; the event context knows SEVERITY_NUMBER_*", *sym)
}

// functions are OTTL's standard editors and converters. Editors are wrapped so that
// a statement writing to `signal` is refused when it is compiled, not on every
// record.
var functions = sync.OnceValue(func() map[string]ottl.Factory[*Record] {
	fs := ottlfuncs.StandardFuncs[*Record]()
	fs["Concat"] = newConcatFactory()
	fs["Format"] = newFormatFactory()
	for name, f := range fs {
		// Refused functions stay in the map so that their use is answered with why.
		f = restrict(name, f)
		if name == "" || name[0] < 'a' || name[0] > 'z' {
			// Converters only read, but may make a value larger than the record.
			fs[name] = boundConverter(name, f)
			continue
		}
		var opts []ottl.FactoryOption[*Record]
		if f.Experimental() {
			opts = append(opts, ottl.WithExperimental[*Record]())
		}
		create := f.CreateFunction
		if name == "replace_pattern" || name == "replace_all_patterns" {
			create = boundReplace(name, create)
		}
		if name == "flatten" {
			create = boundFlatten(create)
		}
		fs[name] = ottl.NewFactory(name, f.CreateDefaultArguments(),
			func(fCtx ottl.FunctionContext, args ottl.Arguments) (ottl.ExprFunc[*Record], error) {
				if writesSignal(args) {
					return nil, errSignalReadOnly
				}
				return create(fCtx, args)
			}, opts...)
	}
	return fs
})

// writesSignal reports whether an editor's arguments make `signal` a write target.
// OTTL builds every argument whose type ends in "Setter" from a path, so those are the
// only ones to look at: either our signalPath itself (set) or OTTL's wrapper for map
// and list targets (delete_key, merge_maps...), whose Setter func is tried on a
// throwaway record, since a func value cannot be compared.
func writesSignal(args ottl.Arguments) bool {
	v := reflect.ValueOf(args)
	if v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return false
	}
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		name, _, _ := strings.Cut(f.Type().Name(), "[")
		if !strings.HasSuffix(name, "Setter") || f.Kind() != reflect.Interface || f.IsNil() || !f.CanInterface() {
			continue
		}
		if _, ok := f.Interface().(signalPath); ok {
			return true
		}
		if target := f.Elem(); target.Kind() == reflect.Struct {
			if s := target.FieldByName("Setter"); s.IsValid() && s.Kind() == reflect.Func && !s.IsNil() && s.CanInterface() && setterRefuses(s) {
				return true
			}
		}
	}
	return false
}

func setterRefuses(set reflect.Value) (refused bool) {
	t := set.Type()
	if t.NumIn() != 3 || t.NumOut() != 1 || t.In(1) != reflect.TypeFor[*Record]() {
		return false
	}
	defer func() {
		if recover() != nil {
			refused = false
		}
	}()
	var val reflect.Value
	switch t.In(2) {
	case reflect.TypeFor[pcommon.Map]():
		val = reflect.ValueOf(pcommon.NewMap())
	case reflect.TypeFor[pcommon.Slice]():
		val = reflect.ValueOf(pcommon.NewSlice())
	default:
		val = reflect.Zero(t.In(2))
	}
	scratch := NewRecord(pcommon.NewMap(), "")
	out := set.Call([]reflect.Value{reflect.ValueOf(context.Background()), reflect.ValueOf(scratch), val})
	err, _ := out[0].Interface().(error)
	return errors.Is(err, errSignalReadOnly)
}
