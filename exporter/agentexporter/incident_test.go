package agentexporter

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelinedata"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/principal"
	"github.com/otelcol-svc/otelcol-svc/internal/delivery"
	"github.com/otelcol-svc/otelcol-svc/internal/deliverylog"
	"github.com/otelcol-svc/otelcol-svc/internal/pipelinectx"
)

// incidentCall hands the exporter one incident call under requestID, as the incident
// processor does, and returns the call's outcome.
func incidentCall(t *testing.T, r *running, project, requestID, body string) (*deliverylog.Outcome, error) {
	t.Helper()
	ld, lrs := pipelinedata.New()
	pipelinedata.Append(lrs, pipelinedata.Item{Body: []byte(body), Signal: "incident", Kind: pipelinedata.KindIncidentCall,
		RequestID: requestID, Group: "\x00inc:inc_x_1"})
	o := deliverylog.NewOutcome()
	ctx := pipelinectx.WithOutcome(principal.NewContext(context.Background(), principal.Principal{ProjectID: project}), o)
	return o, r.exp.ConsumeLogs(ctx, ld)
}

// An incident call is made under the request id the processor issued (the same id after
// a takeover), with its body as given, counted as one record and in the ledger's
// incident_calls, and logged in the delivery log under that id.
func TestIncidentCallKeepsItsRequestID(t *testing.T) {
	e := newEnv(t)
	a := newAgent(t, nil)
	e.putProject(t, project("p1", a.srv.URL))
	r := e.start(t, nil)

	const id = "req_0123456789abcdef0123456789abcdef"
	body := `{"incident": {"id": "inc_x_1"}, "reason": "opened", "events": [ {"n":1} ], "window": []}`
	o, err := incidentCall(t, r, "p1", id, body)
	require.NoError(t, err)
	got := a.requests()
	require.Len(t, got, 1)
	assert.Equal(t, id, got[0].header.Get("X-Request-Id"))
	assert.Equal(t, body, string(got[0].body))
	delivered, deadLettered := o.Calls()
	assert.Equal(t, 1, delivered)
	assert.Equal(t, 0, deadLettered)
	assert.Equal(t, int64(1), r.sum(t, "otelcol_agent_records", ""))
	d := e.delivery(t, "p1", id, inState(deliverylog.StateDelivered))
	assert.Equal(t, id, d.RequestID)

	// The same call again (another process took it over): the same id reaches the agent.
	_, err = incidentCall(t, r, "p1", id, body)
	require.NoError(t, err)
	require.Len(t, a.requests(), 2)
	assert.Equal(t, id, a.requests()[1].header.Get("X-Request-Id"))
	require.Eventually(t, func() bool {
		c := e.ledger(t, "p1")
		return c.IncidentCalls == 1 && c.Calls == 1
	}, 10*time.Second, 20*time.Millisecond, "incident calls counted in the ledger, a call taken over once")
}

// A call taken over from another process (the processor retries a stale claim under
// the same request id) is one call: the agent gets it again, but it is charged to the
// call budget once and counted in the ledger once, so the budget still allows the
// project's next call and incident_calls says how many calls there were.
func TestIncidentCallTakenOverIsChargedAndCountedOnce(t *testing.T) {
	e := newEnv(t)
	a := newAgent(t, func(_ int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	p := project("p1", a.srv.URL)
	p.Pipeline.MaxCallsPerDay = 2 // a day's window: no minute turning between the calls
	e.putProject(t, p)
	first, other := e.start(t, nil), e.start(t, nil)

	const taken = "req_10000000000000000000000000000001"
	o, err := incidentCall(t, first, "p1", taken, `{"reason":"opened"}`)
	require.NoError(t, err)
	delivered, _ := o.Calls()
	require.Equal(t, 1, delivered)
	// The first process stopped heartbeating before completing the claim: another
	// makes the same call.
	o, err = incidentCall(t, other, "p1", taken, `{"reason":"opened"}`)
	require.NoError(t, err)
	delivered, _ = o.Calls()
	require.Equal(t, 1, delivered, "the takeover is made, not refused by the budget it already used")
	o, err = incidentCall(t, other, "p1", "req_10000000000000000000000000000002", `{"reason":"updated"}`)
	require.NoError(t, err)
	delivered, _ = o.Calls()
	assert.Equal(t, 1, delivered, "the day's second call fits the budget of 2: the takeover was not charged again")
	o, err = incidentCall(t, first, "p1", "req_10000000000000000000000000000003", `{"reason":"updated"}`)
	require.NoError(t, err)
	delivered, deadLettered := o.Calls()
	assert.Zero(t, delivered+deadLettered, "the third is past the budget")
	require.Len(t, a.requests(), 3)
	assert.Equal(t, taken, a.requests()[1].header.Get("X-Request-Id"))

	// Shut down, both processes have flushed what they counted: the ledger is final.
	require.NoError(t, first.exp.Shutdown(context.Background()))
	require.NoError(t, other.exp.Shutdown(context.Background()))
	c := e.ledger(t, "p1")
	assert.Equal(t, int64(2), c.IncidentCalls, "two calls, one of them taken over")
	assert.Equal(t, int64(2), c.Calls)
}

// An incident call over max_call_bytes is dead-lettered unsent, as a window call is; the
// outcome says dead-lettered.
func TestIncidentCallOverTheBodyLimitIsDeadLettered(t *testing.T) {
	e := newEnv(t)
	a := newAgent(t, nil)
	e.putProject(t, project("p1", a.srv.URL))
	r := e.start(t, func(c *Config) { c.MaxCallBytes = 1 << 20 })

	const id = "req_00000000000000000000000000000001"
	o, err := incidentCall(t, r, "p1", id, `{"incident":{},"events":[{"b":"`+strings.Repeat("a", 1<<20)+`"}]}`)
	require.NoError(t, err)
	assert.Empty(t, a.requests(), "never POSTed")
	delivered, deadLettered := o.Calls()
	assert.Equal(t, 0, delivered)
	assert.Equal(t, 1, deadLettered)
	require.Len(t, e.deadLetters(t, "p1"), 1)
	d := e.delivery(t, "p1", id, inState(deliverylog.StateDeadLettered))
	assert.Contains(t, d.Error, "payload_too_large")
	assert.Equal(t, int64(1), r.sum(t, "otelcol_agent_calls", delivery.OutcomeDeadLettered))
}

// The call budget applies to incident calls: past it the call is not made and not an
// error; the outcome records no call, which the processor reads as refused.
func TestIncidentCallRefusedByTheBudget(t *testing.T) {
	e := newEnv(t)
	a := newAgent(t, func(_ int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	p := project("p1", a.srv.URL)
	p.Pipeline.MaxCallsPerMinute = 1
	e.putProject(t, p)
	r := e.start(t, nil)

	_, err := incidentCall(t, r, "p1", "req_00000000000000000000000000000002", `{"reason":"opened"}`)
	require.NoError(t, err)
	o, err := incidentCall(t, r, "p1", "req_00000000000000000000000000000003", `{"reason":"updated"}`)
	if time.Now().Second() == 59 && len(a.requests()) == 2 {
		t.Skip("the minute turned between the two calls")
	}
	require.NoError(t, err, "refused is not an error")
	assert.Len(t, a.requests(), 1)
	delivered, deadLettered := o.Calls()
	assert.Zero(t, delivered+deadLettered, "no call made")
}
