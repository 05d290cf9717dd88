package console

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelinecfg"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
)

func doublingPipeline(n int, extra map[string]any) string {
	stmts := make([]string, n)
	for i := range stmts {
		stmts[i] = `set(event["b"], Concat([event["b"], event["b"]], ""))`
	}
	p := map[string]any{"transforms": stmts}
	for k, v := range extra {
		p[k] = v
	}
	b, _ := json.Marshal(map[string]any{"pipeline": p})
	return string(b)
}

// 30 doubling statements over a stored 1 KiB record, with any project's API
// key, took the receiver from 67 MiB to 618 MiB at 17 and would crash it at 30. Now the
// record fails at the statement that passes the record limit, in errors with its code,
// and the run allocates a few megabytes.
func TestDryRunDoublingsStopAtTheRecordLimit(t *testing.T) {
	c := startConsole(t)
	c.fill(t, "p1", 2, func(i int) string {
		return fmt.Sprintf(`{"n":%d,"b":"%s"}`, i, strings.Repeat("a", 1000))
	}, noSource)
	for _, mode := range []map[string]any{nil, {"window_enabled": true, "group_key": "n"}} {
		var r dryRunResult
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		r = c.dryRun(t, "p1", doublingPipeline(30, mode))
		runtime.ReadMemStats(&after)

		assert.Equal(t, 2, r.Evaluated)
		assert.Zero(t, r.Matched, "a record that passes the limit is not sent")
		assert.Empty(t, r.Calls)
		require.Len(t, r.Errors, 2, "%+v", r.Errors)
		for _, e := range r.Errors {
			assert.Equal(t, apierror.RecordTooLargeAfterTransforms, e.Code)
			assert.Equal(t, 413, e.Status, "the contract's status for the code, beside it")
			assert.True(t, strings.HasPrefix(e.Message, `transforms: statement 9 "set(event[\"b\"]`), e.Message)
			assert.Contains(t, e.Message, "over the record limit of 1000000 bytes (SVC_MAX_RECORD_BYTES)")
		}
		alloc := after.TotalAlloc - before.TotalAlloc
		assert.Less(t, alloc, uint64(64<<20), "the dry run allocated %d bytes", alloc)
	}
}

// The memory budget: records each under the limit, but together past what one dry run
// may keep, stop the evaluation there, and the answer says so.
func TestDryRunStopsAtItsMemoryBudget(t *testing.T) {
	c, err := pipelinecfg.Compile(mirror.Pipeline{Transforms: []string{`set(event["b"], Concat([event["b"], event["b"]], ""))`}})
	require.NoError(t, err)
	var recs []storedRecord
	for i := range 100 {
		recs = append(recs, storedRecord{seq: uint64(i + 1), signal: "event", data: []byte(`{"b":"` + strings.Repeat("a", 1000) + `"}`)})
	}
	lim := dryRunLimits{evalTime: time.Minute, callBytes: 1 << 20, recordBytes: 1 << 20, errors: 10, heldBytes: 20_000}
	ans := evaluate(context.Background(), c, recs, lim)
	assert.True(t, ans.MemoryBudgetExceeded)
	assert.Equal(t, 10, ans.Evaluated, "each kept record is 2 KB: the 10th passes 20,000 bytes")
	assert.Empty(t, ans.Errors)

	w, err := pipelinecfg.Compile(mirror.Pipeline{WindowEnabled: true, Trigger: `event["b"] == "x"`})
	require.NoError(t, err)
	ans = evaluate(context.Background(), w, recs, lim)
	assert.True(t, ans.MemoryBudgetExceeded, "the windows count too")
	assert.Less(t, ans.Evaluated, 100)
}

// The dry run refuses, as the save does, a pipeline past the statement limit.
func TestDryRunRefusesTooManyStatements(t *testing.T) {
	c := startConsole(t)
	a := postJSON(t, dryRunURL(c.url, "p1"), doublingPipeline(101, nil), map[string]string{"X-API-Key": "key-p1"})
	require.Equal(t, 400, a.status, "%s", a.body)
	var e apierror.Body
	require.NoError(t, json.Unmarshal(a.body, &e))
	assert.Equal(t, apierror.InvalidPipeline, e.Error.Code)
	assert.Equal(t, "transforms: 101 statements; a pipeline has at most 100", e.Error.Message)
}

// The receiver's record limit (console max_record_bytes, SVC_MAX_RECORD_BYTES) is the dry
// run's, as the pipeline's is the pipeline's.
func TestDryRunUsesTheConfiguredRecordLimit(t *testing.T) {
	c, err := pipelinecfg.Compile(mirror.Pipeline{Transforms: []string{
		`set(event["b"], Concat([event["b"], event["b"]], ""))`, `set(event["b"], Concat([event["b"], event["b"]], ""))`}})
	require.NoError(t, err)
	recs := []storedRecord{{seq: 1, signal: "event", data: []byte(`{"b":"` + strings.Repeat("a", 1000) + `"}`)}}
	ans := evaluate(context.Background(), c, recs, dryRunLimits{evalTime: time.Minute, callBytes: 1 << 20, recordBytes: 1 << 20, errors: 10, maxRecordBytes: 3000})
	require.Len(t, ans.Errors, 1)
	assert.Equal(t, apierror.RecordTooLargeAfterTransforms, ans.Errors[0].Code)
	assert.Equal(t, 413, ans.Errors[0].Status)
	assert.Contains(t, ans.Errors[0].Message, "statement 1 ")
	assert.Contains(t, ans.Errors[0].Message, "limit of 3000 bytes")
}

// ExtractGrokPatterns with 16 levels of pattern definitions allocated
// 150 MB in the receiver while the dry run compiled it, and a definition that refers to
// itself ran it out of memory. Refused before compiling, naming the function and why.
func TestDryRunRefusesFunctionsThatExpand(t *testing.T) {
	c := startConsole(t)
	defs := make([]string, 17)
	for i := range defs {
		defs[i] = fmt.Sprintf("A%02d=%%{A%02d}%%{A%02d}", i, i+1, i+1)
	}
	defs[16] = "A16=x"
	for _, stmt := range []string{
		`set(event["g"], ExtractGrokPatterns(b, "%{A00}", false, ` + mustJSON(defs) + `))`,
		`set(event["g"], ExtractGrokPatterns(b, "%{X}", false, ["X=%{X}%{X}"]))`,
		`set(event["x"], InsertXML(b, "//*", b))`,
	} {
		body, _ := json.Marshal(map[string]any{"pipeline": map[string]any{"transforms": []string{stmt}}})
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		a := postJSON(t, dryRunURL(c.url, "p1"), string(body), map[string]string{"X-API-Key": "key-p1"})
		runtime.ReadMemStats(&after)
		require.Equal(t, 400, a.status, "%s", a.body)
		var e apierror.Body
		require.NoError(t, json.Unmarshal(a.body, &e))
		assert.Equal(t, apierror.InvalidPipeline, e.Error.Code)
		assert.Regexp(t, `^transforms: .*"(ExtractGrokPatterns|InsertXML)".*(pattern definitions are not allowed|not available in pipelines)`, e.Error.Message)
		assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(64<<20))
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
