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

	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
)

var t0 = time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)

type incCall struct {
	Incident struct {
		ID          string `json:"id"`
		Fingerprint string `json:"fingerprint"`
		Title       string `json:"title"`
		Status      string `json:"status"`
		Counts      struct {
			Events    int `json:"events"`
			NewEvents int `json:"new_events"`
			Calls     int `json:"calls"`
		} `json:"counts"`
	} `json:"incident"`
	Reason        string            `json:"reason"`
	Events        []json.RawMessage `json:"events"`
	EventsLeftOut int               `json:"events_left_out"`
	Window        []json.RawMessage `json:"window"`
}

func incCalls(t *testing.T, a *Answer) []incCall {
	t.Helper()
	out := make([]incCall, len(a.Calls))
	for i, c := range a.Calls {
		require.NoError(t, json.Unmarshal(c, &out[i]), "%s", c)
	}
	return out
}

// rec is a record of service svc at t0+at.
func rec(seq int, at time.Duration, svc, body string, sev int) Record {
	return Record{Seq: uint64(seq), Time: t0.Add(at), Signal: "log",
		Data: []byte(fmt.Sprintf(`{"severityNumber":%d,"body":%q,"resourceAttributes":{"service.name":%q}}`, sev, body, svc))}
}

var byService = mirror.Pipeline{Mode: mirror.ModeIncident,
	Trigger:       `severity_number >= 17`,
	ResolveWhen:   `body == "recovered"`,
	Fingerprint:   `resource_attributes["service.name"]`,
	ContextFilter: `severity_number >= 9`,
}

// Over the records' stored times: checkout opens at 0s and is called about at 30s
// (group_wait) with its two events, its third event waits for the next call, and
// "recovered" resolves it at 2m (resolve_when): the resolved call carries that event.
// cart opens at 1m, is called about at 1m30s, and with nothing more resolves 30m after
// its last event (resolve_after), as if no other record came.
func TestIncidentLifecycleOverStoredTimes(t *testing.T) {
	recs := []Record{
		rec(1, 0, "checkout", "timeout", 17),
		rec(2, 5*time.Second, "checkout", "context", 9),
		rec(3, 10*time.Second, "checkout", "timeout again", 17),
		rec(4, 40*time.Second, "checkout", "still failing", 17),
		rec(5, time.Minute, "cart", "disk full", 18),
		rec(6, 90*time.Second, "cart", "noise", 5),
		rec(7, 2*time.Minute, "checkout", "recovered", 9),
		rec(8, 3*time.Minute, "checkout", "fine", 9),
	}
	a := Evaluate(context.Background(), compile(t, byService), recs, roomy)
	assert.Equal(t, "incident", a.Mode)
	require.NotNil(t, a.Incidents)
	assert.Equal(t, 2, *a.Incidents)
	assert.Equal(t, 4, a.Matched)
	assert.Equal(t, []uint64{1, 3, 4, 5}, a.MatchedSeqs)

	calls := incCalls(t, a)
	require.Len(t, calls, 4, "%s", a.Calls)
	reasons := []string{}
	for _, c := range calls {
		reasons = append(reasons, c.Incident.Fingerprint+":"+c.Reason)
	}
	assert.Equal(t, []string{"checkout:opened", "cart:opened", "checkout:resolved", "cart:resolved"}, reasons)

	open := calls[0]
	assert.Equal(t, "timeout", open.Incident.Title, "the first event names it")
	assert.Equal(t, "open", open.Incident.Status)
	assert.True(t, strings.HasPrefix(open.Incident.ID, "inc_") && strings.HasSuffix(open.Incident.ID, "_1"), open.Incident.ID)
	assert.Equal(t, 2, open.Incident.Counts.Events)
	require.Len(t, open.Events, 2)
	assert.Contains(t, string(open.Events[0]), `"timeout"`)
	assert.Contains(t, string(open.Events[1]), `"timeout again"`)
	require.Len(t, open.Window, 3, "its fingerprint's context within the window: not cart's")
	assert.Contains(t, string(open.Window[1]), `"context"`)

	res := calls[2]
	assert.Equal(t, "resolved", res.Incident.Status)
	assert.Equal(t, open.Incident.ID, res.Incident.ID)
	require.Len(t, res.Events, 1, "the event after the opening call")
	assert.Contains(t, string(res.Events[0]), `"still failing"`)
	assert.Equal(t, 1, res.Incident.Counts.Calls, "the calls made before this one")

	assert.Equal(t, "disk full", calls[1].Incident.Title)
	require.Len(t, calls[1].Window, 1, "noise failed the context filter")
	assert.Equal(t, "resolved", calls[3].Incident.Status, "resolved after resolve_after without events")
	assert.Empty(t, calls[3].Events)

	// Counting alone counts the same.
	e := New(context.Background(), compile(t, byService), Limits{EvalTime: time.Minute, Count: true})
	for _, r := range recs {
		e.Add(r)
	}
	c := e.Answer()
	assert.Empty(t, c.Calls)
	assert.Equal(t, 4, c.TotalCalls())
	assert.Equal(t, 2, *c.Incidents)
}

// An update call goes out per group_interval while new events come, and never without
// them.
func TestIncidentUpdatesPerGroupInterval(t *testing.T) {
	p := byService
	p.GroupWait, p.GroupInterval, p.ResolveAfter = "10s", "1m", "10m"
	var recs []Record
	for i := 0; i < 10; i++ { // an error every 20s for 3m
		recs = append(recs, rec(i+1, time.Duration(i)*20*time.Second, "checkout", fmt.Sprintf("err %d", i), 17))
	}
	a := Evaluate(context.Background(), compile(t, p), recs, roomy)
	var reasons []string
	var events []int
	for _, c := range incCalls(t, a) {
		reasons = append(reasons, c.Reason)
		events = append(events, len(c.Events))
	}
	// Opened at 10s (events at 0s); updates at 1m10s (20s..60s), 2m10s (80s..120s),
	// 3m10s (140s..180s); resolved 10m after the last event, with nothing new.
	assert.Equal(t, []string{"opened", "updated", "updated", "updated", "resolved"}, reasons)
	assert.Equal(t, []int{1, 3, 3, 3, 0}, events)
	assert.Equal(t, 1, *a.Incidents)
}

// reopen_within: an event soon after the resolution reopens the same incident; without
// it, the fingerprint's next incident is a new one.
func TestIncidentReopenWithin(t *testing.T) {
	recs := []Record{
		rec(1, 0, "checkout", "timeout", 17),
		rec(2, time.Minute, "checkout", "recovered", 9),
		rec(3, 3*time.Minute, "checkout", "timeout", 17),
	}
	p := byService
	a := Evaluate(context.Background(), compile(t, p), recs, roomy)
	assert.Equal(t, 2, *a.Incidents)
	calls := incCalls(t, a)
	require.Len(t, calls, 4)
	assert.Equal(t, []string{"opened", "resolved", "opened", "resolved"}, []string{calls[0].Reason, calls[1].Reason, calls[2].Reason, calls[3].Reason})
	assert.NotEqual(t, calls[0].Incident.ID, calls[2].Incident.ID)
	assert.True(t, strings.HasSuffix(calls[2].Incident.ID, "_2"), "the fingerprint's second generation")

	p.ReopenWithin = "5m"
	a = Evaluate(context.Background(), compile(t, p), recs, roomy)
	assert.Equal(t, 1, *a.Incidents, "reopened, not a new one")
	calls = incCalls(t, a)
	require.Len(t, calls, 4)
	assert.Equal(t, []string{"opened", "resolved", "updated", "resolved"}, []string{calls[0].Reason, calls[1].Reason, calls[2].Reason, calls[3].Reason})
	for _, c := range calls {
		assert.Equal(t, calls[0].Incident.ID, c.Incident.ID)
	}
	assert.Equal(t, 2, calls[3].Incident.Counts.Events)
}

// A call carries at most 100 new events, the newest, and says how many it left out.
func TestIncidentCallLeavesOutEventsPastTheMost(t *testing.T) {
	var recs []Record
	for i := 0; i < 150; i++ {
		recs = append(recs, rec(i+1, time.Duration(i)*100*time.Millisecond, "checkout", fmt.Sprintf("err %d", i), 17))
	}
	a := Evaluate(context.Background(), compile(t, byService), recs, roomy)
	calls := incCalls(t, a)
	require.NotEmpty(t, calls)
	assert.Equal(t, "opened", calls[0].Reason)
	require.Len(t, calls[0].Events, 100)
	assert.Equal(t, 50, calls[0].EventsLeftOut)
	assert.Contains(t, string(calls[0].Events[0]), `"err 50"`, "the newest, oldest first")
	assert.Contains(t, string(a.Calls[0]), `"events_left_out":50`)
	assert.NotContains(t, string(a.Calls[len(a.Calls)-1]), `events_left_out`, "only when some were left out")
}

// The answer's call budget bounds incident calls as the others, and legacy and window
// answers carry no "incidents".
func TestIncidentAnswerBounds(t *testing.T) {
	var recs []Record
	for i := 0; i < 40; i++ {
		recs = append(recs, rec(i+1, time.Duration(i)*time.Second, fmt.Sprintf("svc-%d", i), strings.Repeat("x", 500), 17))
	}
	lim := roomy
	lim.CallBytes = 4000
	a := Evaluate(context.Background(), compile(t, byService), recs, lim)
	assert.Equal(t, 40, *a.Incidents)
	assert.Equal(t, 80, a.TotalCalls(), "an opening and a resolved call each")
	assert.NotZero(t, a.CallsLeftOut)
	assert.NotEmpty(t, a.Calls)

	for _, p := range []mirror.Pipeline{{}, {WindowEnabled: true}} {
		b, err := json.Marshal(Evaluate(context.Background(), compile(t, p), recs[:3], roomy))
		require.NoError(t, err)
		assert.NotContains(t, string(b), `"incidents"`)
	}
	b, err := json.Marshal(Evaluate(context.Background(), compile(t, byService), nil, roomy))
	require.NoError(t, err)
	assert.Contains(t, string(b), `"incidents":0`, "incident mode says so even when none would open")
}

// A project has at most 500 open incidents: the events of further fingerprints join the
// overflow incident.
func TestIncidentOverflow(t *testing.T) {
	var recs []Record
	for i := 0; i < 503; i++ {
		recs = append(recs, rec(i+1, time.Duration(i)*time.Millisecond, fmt.Sprintf("svc-%d", i), "down", 17))
	}
	e := New(context.Background(), compile(t, byService), Limits{EvalTime: time.Minute, Count: true})
	for _, r := range recs {
		require.True(t, e.Add(r))
	}
	a := e.Answer()
	assert.Equal(t, 501, *a.Incidents, "500 and the overflow incident")
}

// A record resolve_when matches never opens an incident, even when the trigger matches
// it too: with no incident open it is nothing, with one open it resolves it and is no
// event of it.
func TestIncidentResolvingRecordNeverOpens(t *testing.T) {
	p := byService
	p.Trigger = `severity_number >= 9` // "recovered" (9) matches both
	recs := []Record{
		rec(1, 0, "checkout", "recovered", 9),
		rec(2, time.Minute, "checkout", "timeout", 17),
		rec(3, 2*time.Minute, "checkout", "recovered", 9),
		rec(4, 3*time.Minute, "cart", "recovered", 9),
	}
	a := Evaluate(context.Background(), compile(t, p), recs, roomy)
	require.NotNil(t, a.Incidents)
	assert.Equal(t, 1, *a.Incidents, "only the timeout opens one")
	assert.Equal(t, []uint64{2}, a.MatchedSeqs, "a resolving record is no event")
	calls := incCalls(t, a)
	require.Len(t, calls, 2)
	assert.Equal(t, []string{"opened", "resolved"}, []string{calls[0].Reason, calls[1].Reason})
	assert.Equal(t, calls[0].Incident.ID, calls[1].Incident.ID)
	assert.Equal(t, 1, calls[1].Incident.Counts.Events)
	assert.Empty(t, calls[1].Events, "the resolving record is not carried as an event")
}
