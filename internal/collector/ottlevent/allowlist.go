package ottlevent

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl"
)

// Why an allow-list: OTTL's standard functions are written for an operator's own
// statements, and some make far more than they read before anything can measure the
// result: ExtractGrokPatterns with pattern definitions expanded a 383-byte
// statement into 150 MB while it was compiled, and a definition that refers to itself
// runs out of memory; flatten with a long prefix made 9.4 MB of a 3 KB record;
// ConvertTextToElementsXML with a long element name 23 MB. Here every project's
// statements are compiled and run in processes shared by all projects (the receiver's
// dry run, the validation responder, the pipeline), so a function is available only
// when it was reviewed for that, and a function a contrib upgrade adds stays refused
// until it is (TestEveryStandardFunctionIsReviewed fails meanwhile).

// argCheck refuses, when a statement is compiled, arguments that would let a function
// make far more than its input; nil allows any.
type argCheck func(args ottl.Arguments) error

// Bounds on the arguments of the functions allowed with conditions.
const (
	// maxGrokPattern and maxGrokRefs bound an ExtractGrokPatterns pattern: each %{NAME}
	// expands to one of the library's patterns (a few hundred bytes to a few KB of
	// regex), so the number of references bounds what is compiled.
	maxGrokPattern = 1024
	maxGrokRefs    = 16
	// maxFlattenPrefix bounds flatten's prefix, repeated in every key it makes.
	maxFlattenPrefix = 64
	// maxFlattenValues bounds the values one flatten makes: pcommon's map looks a key
	// up before each insert, so flattening n values costs n² comparisons.
	maxFlattenValues = 2000
	// maxXMLElementName bounds ConvertTextToElementsXML's element name, written twice
	// around every text node.
	maxXMLElementName = 32
	// maxReplacementFormat bounds the replace functions' replacementFormat, written
	// around every replacement (each match, each value).
	maxReplacementFormat = 256
	// maxKVDelimiter bounds ToKeyValueString's delimiters, written at every pair.
	maxKVDelimiter = 16
)

// allowedFunctions are the OTTL standard functions user pipelines may call, with the
// conditions on their arguments. Every other function stays at a constant factor of
// its input, which the record limit then bounds (boundConverter, checkRecord); Concat,
// Format and the regex replacements are replaced or wrapped to stop before building
// past it (limits.go).
var allowedFunctions = map[string]argCheck{
	// Editors.
	"clear": nil, "delete_key": nil, "delete_matching_keys": nil, "keep_matching_keys": nil, "keep_keys": nil,
	"limit": nil, "merge_maps": nil, "replace_all_matches": checkReplacementFormat, "replace_all_patterns": checkReplacementFormat,
	"replace_match": checkReplacementFormat, "replace_pattern": checkReplacementFormat, "set": nil, "stringify_all": nil, "truncate_all": nil, "append": nil, "delete_index": nil,
	"flatten": checkFlatten,
	// Converters that read, test, hash or convert one value.
	"Base64Encode": nil, "Bool": nil, "Decode": nil, "Coalesce": nil, "CommunityID": nil, "Concat": nil,
	"ContainsValue": nil, "ConvertCase": nil, "Day": nil, "Double": nil, "Duration": nil, "ExtractPatterns": nil,
	"FNV": nil, "HasPrefix": nil, "HasSuffix": nil, "Hour": nil, "Hours": nil, "Index": nil, "Int": nil,
	"IsBool": nil, "IsDouble": nil, "IsEmpty": nil, "IsList": nil, "IsInt": nil, "IsMap": nil, "IsMatch": nil,
	"IsString": nil, "Len": nil, "Log": nil, "IsValidLuhn": nil, "MD5": nil, "Microseconds": nil,
	"Milliseconds": nil, "Minute": nil, "Minutes": nil, "Month": nil, "Murmur3Hash": nil, "Murmur3Hash128": nil,
	"Nanosecond": nil, "Nanoseconds": nil, "Now": nil, "ParseCSV": nil, "ParseJSON": nil, "ParseKeyValue": nil,
	"Second": nil, "Seconds": nil, "SHA1": nil, "SHA256": nil, "SHA512": nil, "Sort": nil, "SpanID": nil,
	"Split": nil, "Format": nil, "String": nil, "Substring": nil, "Time": nil, "FormatTime": nil, "Trim": nil,
	"TrimPrefix": nil, "TrimSuffix": nil, "ToKeyValueString": checkKeyValueDelimiters, "ToCamelCase": nil, "ToLowerCase": nil,
	"ToSnakeCase": nil, "ToUpperCase": nil, "TruncateTime": nil, "TraceID": nil, "Unix": nil, "UnixMicro": nil,
	"UnixMilli": nil, "UnixNano": nil, "UnixSeconds": nil, "UUID": nil, "UUIDv7": nil, "URL": nil, "Values": nil,
	"Weekday": nil, "UserAgent": nil, "Year": nil, "Hex": nil,
	"SliceToMap": nil, "ParseSeverity": nil, "ParseInt": nil, "Keys": nil, "XXH3": nil, "XXH128": nil,
	"IsInCIDR": nil,
	// XML: parsing and removing keep to a constant factor of the document (its DOM);
	// attributes to elements writes each name twice.
	"ParseXML": nil, "ParseSimplifiedXML": nil, "RemoveXML": nil, "ConvertAttributesToElementsXML": nil,
	"ConvertTextToElementsXML": checkTextToElementsXML,
	"ExtractGrokPatterns":      checkGrok,
}

// refusedFunctions are the standard functions user pipelines may not call, and why: the
// message a save or a dry run answers (400 invalid_pipeline).
var refusedFunctions = map[string]string{
	"InsertXML": "it inserts its document at every node the XPath matches, so one call can multiply a record by its own size",
	"GetXML":    "it writes out every matching node with its whole subtree, so nested matches make a result quadratic in the document",
}

// errUnreviewedArgs: the function's arguments are not those reviewed (an OTTL upgrade
// changed their names or types), so it is refused when a statement is compiled rather
// than run unchecked, or let a reflective read of them panic in a shared process.
var errUnreviewedArgs = errors.New("this function's arguments changed; it is refused until reviewed")

// unreviewed is the refusal of a function whose arguments changed: a compile error
// (400 invalid_pipeline on save, the project paused in the pipeline), never a panic.
func unreviewed(name string) error {
	return &refusal{fmt.Sprintf("%q: %v", name, errUnreviewedArgs)}
}

// argStruct is the struct a function's arguments point to; ok is false when they are
// anything else, so that no reflective read below meets a kind it would panic on.
func argStruct(args ottl.Arguments) (reflect.Value, bool) {
	v := reflect.ValueOf(args)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return reflect.Value{}, false
	}
	v = v.Elem()
	return v, v.Kind() == reflect.Struct
}

// argField reads the exported argument name of an argStruct as a T; ok is false when
// there is no such field, it is not a T, or it is nil.
func argField[T any](v reflect.Value, name string) (T, bool) {
	var zero T
	f := v.FieldByName(name)
	if !f.IsValid() || !f.CanInterface() {
		return zero, false
	}
	switch f.Kind() {
	case reflect.Interface, reflect.Pointer, reflect.Func, reflect.Map, reflect.Slice, reflect.Chan, reflect.UnsafePointer:
		if f.IsNil() {
			return zero, false
		}
	}
	t, ok := f.Interface().(T)
	return t, ok
}

// optionalField reads an ottl.Optional argument of an argStruct by name; ok is false
// when the arguments have no such exported field of that type.
func optionalField[T any](v reflect.Value, name string) (*ottl.Optional[T], bool) {
	f := v.FieldByName(name)
	if !f.IsValid() || !f.CanAddr() || !f.CanInterface() {
		return nil, false
	}
	o, ok := f.Addr().Interface().(*ottl.Optional[T])
	return o, ok
}

func checkGrok(args ottl.Arguments) error {
	v, ok := argStruct(args)
	if !ok {
		return errUnreviewedArgs
	}
	defs, ok := optionalField[[]string](v, "PatternDefinitions")
	if !ok {
		return errUnreviewedArgs
	}
	if !defs.IsEmpty() {
		return fmt.Errorf("pattern definitions are not allowed: the library expands each reference in place, so a few nested definitions make gigabytes while compiling; use the built-in patterns or ExtractPatterns with a regex")
	}
	pattern, ok := argField[ottl.StringGetter[*Record]](v, "Pattern")
	if !ok {
		return errUnreviewedArgs
	}
	p, ok := ottl.GetLiteralValue(pattern)
	if !ok {
		return fmt.Errorf("the pattern must be a string literal: a pattern read from the record would be compiled for every record")
	}
	if len(p) > maxGrokPattern {
		return fmt.Errorf("the pattern is %d bytes; at most %d", len(p), maxGrokPattern)
	}
	if n := strings.Count(p, "%{"); n > maxGrokRefs {
		return fmt.Errorf("the pattern refers to %d patterns (%%{...}); at most %d, since each expands to the library's regex", n, maxGrokRefs)
	}
	return nil
}

func checkReplacementFormat(args ottl.Arguments) error {
	v, ok := argStruct(args)
	if !ok {
		return errUnreviewedArgs
	}
	f, ok := optionalField[ottl.StringGetter[*Record]](v, "ReplacementFormat")
	if !ok {
		return errUnreviewedArgs
	}
	if f.IsEmpty() {
		return nil
	}
	format, ok := ottl.GetLiteralValue(f.Get())
	if !ok {
		return errors.New("the replacement format must be a string literal: one read from the record would be written around every replacement")
	}
	if len(format) > maxReplacementFormat {
		return fmt.Errorf("the replacement format is %d bytes; at most %d, since it is written around every replacement", len(format), maxReplacementFormat)
	}
	return nil
}

// replacementFormatLen is the length of a replace function's literal replacementFormat
// (checkReplacementFormat made it literal), 0 without one.
func replacementFormatLen(v reflect.Value) int {
	if f, ok := optionalField[ottl.StringGetter[*Record]](v, "ReplacementFormat"); ok && !f.IsEmpty() {
		if format, ok := ottl.GetLiteralValue(f.Get()); ok {
			return len(format)
		}
	}
	return 0
}

func checkKeyValueDelimiters(args ottl.Arguments) error {
	v, ok := argStruct(args)
	if !ok {
		return errUnreviewedArgs
	}
	for _, name := range []string{"Delimiter", "PairDelimiter"} {
		d, ok := optionalField[string](v, name)
		if !ok {
			return errUnreviewedArgs
		}
		if !d.IsEmpty() && len(d.Get()) > maxKVDelimiter {
			return fmt.Errorf("a delimiter is %d bytes; at most %d, since it is written at every pair", len(d.Get()), maxKVDelimiter)
		}
	}
	return nil
}

func checkTextToElementsXML(args ottl.Arguments) error {
	v, ok := argStruct(args)
	if !ok {
		return errUnreviewedArgs
	}
	name, ok := optionalField[string](v, "ElementName")
	if !ok {
		return errUnreviewedArgs
	}
	if !name.IsEmpty() && len(name.Get()) > maxXMLElementName {
		return fmt.Errorf("the element name is %d bytes; at most %d, since it is written around every text node", len(name.Get()), maxXMLElementName)
	}
	return nil
}

func checkFlatten(args ottl.Arguments) error {
	v, ok := argStruct(args)
	if !ok {
		return errUnreviewedArgs
	}
	p, ok := optionalField[string](v, "Prefix")
	if !ok {
		return errUnreviewedArgs
	}
	if !p.IsEmpty() && len(p.Get()) > maxFlattenPrefix {
		return fmt.Errorf("the prefix is %d bytes; at most %d, since it starts every key flatten makes", len(p.Get()), maxFlattenPrefix)
	}
	return nil
}

// ErrFunctionRefused is what a statement refused by the allow-list fails with
// (errors.Is): a function not available in pipelines, or arguments past its bounds. A
// pipeline saved before the allow-list existed can fail with it after an upgrade.
var ErrFunctionRefused = errors.New("function refused in pipelines")

// refusal is a refused call's message, which is(ErrFunctionRefused).
type refusal struct{ msg string }

func (e *refusal) Error() string        { return e.msg }
func (e *refusal) Is(target error) bool { return target == ErrFunctionRefused }

// restrict gives f its review: a refused function compiles to an error naming it and
// why; an allowed one with conditions has its arguments checked first.
func restrict(name string, f ottl.Factory[*Record]) ottl.Factory[*Record] {
	check, allowed := allowedFunctions[name]
	why, isRefused := refusedFunctions[name]
	if allowed && check == nil {
		return f
	}
	if !allowed && !isRefused {
		why = "it has not been reviewed for pipelines that run in processes shared by every project"
	}
	var opts []ottl.FactoryOption[*Record]
	if f.Experimental() {
		opts = append(opts, ottl.WithExperimental[*Record]())
	}
	return ottl.NewFactory(name, f.CreateDefaultArguments(),
		func(fCtx ottl.FunctionContext, args ottl.Arguments) (ottl.ExprFunc[*Record], error) {
			if !allowed {
				return nil, &refusal{fmt.Sprintf("%q is not available in pipelines: %s", name, why)}
			}
			if err := check(args); err != nil {
				return nil, &refusal{fmt.Sprintf("%q: %v", name, err)}
			}
			return f.CreateFunction(fCtx, args)
		}, opts...)
}

// boundFlatten refuses, before flattening, a map whose flattened form would pass the
// record's limit or hold more than maxFlattenValues values. Every key flatten makes is
// its value's whole path, so a deep map's flattened form grows with the square of its
// depth; the walk below only adds lengths.
func boundFlatten(create ottl.CreateFunctionFunc[*Record]) ottl.CreateFunctionFunc[*Record] {
	return func(fCtx ottl.FunctionContext, args ottl.Arguments) (ottl.ExprFunc[*Record], error) {
		v, ok := argStruct(args)
		if !ok {
			return nil, unreviewed("flatten")
		}
		target, ok := argField[interface {
			Get(context.Context, *Record) (pcommon.Map, error)
		}](v, "Target")
		p, okPrefix := optionalField[string](v, "Prefix")
		if !ok || !okPrefix {
			return nil, unreviewed("flatten")
		}
		prefix := 0
		if !p.IsEmpty() {
			prefix = len(p.Get()) + 1
		}
		fn, err := create(fCtx, args)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, r *Record) (any, error) {
			m, err := target.Get(ctx, r)
			if err != nil {
				return fn(ctx, r) // flatten reports it as it does
			}
			limit := r.MaxBytes()
			fs := flatSize{limit: limit}
			fs.walkMap(m, prefix)
			if fs.values > maxFlattenValues {
				return nil, fmt.Errorf("flatten would make more than %d values; flatten a smaller map, or pass a depth", maxFlattenValues)
			}
			if fs.bytes > limit {
				return nil, &TooLargeError{Bytes: fs.bytes, Limit: limit, What: "flatten"}
			}
			return fn(ctx, r)
		}, nil
	}
}

// flatSize adds up, as if the map were flattened all the way down (the most a depth can
// make), its values and their size with their path as key. It stops past either bound.
type flatSize struct {
	limit, bytes, values int
}

func (f *flatSize) over() bool { return f.bytes > f.limit || f.values > maxFlattenValues }

func (f *flatSize) walkMap(m pcommon.Map, path int) {
	for k, v := range m.All() {
		f.walkValue(v, path+len(k)+1)
		if f.over() {
			return
		}
	}
}

func (f *flatSize) walkValue(v pcommon.Value, path int) {
	switch v.Type() {
	case pcommon.ValueTypeMap:
		f.walkMap(v.Map(), path)
	case pcommon.ValueTypeSlice:
		s := v.Slice()
		for i := 0; i < s.Len() && !f.over(); i++ {
			f.walkValue(s.At(i), path+digits(i)+1)
		}
	default:
		f.values++
		f.bytes += path + 4 + valueSize(v, f.limit)
	}
}

func digits(i int) int {
	n := 1
	for ; i >= 10; i /= 10 {
		n++
	}
	return n
}
