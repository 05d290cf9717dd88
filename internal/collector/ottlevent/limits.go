package ottlevent

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl"
)

// Why this file: OTTL bounds nothing (contrib's transform processor trusts its
// operator's statements), but here every project writes its own, and they run in a
// process shared by all projects. Seventeen `set(b, Concat([b, b], ""))` made 128 MiB of
// one 1 KiB record. So a record has a size limit while it is evaluated: every write is
// checked before it is made, the whole record after each statement that wrote, and the
// converters that can make more than they read (Concat, Format) stop as soon as their
// result passes the limit, so nesting them cannot multiply past it either.

// DefaultMaxRecordBytes is the limit of a record that was given none: the receiver's
// SVC_MAX_RECORD_BYTES default, the largest record the raw stream takes.
const DefaultMaxRecordBytes = 1_000_000

// ErrRecordTooLarge is what a *TooLargeError is (errors.Is).
var ErrRecordTooLarge = errors.New("record too large after transforms")

// TooLargeError is a value or a record that would pass the record limit. The record
// it happened on fails whole: it is never sent half transformed.
type TooLargeError struct {
	// Bytes is the (approximate, see Size) size reached, at least Limit+1; Limit the
	// limit.
	Bytes, Limit int
	// What says what grew: "the record", or a converter's name.
	What string
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("%s would be %d bytes or more, over the record limit of %d bytes (SVC_MAX_RECORD_BYTES)", e.What, e.Bytes, e.Limit)
}

func (e *TooLargeError) Is(target error) bool { return target == ErrRecordTooLarge }

// SetMaxBytes sets the record's limit (n <= 0: DefaultMaxRecordBytes).
func (r *Record) SetMaxBytes(n int) { r.max = n }

// MaxBytes is the record's limit.
func (r *Record) MaxBytes() int {
	if r == nil || r.max <= 0 {
		return DefaultMaxRecordBytes
	}
	return r.max
}

// Size is the record's approximate size as JSON: strings and keys are counted
// unescaped, numbers as 8 bytes, bytes as their base64. It walks the map without
// encoding anything (cheaper than AppendJSON by far) and stops as soon as it passes
// stopAt, so checking a record much larger than the limit costs no more than the limit.
func (r *Record) Size() int { return mapSize(r.m, maxInt) }

const maxInt = int(^uint(0) >> 1)

func mapSize(m pcommon.Map, stopAt int) int {
	n := 2
	for k, v := range m.All() {
		n += len(k) + 4 + valueSize(v, stopAt-n)
		if n > stopAt {
			return n
		}
	}
	return n
}

func sliceSize(s pcommon.Slice, stopAt int) int {
	n := 2
	for i := 0; i < s.Len(); i++ {
		n += 1 + valueSize(s.At(i), stopAt-n)
		if n > stopAt {
			return n
		}
	}
	return n
}

func valueSize(v pcommon.Value, stopAt int) int {
	switch v.Type() {
	case pcommon.ValueTypeStr:
		return len(v.Str()) + 2
	case pcommon.ValueTypeBytes:
		return (v.Bytes().Len()+2)/3*4 + 2
	case pcommon.ValueTypeMap:
		return mapSize(v.Map(), stopAt)
	case pcommon.ValueTypeSlice:
		return sliceSize(v.Slice(), stopAt)
	}
	return 8
}

// anySize is valueSize for the Go values OTTL passes around.
func anySize(val any, stopAt int) int {
	switch v := val.(type) {
	case nil, bool, int64, float64:
		return 8
	case string:
		return len(v) + 2
	case []byte:
		return (len(v)+2)/3*4 + 2
	case pcommon.Map:
		return mapSize(v, stopAt)
	case pcommon.Slice:
		return sliceSize(v, stopAt)
	case pcommon.Value:
		return valueSize(v, stopAt)
	case []string:
		n := 2
		for _, s := range v {
			n += len(s) + 3
		}
		return n
	case []any:
		n := 2
		for _, x := range v {
			n += 1 + anySize(x, stopAt-n)
			if n > stopAt {
				return n
			}
		}
		return n
	case map[string]any:
		n := 2
		for k, x := range v {
			n += len(k) + 4 + anySize(x, stopAt-n)
			if n > stopAt {
				return n
			}
		}
		return n
	case []int64, []float64, []bool:
		return 8 * lenOf(v)
	case [][]byte:
		n := 2
		for _, b := range v {
			n += (len(b)+2)/3*4 + 3
		}
		return n
	}
	return 8
}

func lenOf(v any) int {
	switch s := v.(type) {
	case []int64:
		return len(s)
	case []float64:
		return len(s)
	case []bool:
		return len(s)
	}
	return 0
}

// checkWrite refuses to write val into r when val alone passes the limit.
func checkWrite(r *Record, val any) error {
	limit := r.MaxBytes()
	if n := anySize(val, limit); n > limit {
		return &TooLargeError{Bytes: n, Limit: limit, What: "the value written"}
	}
	return nil
}

// emptyElemSize is what an empty list element counts in Size: a null and its comma.
const emptyElemSize = 9

// checkListIndex refuses to grow a new list up to index idx when the empty values before
// it alone would pass the record's limit. A negative index is left to Set's own error.
func checkListIndex(r *Record, idx int64) error {
	limit := r.MaxBytes()
	if idx >= 0 && idx >= int64(limit/emptyElemSize) {
		n := limit + 1
		if idx < int64(maxInt/emptyElemSize) {
			n = max(n, int(idx+1)*emptyElemSize)
		}
		return &TooLargeError{Bytes: n, Limit: limit, What: fmt.Sprintf("a list grown to index %d", idx)}
	}
	return nil
}

// checkRecord fails r once it passes its limit.
func checkRecord(r *Record) error {
	limit := r.MaxBytes()
	if n := mapSize(r.m, limit); n > limit {
		return &TooLargeError{Bytes: n, Limit: limit, What: "the record"}
	}
	return nil
}

// boundConverter makes a converter fail when its result passes the record's limit, so a
// nested converter (Hex(Hex(...)), String of a String) hands the next one at most a
// record's worth. Results that are scalars cost nothing to check.
func boundConverter(name string, f ottl.Factory[*Record]) ottl.Factory[*Record] {
	var opts []ottl.FactoryOption[*Record]
	if f.Experimental() {
		opts = append(opts, ottl.WithExperimental[*Record]())
	}
	return ottl.NewFactory(name, f.CreateDefaultArguments(),
		func(fCtx ottl.FunctionContext, args ottl.Arguments) (ottl.ExprFunc[*Record], error) {
			fn, err := f.CreateFunction(fCtx, args)
			if err != nil {
				return nil, err
			}
			return func(ctx context.Context, r *Record) (any, error) {
				v, err := fn(ctx, r)
				if err != nil {
					return v, err
				}
				switch v.(type) {
				case nil, bool, int64, float64:
					return v, nil
				}
				limit := r.MaxBytes()
				if n := anySize(v, limit); n > limit {
					return nil, &TooLargeError{Bytes: n, Limit: limit, What: name}
				}
				return v, nil
			}, nil
		}, opts...)
}

// concatArguments are those of OTTL's Concat, which this replaces.
type concatArguments struct {
	Vals      ottl.SliceGetter[*Record, ottl.StringLikeGetter[*Record]]
	Delimiter ottl.StringGetter[*Record]
}

// newConcatFactory is OTTL's Concat (same arguments, same result) that stops as soon as
// its result passes the record's limit: Concat([b, b, b, ...]) of a large b would
// otherwise allocate the whole product before anything could look at it.
func newConcatFactory() ottl.Factory[*Record] {
	return ottl.NewFactory("Concat", &concatArguments{}, func(_ ottl.FunctionContext, oArgs ottl.Arguments) (ottl.ExprFunc[*Record], error) {
		args, ok := oArgs.(*concatArguments)
		if !ok {
			return nil, errors.New("Concat args must be of type *concatArguments")
		}
		return func(ctx context.Context, r *Record) (any, error) {
			delim, err := args.Delimiter.Get(ctx, r)
			if err != nil {
				return nil, err
			}
			limit := r.MaxBytes()
			var b strings.Builder
			first := true
			var elemErr error
			_, err = args.Vals.Range(ctx, r, func(g ottl.StringLikeGetter[*Record]) bool {
				s, ok, err := g.Get(ctx, r)
				if err != nil {
					elemErr = err
					return false
				}
				if !ok {
					s = "<nil>" // as OTTL's Concat writes a nil element
				}
				if !first {
					if b.Len()+len(delim) > limit {
						elemErr = &TooLargeError{Bytes: b.Len() + len(delim), Limit: limit, What: "Concat"}
						return false
					}
					b.WriteString(delim)
				}
				first = false
				if b.Len()+len(s) > limit {
					elemErr = &TooLargeError{Bytes: b.Len() + len(s), Limit: limit, What: "Concat"}
					return false
				}
				b.WriteString(s)
				return true
			})
			if err != nil {
				return nil, err
			}
			if elemErr != nil {
				return nil, elemErr
			}
			return b.String(), nil
		}, nil
	})
}

// formatArguments are those of OTTL's Format, which this replaces.
type formatArguments struct {
	Format string
	Vals   []ottl.Getter[*Record]
}

var digitsRe = regexp.MustCompile(`[0-9]+`)

// newFormatFactory is OTTL's Format, refusing before formatting when the result could
// pass the record's limit: a format like "%[1]s%[1]s..." repeats one argument without
// reading it again, and fmt cannot be stopped half way. The bound is the format's length
// plus, for each verb, the largest argument, an overestimate only when arguments differ
// much in size.
func newFormatFactory() ottl.Factory[*Record] {
	return ottl.NewFactory("Format", &formatArguments{}, func(_ ottl.FunctionContext, oArgs ottl.Arguments) (ottl.ExprFunc[*Record], error) {
		args, ok := oArgs.(*formatArguments)
		if !ok {
			return nil, errors.New("Format args must be of type *formatArguments")
		}
		verbs := strings.Count(args.Format, "%") - 2*strings.Count(args.Format, "%%")
		// Widths and precisions pad ("%999999999s" of a short string): every number in
		// the format counts, and "*" takes them from the arguments.
		padding := 0
		for _, d := range digitsRe.FindAllString(args.Format, -1) {
			if len(d) > 9 {
				padding = maxInt / 2
				break
			}
			n, _ := strconv.Atoi(d)
			padding += n
		}
		starred := strings.Contains(args.Format, "*")
		return func(ctx context.Context, r *Record) (any, error) {
			limit := r.MaxBytes()
			vals := make([]any, 0, len(args.Vals))
			largest := 0
			for _, g := range args.Vals {
				v, err := g.Get(ctx, r)
				if err != nil {
					return nil, err
				}
				largest = max(largest, anySize(v, limit))
				if i, ok := v.(int64); ok && starred {
					padding += int(min(max(i, -i), int64(limit)+1))
				}
				vals = append(vals, v)
			}
			if n := len(args.Format) + padding + verbs*largest; n > limit {
				return nil, &TooLargeError{Bytes: n, Limit: limit, What: "Format"}
			}
			return fmt.Sprintf(args.Format, vals...), nil
		}, nil
	})
}

// boundReplace makes replace_pattern and replace_all_patterns refuse, before replacing,
// a result that could pass the record's limit. A replacement is repeated at every match
// (replace_pattern(b, ".", b) squares b's length) and Go's regexp cannot be stopped
// half way, so the matches are walked first, adding each one's largest expansion: the
// replacement's length, plus the match's for every $ in it (a group is at most the
// match), plus room for a hash when a function is applied to it.
func boundReplace(name string, create ottl.CreateFunctionFunc[*Record]) ottl.CreateFunctionFunc[*Record] {
	return func(fCtx ottl.FunctionContext, args ottl.Arguments) (ottl.ExprFunc[*Record], error) {
		v, ok := argStruct(args)
		if !ok {
			return nil, unreviewed(name)
		}
		var target ottl.Getter[*Record]
		t, _ := argField[any](v, "Target")
		switch t := t.(type) {
		case ottl.Getter[*Record]:
			target = t
		case interface {
			Get(context.Context, *Record) (pcommon.Map, error)
		}:
			target = ottl.StandardGetSetter[*Record]{Getter: func(ctx context.Context, r *Record) (any, error) { return t.Get(ctx, r) }}
		}
		pattern, okPattern := argField[ottl.StringGetter[*Record]](v, "RegexPattern")
		repl, okRepl := argField[ottl.StringGetter[*Record]](v, "Replacement")
		function, okFunction := optionalField[ottl.FunctionGetter[*Record]](v, "Function")
		if target == nil || !okPattern || !okRepl || !okFunction {
			return nil, unreviewed(name)
		}
		slack := 0
		if !function.IsEmpty() {
			// The hash functions it takes answer at most 128 hex digits, written in
			// the replacement format when there is one.
			slack = 128 + replacementFormatLen(v)
		}
		// replace_all_patterns replaces values or keys (its mode); replace_pattern has
		// one string.
		byKey := false
		if name == "replace_all_patterns" {
			mode, ok := argField[string](v, "Mode")
			if !ok {
				return nil, unreviewed(name)
			}
			byKey = mode == "key"
		}
		fn, err := create(fCtx, args)
		if err != nil {
			return nil, err
		}
		var literal *regexp.Regexp
		if p, ok := ottl.GetLiteralValue(pattern); ok {
			literal, _ = regexp.Compile(p) // create refused it already when invalid
		}
		return func(ctx context.Context, r *Record) (any, error) {
			limit := r.MaxBytes()
			val, err := target.Get(ctx, r)
			if err != nil {
				return fn(ctx, r) // the editor reports it as it does
			}
			re := literal
			if re == nil {
				p, err := pattern.Get(ctx, r)
				if err != nil {
					return fn(ctx, r)
				}
				if re, err = regexp.Compile(p); err != nil {
					return fn(ctx, r)
				}
			}
			rs, err := repl.Get(ctx, r)
			if err != nil {
				return fn(ctx, r)
			}
			perMatch, dollars := len(rs)+slack, strings.Count(rs, "$")
			total := 0
			add := func(s string) bool {
				total += replacedSize(re, s, perMatch, dollars)
				return total <= limit
			}
			ok := true
			switch t := val.(type) {
			case string:
				ok = add(t)
			case pcommon.Map:
				for k, v := range t.All() {
					if byKey {
						ok = add(k)
					} else if v.Type() == pcommon.ValueTypeStr {
						ok = add(v.Str())
					}
					if !ok {
						break
					}
				}
			}
			if !ok {
				return nil, &TooLargeError{Bytes: total, Limit: limit, What: name}
			}
			return fn(ctx, r)
		}, nil
	}
}

// replacedSize is at most the length of s with every match of re replaced by a
// replacement of perMatch bytes holding dollars group references.
//
// The matches are found over the whole string, as the replacement finds them: searching
// each rest of s on its own would lose the context of "^", "\b" and the like (every rest
// starts a text), counting "^" once per character. ReplaceAllStringFunc walks them one at
// a time and, handed "", holds only the unmatched text, at most s; FindAllStringIndex
// would hold every match's indices at once, about 40 bytes each, and a one-byte
// replacement may find a million within the record limit.
func replacedSize(re *regexp.Regexp, s string, perMatch, dollars int) int {
	matches, matched := 0, 0
	re.ReplaceAllStringFunc(s, func(m string) string {
		matches++
		matched += len(m)
		return ""
	})
	return len(s) - matched + matches*perMatch + dollars*matched
}
