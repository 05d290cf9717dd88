package agentexporter

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelinedata"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/principal"
	"github.com/otelcol-svc/otelcol-svc/internal/delivery"
	"github.com/otelcol-svc/otelcol-svc/internal/deliverylog"
	"github.com/otelcol-svc/otelcol-svc/internal/pipelinectx"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
)

// A record a transform grew past the record limit reaches the exporter as a
// failed item (the trigger and window processors make it). The agent gets the other
// records and nothing of it; it is dead-lettered as stored, and its delivery shows the
// error with the contract's code, so it is settled, not redelivered.
func TestRecordTooLargeAfterTransformsIsDeadLetteredUnsent(t *testing.T) {
	e := newEnv(t)
	a := newAgent(t, nil)
	e.putProject(t, project("p1", a.srv.URL))
	r := e.start(t, nil)

	reason := `record_too_large_after_transforms: statement 9 "set(event[\"b\"], Concat([event[\"b\"], event[\"b\"]], \"\"))": Concat would be 1024000 bytes or more, over the record limit of 1000000 bytes (SVC_MAX_RECORD_BYTES)`
	stored := `{"n":2,"b":"` + strings.Repeat("a", 1000) + `"}`
	ld, lrs := pipelinedata.New()
	pipelinedata.Append(lrs, pipelinedata.Item{Body: []byte(`{"n":1}`), Signal: "event", Seq: 1})
	pipelinedata.Append(lrs, pipelinedata.Item{Body: []byte(stored), Signal: "event", Seq: 2, Kind: pipelinedata.KindFailed, Error: reason})
	pipelinedata.Append(lrs, pipelinedata.Item{Body: []byte(`{"n":3}`), Signal: "event", Seq: 3})
	o := deliverylog.NewOutcome()
	ctx := pipelinectx.WithOutcome(principal.NewContext(context.Background(), principal.Principal{ProjectID: "p1"}), o)
	require.NoError(t, r.exp.ConsumeLogs(ctx, ld), "settled: the batch is acked, not redelivered")

	var sent []string
	for _, req := range a.requests() {
		sent = append(sent, string(req.body))
		assert.NotContains(t, string(req.body), `"n":2`)
	}
	assert.Equal(t, []string{`[{"n":1}]`, `[{"n":3}]`}, sent, "the others in stream order, around it")

	dl := e.deadLetters(t, "p1")
	require.Len(t, dl, 1)
	assert.Equal(t, "["+stored+"]", string(dl[0].Data), "as stored: a replay sends it untransformed")
	assert.Equal(t, reason, dl[0].Header.Get(streams.HeaderDLQReason)[:len(reason)])
	assert.Equal(t, "0", dl[0].Header.Get(streams.HeaderDLQAttempts), "the agent was not called")

	id := dl[0].Header.Get(streams.HeaderRequestID)
	d := e.delivery(t, "p1", id, inState(deliverylog.StateDeadLettered))
	assert.True(t, strings.HasPrefix(d.Error, "record_too_large_after_transforms: statement 9 "), d.Error)
	assert.Equal(t, 413, d.StatusCode, "the contract's status for the code, though no agent answered")
	assert.Zero(t, d.Attempts, "no attempt is made up for it")
	assert.Equal(t, "413", dl[0].Header.Get(streams.HeaderDLQStatus))
	assert.Equal(t, []uint64{2}, d.Seqs)
	assert.Equal(t, 1, d.Records)
	assert.Equal(t, int64(1), r.sum(t, "otelcol_agent_calls", delivery.OutcomeDeadLettered))
}

// The call body limit: a legacy batch is sent in smaller arrays rather than pass it, and
// a window call that cannot fit it is dead-lettered as a marker, never POSTed.
func TestCallBodyLimit(t *testing.T) {
	big := `{"b":"` + strings.Repeat("a", 400_000) + `"}`
	ld, lrs := pipelinedata.New()
	for i := range 5 {
		pipelinedata.Append(lrs, pipelinedata.Item{Body: []byte(big), Signal: "event", Seq: uint64(i + 1)})
	}
	window := `{"trigger":` + big + `,"window":[` + big + `,` + big + `,` + big + `]}`
	pipelinedata.Append(lrs, pipelinedata.Item{Body: []byte(window), Signal: "event", Seq: 6, Kind: pipelinedata.KindWindowCall})
	calls := buildCalls(ld, 10, 1<<20)
	require.Len(t, calls, 4)
	for _, c := range calls[:3] {
		assert.LessOrEqual(t, len(c.body), 1<<20)
		assert.Empty(t, c.failed)
	}
	assert.Equal(t, []int{2, 2, 1}, []int{calls[0].records, calls[1].records, calls[2].records})
	w := calls[3]
	assert.True(t, strings.HasPrefix(w.failed, "payload_too_large: the call's body would be 1600"), w.failed)
	assert.Contains(t, w.failed, "SVC_MAX_CALL_BYTES")
	assert.Less(t, len(w.body), 4096, "a marker is kept, not the body")

	// At the default the largest window call the settings allow is sent.
	assert.Greater(t, DefaultMaxCallBytes, 10_000_000+1_000_000+100)
	calls = buildCalls(ld, 10, DefaultMaxCallBytes)
	require.Len(t, calls, 2)
	assert.Empty(t, calls[1].failed)
}
