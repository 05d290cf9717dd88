package dryrun

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelinecfg"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
)

var roomy = Limits{EvalTime: time.Minute, CallBytes: 1 << 20, RecordBytes: 1 << 20, Errors: 10}

func compile(t *testing.T, p mirror.Pipeline) *pipelinecfg.Compiled {
	t.Helper()
	c, err := pipelinecfg.Compile(p)
	require.NoError(t, err)
	return c
}

func events(n int, body func(i int) string) []Record {
	recs := make([]Record, n)
	for i := range recs {
		recs[i] = Record{Seq: uint64(i + 1), Signal: "event", Data: []byte(body(i + 1))}
	}
	return recs
}

func sizes(t *testing.T, a *Answer) []int {
	var out []int
	for _, c := range a.Calls {
		var arr []json.RawMessage
		require.NoError(t, json.Unmarshal(c, &arr))
		out = append(out, len(arr))
	}
	return out
}

// Legacy calls are arrays of batch_size within a batch, never across two:
// 25 records are 10, 10 and 5 as one batch, and 10, 2, 10, 3 as batches of 12 and 13.
func TestLegacyCallsFollowTheBatches(t *testing.T) {
	c := compile(t, mirror.Pipeline{BatchSize: 10})
	recs := events(25, func(i int) string { return fmt.Sprintf(`{"n":%d}`, i) })
	assert.Equal(t, []int{10, 10, 5}, sizes(t, Evaluate(context.Background(), c, recs, roomy)))

	e := New(context.Background(), c, roomy)
	for i, r := range recs {
		if i == 12 {
			e.Flush()
		}
		require.True(t, e.Add(r))
	}
	a := e.Answer()
	assert.Equal(t, []int{10, 2, 10, 3}, sizes(t, a))
	assert.Equal(t, 4, a.TotalCalls())

	// Counting alone lists nothing and counts the same.
	e = New(context.Background(), c, Limits{EvalTime: time.Minute, Count: true})
	for i, r := range recs {
		if i == 12 {
			e.Flush()
		}
		e.Add(r)
	}
	a = e.Answer()
	assert.Empty(t, a.Calls)
	assert.Empty(t, a.Records)
	assert.Equal(t, 4, a.TotalCalls())
	assert.Equal(t, 25, a.Matched)
}

// Under a call body limit an array is split as the agent exporter splits it, a record
// alone past it is an error (dead-lettered unsent), and a record a transform grew past
// the record limit (dead-lettered) ends the array before it.
func TestLegacyCallsSplitAsTheExporterDoes(t *testing.T) {
	c := compile(t, mirror.Pipeline{BatchSize: 10})
	pad := strings.Repeat("x", 400)
	recs := events(5, func(i int) string { return fmt.Sprintf(`{"n":%d,"p":%q}`, i, pad) })
	recs = append(recs, Record{Seq: 6, Signal: "event", Data: []byte(`{"p":"` + strings.Repeat("y", 2000) + `"}`)})
	lim := roomy
	lim.MaxCallBytes = 1000
	a := Evaluate(context.Background(), c, recs, lim)
	assert.Equal(t, []int{2, 2, 1}, sizes(t, a))
	require.Len(t, a.Errors, 1)
	assert.Equal(t, uint64(6), a.Errors[0].Seq)
	assert.Contains(t, a.Errors[0].Message, apierror.PayloadTooLarge)

	grow := compile(t, mirror.Pipeline{BatchSize: 10, Transforms: []string{`set(event["p"], Concat([event["p"], event["p"]], "")) where event["big"] == true`}})
	recs = events(4, func(i int) string {
		if i == 3 {
			return `{"big":true,"p":"` + strings.Repeat("z", 600) + `"}`
		}
		return fmt.Sprintf(`{"n":%d}`, i)
	})
	lim = roomy
	lim.MaxRecordBytes = 1000
	a = Evaluate(context.Background(), grow, recs, lim)
	assert.Equal(t, []int{2, 1}, sizes(t, a), "the dead-lettered record splits the array")
	require.Len(t, a.Errors, 1)
	assert.Equal(t, apierror.RecordTooLargeAfterTransforms, a.Errors[0].Code)
}
