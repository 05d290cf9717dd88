package ottlevent

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// kibRecord is a 1 KiB event: 30 doubling statements would grow it to 1 TiB.
func kibRecord(t testing.TB) *Record {
	return decode(t, `{"_event_type":"x","b":"`+strings.Repeat("a", 1000)+`"}`, SignalEvent)
}

func doublings(n int) []string {
	stmts := make([]string, n)
	for i := range stmts {
		stmts[i] = `set(event["b"], Concat([event["b"], event["b"]], ""))`
	}
	return stmts
}

// allocated runs f and returns how many bytes it allocated: what a shared process would
// have to hold if f kept it.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// 30 doubling statements over 1 KiB would make 1 TiB. They stop at the first
// statement whose result passes the limit, having allocated a few times the limit.
func TestDoublingStopsAtTheStatementThatPassesTheLimit(t *testing.T) {
	s, err := CompileStatements(doublings(30), settings())
	require.NoError(t, err)
	r := kibRecord(t)
	var applyErr error
	alloc := allocated(func() { applyErr = s.Apply(context.Background(), r) })

	require.ErrorIs(t, applyErr, ErrRecordTooLarge)
	var ee *EvalError
	require.ErrorAs(t, applyErr, &ee)
	// 1000 bytes doubled 10 times is 1,024,000 > 1,000,000: the 10th statement.
	assert.Equal(t, 9, ee.Index, applyErr.Error())
	var tl *TooLargeError
	require.ErrorAs(t, applyErr, &tl)
	assert.Equal(t, DefaultMaxRecordBytes, tl.Limit)
	assert.Contains(t, applyErr.Error(), "SVC_MAX_RECORD_BYTES")
	assert.LessOrEqual(t, r.Size(), DefaultMaxRecordBytes, "the record never holds more than the limit")
	assert.Less(t, alloc, uint64(16<<20), "allocated %d bytes", alloc)
}

func TestRecordLimitIsPerRecord(t *testing.T) {
	s, err := CompileStatements(doublings(3), settings())
	require.NoError(t, err)
	r := kibRecord(t)
	r.SetMaxBytes(4000)
	err = s.Apply(context.Background(), r)
	var ee *EvalError
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, 1, ee.Index) // 2000 fits, 4000 plus the rest does not
	assert.ErrorIs(t, err, ErrRecordTooLarge)

	// Under the limit nothing changes: the statements all run.
	r = kibRecord(t)
	r.SetMaxBytes(10000)
	require.NoError(t, s.Apply(context.Background(), r))
	assert.Equal(t, 8000, len(r.m.AsRaw()["b"].(string)))
}

// Growth that no single write shows: many fields each under the limit.
func TestManyFieldsPassTheLimitTogether(t *testing.T) {
	stmts := make([]string, 6)
	for i := range stmts {
		stmts[i] = `set(event["c` + string(rune('0'+i)) + `"], event["b"])`
	}
	s, err := CompileStatements(stmts, settings())
	require.NoError(t, err)
	r := kibRecord(t)
	r.SetMaxBytes(4500)
	err = s.Apply(context.Background(), r)
	var ee *EvalError
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, 3, ee.Index)
	assert.ErrorIs(t, err, ErrRecordTooLarge)
}

// One statement can multiply too: by fan-out, by nesting converters, by padding. Each is
// stopped within the statement, before it allocates the product.
func TestOneStatementCannotMultiplyPastTheLimit(t *testing.T) {
	fan := "set(event[\"b\"], Concat([" + strings.TrimSuffix(strings.Repeat("b,", 400), ",") + "], \"\"))"
	for _, stmt := range []string{
		fan,
		`set(event["b"], Hex(Hex(Hex(Hex(Hex(Hex(Hex(Hex(Hex(Hex(Hex(Hex(b)))))))))))))`,
		`set(event["b"], Format("%999999999s", [b]))`,
		`set(event["b"], Format("%*s", [999999999, b]))`,
		`set(event["b"], Format("` + strings.Repeat("%[1]s", 200) + `", [b]))`,
		`set(event["b"], Concat([Concat([b, b, b, b, b, b, b, b], ""), Concat([b, b, b, b, b, b, b, b], "")], ""))`,
		`set(event["l"], [event, event, event, event, event, event, event, event])`,
	} {
		t.Run(stmt[:min(len(stmt), 40)], func(t *testing.T) {
			s, err := CompileStatements([]string{stmt, stmt, stmt}, settings())
			require.NoError(t, err)
			r := kibRecord(t)
			r.SetMaxBytes(6000)
			var applyErr error
			alloc := allocated(func() { applyErr = s.Apply(context.Background(), r) })
			require.ErrorIs(t, applyErr, ErrRecordTooLarge)
			assert.LessOrEqual(t, r.Size(), 6000)
			assert.Less(t, alloc, uint64(4<<20), "allocated %d bytes", alloc)
		})
	}
}

// A trigger's converters are bounded too: a condition cannot build a huge value either.
func TestConditionConvertersAreBounded(t *testing.T) {
	c, err := CompileCondition(`Len(Concat([b, b, b, b, b, b, b, b], "")) > 0`, settings())
	require.NoError(t, err)
	r := kibRecord(t)
	r.SetMaxBytes(4000)
	ok, err := c.Match(context.Background(), r)
	assert.False(t, ok)
	assert.ErrorIs(t, err, ErrRecordTooLarge)
}

// Bounding changes no result under the limit: Concat and Format answer as OTTL's do.
func TestBoundedConvertersKeepOTTLsResults(t *testing.T) {
	r := apply(t, []string{
		`set(event["c"], Concat([status, nil, 7, amount], "-"))`,
		`set(event["f"], Format("%s/%d/%5.1f%%", [status, amount, 2.5]))`,
		`set(event["h"], Hex(status))`,
	}, `{"status":"failed","amount":1250}`, SignalEvent)
	assert.Equal(t, `{"status":"failed","amount":1250,"c":"failed-<nil>-7-1250","f":"failed/1250/  2.5%","h":"6661696c6564"}`, string(r.AppendJSON(nil)))
}

func TestSizeApproximatesJSON(t *testing.T) {
	for _, js := range []string{logRec, spanRec, metricRec, eventRec, sourceRec} {
		r := decode(t, js, SignalEvent)
		n, exact := r.Size(), len(r.AppendJSON(nil))
		// Numbers count 8 bytes and escapes none: close, not exact.
		assert.InDelta(t, exact, n, float64(exact)/5, js)
	}
}

func TestTooLargeErrorIs(t *testing.T) {
	err := error(&EvalError{Index: 2, Expr: "x", Err: &TooLargeError{Bytes: 10, Limit: 5, What: "the record"}})
	assert.True(t, errors.Is(err, ErrRecordTooLarge))
	assert.False(t, errors.Is(&EvalError{Err: errors.New("other")}, ErrRecordTooLarge))
}

// A regex replacement repeats its replacement at every match: replace_pattern(b, ".", b)
// squares b. It is refused before replacing; an ordinary replacement is not.
func TestReplacementsCannotMultiplyPastTheLimit(t *testing.T) {
	if raceDetector {
		t.Skip("bounds allocated bytes, which the race detector's instrumentation inflates")
	}
	for _, stmt := range []string{
		`replace_pattern(event["b"], ".", event["b"])`,
		`replace_pattern(event["b"], "a", "$0$0$0$0$0$0$0$0$0$0$0$0$0$0$0$0$0$0$0$0")`,
		`replace_pattern(event["b"], "", "xxxxxxxxxxxxxxxxxxxxxxxx")`,
		`replace_all_patterns(event, "value", ".", event["b"])`,
		`replace_pattern(event["b"], ".", "x", SHA256)`,
	} {
		t.Run(stmt, func(t *testing.T) {
			s, err := CompileStatements([]string{stmt, stmt}, settings())
			require.NoError(t, err)
			r := kibRecord(t)
			r.SetMaxBytes(20000)
			var applyErr error
			alloc := allocated(func() { applyErr = s.Apply(context.Background(), r) })
			require.ErrorIs(t, applyErr, ErrRecordTooLarge)
			assert.Less(t, alloc, uint64(4<<20), "allocated %d bytes", alloc)
			assert.Equal(t, 1000, len(r.m.AsRaw()["b"].(string)), "the refused statement changed nothing")
		})
	}
	r := apply(t, []string{`replace_pattern(event["b"], "a{10}", "b")`, `replace_all_patterns(event, "value", "^x$", "y")`},
		`{"_event_type":"x","b":"`+strings.Repeat("a", 1000)+`"}`, SignalEvent)
	assert.Equal(t, strings.Repeat("b", 100), r.m.AsRaw()["b"])
	assert.Equal(t, "y", r.m.AsRaw()["_event_type"])
}

// The bounded replacement searched each rest of the string on
// its own, so "^" and "\b" matched at the start of every rest: replace_pattern(m, "^",
// "[prod] ") was counted as one prefix per character and a message over ~125 KB failed
// as too large. Matches are counted over the whole string, as the replacement makes them.
func TestAnchoredAndBoundaryReplacementsAreCountedInContext(t *testing.T) {
	for _, tc := range []struct {
		stmt, msg, want string
	}{
		{`replace_pattern(event["m"], "^", "[prod] ")`, strings.Repeat("x", 200_000), "[prod] " + strings.Repeat("x", 200_000)},
		{`replace_pattern(event["m"], "\\b", "<b>")`, strings.Repeat("word ", 60_000), strings.Repeat("<b>word<b> ", 60_000)},
		{`replace_all_patterns(event, "value", "^", "[prod] ")`, strings.Repeat("x", 200_000), "[prod] " + strings.Repeat("x", 200_000)},
		{`replace_pattern(event["m"], "\\bw", "W")`, strings.Repeat("word ", 190_000), strings.Repeat("Word ", 190_000)},
	} {
		t.Run(tc.stmt, func(t *testing.T) {
			r := apply(t, []string{tc.stmt}, `{"_event_type":"x","m":"`+tc.msg+`"}`, SignalEvent)
			assert.Equal(t, tc.want, r.m.AsRaw()["m"])
		})
	}
}

// FuzzApplyBounded feeds statements a user could save (the transforms are outside input)
// through compile and Apply under a small limit: whatever they are, nothing panics, and a
// record Apply did not fail for being too large is within the limit.
func FuzzApplyBounded(f *testing.F) {
	for _, s := range []string{
		`set(event["b"], Concat([event["b"], event["b"]], ""))`,
		`set(event["b"], Format("%[1]s%[1]s%[1]s", [b]))`,
		`set(event["b"], Format("%*s", [5000, b]))`,
		`replace_pattern(event["b"], "", "$0$0$0")`,
		`replace_all_patterns(event, "key", ".", "xxxxxxxxxx")`,
		`set(event["c"], event)`,
		`merge_maps(event, ParseJSON(Concat(["{\"x\":\"", b, "\"}"], "")), "upsert")`,
		`set(event["h"], Hex(Hex(Hex(b))))`,
		`set(event["l"], Split(Concat([b, b, b], ","), ""))`,
		// The other functions that build from their input.
		`flatten(event, "prefix")`,
		`set(event["n"], {"a": {"b": event, "c": [event, event]}})`,
		`set(event["x"][400], b)`,
		`set(event["kv"], ParseKeyValue(Concat(["a=", b, " c=", b], "")))`,
		`set(event["s"], ToKeyValueString(event))`,
		`set(event["g"], ExtractGrokPatterns(b, "%{WORD:w}"))`,
		`set(event["x"], ConvertAttributesToElementsXML(Concat(["<a x=\"", b, "\" y=\"", b, "\"/>"], "")))`,
		`set(event["x"], ConvertTextToElementsXML(Concat(["<a>", b, "<b/>", b, "</a>"], "")))`,
		`append(event["l"], [b, b, b])`,
		`merge_maps(event, ParseJSON(ToKeyValueString(event)), "insert")`,
		`set(event["c"], ParseCSV(Concat([b, b], ","), "a,b"))`,
	} {
		f.Add(s, 3)
	}
	f.Fuzz(func(t *testing.T, stmt string, times int) {
		times = min(max(times, 1), 8)
		stmts := make([]string, times)
		for i := range stmts {
			stmts[i] = stmt
		}
		s, err := CompileStatements(stmts, settings())
		if err != nil {
			return
		}
		r := decode(t, `{"_event_type":"x","b":"`+strings.Repeat("ab", 300)+`"}`, SignalEvent)
		r.SetMaxBytes(4000)
		if err := s.Apply(context.Background(), r); errors.Is(err, ErrRecordTooLarge) {
			return
		}
		if n := r.Size(); n > 4000 {
			t.Fatalf("%q ×%d left a record of %d bytes, over the limit of 4000, without failing it", stmt, times, n)
		}
	})
}
