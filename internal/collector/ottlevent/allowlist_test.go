package ottlevent

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl/ottlfuncs"
)

// A contrib upgrade that adds a function must not make it available unreviewed: each
// standard function is either allowed or refused with a reason, and the allow-list
// names no function OTTL lacks.
func TestEveryStandardFunctionIsReviewed(t *testing.T) {
	std := ottlfuncs.StandardFuncs[*Record]()
	var unreviewed []string
	for name := range std {
		_, a := allowedFunctions[name]
		_, r := refusedFunctions[name]
		if a == r {
			unreviewed = append(unreviewed, name)
		}
	}
	sort.Strings(unreviewed)
	assert.Empty(t, unreviewed, "review these for shared processes, then allow or refuse them")
	for name := range allowedFunctions {
		_, ok := std[name]
		assert.True(t, ok, "allowed %q is no standard function", name)
	}
	for name := range refusedFunctions {
		_, ok := std[name]
		assert.True(t, ok, "refused %q is no standard function", name)
	}
}

func grokLevels(n int) string {
	defs := make([]string, n)
	for i := range defs {
		defs[i] = fmt.Sprintf(`"A%02d=%%{A%02d}%%{A%02d}"`, i, i+1, i+1)
	}
	defs[n-1] = fmt.Sprintf(`"A%02d=x"`, n-1)
	return `set(event["g"], ExtractGrokPatterns(b, "%{A00}", false, [` + strings.Join(defs, ",") + `]))`
}

// These made megabytes to gigabytes of a few KB, some while compiling.
// They are refused when the statement is compiled (a save or a dry run: 400
// invalid_pipeline), naming the function and why, before anything is built.
func TestExpandingFunctionsAreRefusedWhenCompiled(t *testing.T) {
	long := strings.Repeat("p", 3000)
	for _, c := range []struct{ stmt, why string }{
		{grokLevels(17), "pattern definitions are not allowed"},
		{`set(event["g"], ExtractGrokPatterns(b, "%{X}", false, ["X=%{X}%{X}"]))`, "pattern definitions are not allowed"},
		{`set(event["g"], ExtractGrokPatterns(b, b))`, "must be a string literal"},
		{`set(event["g"], ExtractGrokPatterns(b, "` + strings.Repeat("%{WORD}", 17) + `"))`, "refers to 17 patterns"},
		{`flatten(event, "` + long + `")`, "the prefix is 3000 bytes"},
		{`set(event["x"], ConvertTextToElementsXML(b, "//a", "` + long + `"))`, "the element name is 3000 bytes"},
		{`set(event["x"], InsertXML(b, "//*", b))`, "is not available in pipelines"},
		{`replace_pattern(event["b"], ".", "x", SHA256, event["f"])`, "the replacement format must be a string literal"},
		{`replace_all_matches(event, "*", "x", SHA256, "` + long + `%s")`, "the replacement format is 3002 bytes"},
		{`set(event["s"], ToKeyValueString(event, "` + long + `"))`, "a delimiter is 3000 bytes"},
		{`set(event["x"], GetXML(b, "//*"))`, "is not available in pipelines"},
	} {
		name := c.stmt[:strings.IndexByte(c.stmt, '(')]
		if i := strings.Index(c.stmt, "], "); i > 0 && i < 20 {
			name = c.stmt[i+3 : strings.IndexByte(c.stmt[i:], '(')+i]
		}
		t.Run(name+" "+c.why, func(t *testing.T) {
			var err error
			alloc := allocated(func() { _, err = CompileStatements([]string{c.stmt}, settings()) })
			var ce *CompileError
			require.ErrorAs(t, err, &ce)
			assert.ErrorIs(t, err, ErrFunctionRefused)
			assert.Contains(t, err.Error(), c.why)
			assert.Less(t, alloc, uint64(32<<20), "compiling allocated %d bytes", alloc)
		})
	}
	_, err := CompileStatements([]string{`set(event["x"], InsertXML(b, "/a", "<b/>"))`}, settings())
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"InsertXML" is not available in pipelines: it inserts`)
}

// The functions allowed on conditions still work within them.
func TestRestrictedFunctionsWorkWithinTheirBounds(t *testing.T) {
	r := apply(t, []string{
		`set(event["g"], ExtractGrokPatterns(body, "%{WORD:verb} %{INT:code}", true))`,
		`set(event["x"], ConvertTextToElementsXML("<a>hi<b/></a>", "/a", "v"))`,
		`set(event["n"], {"a": {"b": 1, "c": [1, 2]}})`,
		`flatten(event["n"], "p")`,
		`replace_pattern(event["r"], "secret", "x", SHA256, "sha:%s")`,
		`set(event["kv"], ToKeyValueString({"a": "1"}, ":", ";"))`,
	}, `{"body":"GET 200","r":"the secret"}`, SignalEvent)
	got := r.m.AsRaw()
	assert.Equal(t, map[string]any{"verb": "GET", "code": "200"}, got["g"])
	assert.Contains(t, got["x"], "<v>hi</v>")
	assert.Equal(t, map[string]any{"p.a.b": int64(1), "p.a.c.0": int64(1), "p.a.c.1": int64(2)}, got["n"])
	assert.Regexp(t, `^the sha:[0-9a-f]{64}$`, got["r"])
	assert.Equal(t, "a:1", got["kv"])
}

// flatten writes each value's whole path as its key: a deep record's flattened form
// grows with the square of its depth. It fails before flattening, with the record's code.
func TestFlattenStopsBeforeItPassesTheLimit(t *testing.T) {
	// A comb: every level holds a value and the next level, 3,000 bytes in all.
	var b strings.Builder
	depth := 0
	for b.Len() < 2800 {
		b.WriteString(`{"v":1,"level_name_padding":`)
		depth++
	}
	b.WriteString(`1`)
	b.WriteString(strings.Repeat("}", depth))
	r := decode(t, `{"d":`+b.String()+`}`, SignalEvent)
	r.SetMaxBytes(4000)
	s, err := CompileStatements([]string{`flatten(event)`}, settings())
	require.NoError(t, err)
	var applyErr error
	alloc := allocated(func() { applyErr = s.Apply(context.Background(), r) })
	require.ErrorIs(t, applyErr, ErrRecordTooLarge)
	assert.Contains(t, applyErr.Error(), "flatten would be")
	assert.Less(t, alloc, uint64(1<<20), "allocated %d bytes", alloc)

	// Many small values: refused for the cost of inserting them, not their size.
	vals := make([]string, maxFlattenValues+1)
	for i := range vals {
		vals[i] = "1"
	}
	r = decode(t, `{"l":[`+strings.Join(vals, ",")+`]}`, SignalEvent)
	err = s.Apply(context.Background(), r)
	require.Error(t, err)
	assert.NotErrorIs(t, err, ErrRecordTooLarge)
	assert.Contains(t, err.Error(), "more than 2000 values")
}

// set(event["x"][2000000], 1) made two million empty values (172 MB) before any size was
// measured. An index the record limit cannot hold now fails first, as too large.
func TestListIndexPastTheRecordLimitFailsBeforeAllocating(t *testing.T) {
	s, err := CompileStatements([]string{`set(event["x"][2000000], 1)`}, settings())
	require.NoError(t, err)
	r := kibRecord(t)
	r.SetMaxBytes(4000)
	var applyErr error
	alloc := allocated(func() { applyErr = s.Apply(context.Background(), r) })
	require.ErrorIs(t, applyErr, ErrRecordTooLarge)
	assert.Contains(t, applyErr.Error(), "a list grown to index 2000000")
	assert.Less(t, alloc, uint64(1<<20), "allocated %d bytes", alloc)
	_, has := r.m.Get("x")
	assert.False(t, has, "nothing was written")

	r = apply(t, []string{`set(event["x"][2], "c")`}, `{}`, SignalEvent)
	assert.Equal(t, []any{nil, nil, "c"}, r.m.AsRaw()["x"])
}

// An upgrade that renames a reviewed function's arguments, or changes their types,
// refuses the function when a statement is compiled instead of running it unchecked or
// panicking while compiling, in a process shared by every project
// (the checks and the replace and flatten bounds read them by reflection).
func TestChangedArgumentsAreRefused(t *testing.T) {
	type other struct{ Target string }
	// The reviewed names, each of another type than reviewed.
	type retyped struct {
		Target, Pattern, RegexPattern, Replacement, Mode int
		PatternDefinitions                               ottl.Optional[[]string]
		ReplacementFormat, Function                      ottl.Optional[int]
		Prefix, Delimiter, PairDelimiter, ElementName    ottl.Optional[int]
	}
	// The reviewed names and types, unexported: reflection can see them, not read them.
	type hidden struct {
		prefix, delimiter, pairDelimiter, elementName ottl.Optional[string]
		replacementFormat                             ottl.Optional[ottl.StringGetter[*Record]]
		patternDefinitions                            ottl.Optional[[]string]
	}
	// replace_pattern's arguments as reviewed but for Function's type.
	type replaceRetyped struct {
		Target                    ottl.GetSetter[*Record]
		RegexPattern, Replacement ottl.StringGetter[*Record]
		Function                  ottl.Optional[string]
		ReplacementFormat         ottl.Optional[ottl.StringGetter[*Record]]
	}
	// replace_all_patterns' as reviewed but without its mode.
	type modeless struct {
		Target                    ottl.PMapGetSetter[*Record]
		RegexPattern, Replacement ottl.StringGetter[*Record]
		Function                  ottl.Optional[ottl.FunctionGetter[*Record]]
		ReplacementFormat         ottl.Optional[ottl.StringGetter[*Record]]
	}
	str := ottl.StandardStringGetter[*Record]{}
	changed := map[string]ottl.Arguments{
		"renamed": &other{}, "retyped": &retyped{}, "unexported": &hidden{}, "not a pointer": other{},
		"nil pointer": (*other)(nil), "nil": nil, "not a struct": new(string),
		"replace Function retyped":          &replaceRetyped{Target: ottl.StandardGetSetter[*Record]{}, RegexPattern: str, Replacement: str},
		"replace_all_patterns without Mode": &modeless{Target: ottl.StandardPMapGetSetter[*Record]{}, RegexPattern: str, Replacement: str},
	}
	checks := map[string]argCheck{"flatten": checkFlatten, "grok": checkGrok, "xml": checkTextToElementsXML,
		"replace format": checkReplacementFormat, "key-value delimiters": checkKeyValueDelimiters}
	noop := func(ottl.FunctionContext, ottl.Arguments) (ottl.ExprFunc[*Record], error) {
		return func(context.Context, *Record) (any, error) { return nil, nil }, nil
	}
	creates := map[string]ottl.CreateFunctionFunc[*Record]{"replace_pattern": boundReplace("replace_pattern", noop),
		"replace_all_patterns": boundReplace("replace_all_patterns", noop), "flatten": boundFlatten(noop)}
	for argsName, args := range changed {
		for name, check := range checks {
			if strings.HasPrefix(argsName, "replace") {
				continue // arguments a check accepts: it reads only its own
			}
			require.NotPanics(t, func() { assert.ErrorIs(t, check(args), errUnreviewedArgs, "%s, %s", name, argsName) }, "%s, %s", name, argsName)
		}
		for name, create := range creates {
			if argsName == "replace_all_patterns without Mode" && name == "replace_pattern" {
				continue // replace_pattern's arguments may be just these
			}
			require.NotPanics(t, func() {
				_, err := create(ottl.FunctionContext{}, args)
				assert.ErrorIs(t, err, ErrFunctionRefused, "%s, %s", name, argsName)
				assert.ErrorContains(t, err, fmt.Sprintf("%q: this function's arguments changed; it is refused until reviewed", name), argsName)
			}, "%s, %s", name, argsName)
		}
	}
}

// A replacement format is written around every hashed replacement: it counts in the
// bound checked before replacing, so the replacement is refused before it is built.
func TestReplacementFormatCountsBeforeReplacing(t *testing.T) {
	if raceDetector {
		t.Skip("bounds allocated bytes, which the race detector's instrumentation inflates")
	}
	format := strings.Repeat("f", 200) + "%s"
	s, err := CompileStatements([]string{`replace_pattern(event["b"], ".", "x", SHA256, "` + format + `")`}, settings())
	require.NoError(t, err)
	r := kibRecord(t)
	r.SetMaxBytes(200_000) // 1,000 matches of 64 + 200 bytes pass it; of 128 bytes alone would not
	var applyErr error
	alloc := allocated(func() { applyErr = s.Apply(context.Background(), r) })
	require.ErrorIs(t, applyErr, ErrRecordTooLarge)
	assert.Less(t, alloc, uint64(150_000), "refused before replacing: allocated %d bytes", alloc)
	assert.Equal(t, strings.Repeat("a", 1000), r.m.AsRaw()["b"])
}
