package incident

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A refused opening call is no opening call: the agent is still to hear of the incident,
// it is tried again a minute later, and nothing later (updates, the resolved call) comes
// before it.
func TestRefusedOpeningCallIsMadeAgain(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	fph := FingerprintHash("db-1")
	apply(t, e.s, defaults, "db-1", "1", 3, t0)
	at := t0.Add(defaults.GroupWait)
	_, ok, err := e.s.Claim(ctx, "p1", fph, ReasonOpened, "req_1", "a", at, defaults, time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	inc, notices, err := e.s.Complete(ctx, "p1", fph, "req_1", OutcomeRefused, at)
	require.NoError(t, err)
	assert.Empty(t, notices)
	assert.False(t, inc.OpeningDone)
	assert.Zero(t, inc.Calls)
	assert.Equal(t, int64(3), inc.NewEvents, "its events are still to be told")
	last := inc.Timeline[len(inc.Timeline)-1]
	assert.Equal(t, OutcomeRefused, last.Outcome)
	assert.Equal(t, "call budget", last.By)

	_, _, due := Due(inc, defaults, at.Add(30*time.Second), time.Minute)
	assert.False(t, due, "not again at once")
	// Resolved meanwhile: the opening call still comes first.
	inc, _, err = e.s.Act(ctx, "p1", inc.ID, ActionResolve, "user:a@example.com", at.Add(40*time.Second))
	require.NoError(t, err)
	reason, _, due := Due(inc, defaults, at.Add(time.Minute), time.Minute)
	require.True(t, due)
	assert.Equal(t, ReasonOpened, reason)

	c, ok, err := e.s.Claim(ctx, "p1", fph, ReasonOpened, "req_2", "a", at.Add(time.Minute), defaults, time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "req_1", c.Pending.RequestID, "the refused call again")
	inc, _, err = e.s.Complete(ctx, "p1", fph, "req_1", OutcomeDelivered, at.Add(time.Minute))
	require.NoError(t, err)
	assert.True(t, inc.OpeningDone)
	assert.Equal(t, 1, inc.Calls)
	reason, _, due = Due(inc, defaults, at.Add(time.Minute), time.Minute)
	require.True(t, due, "the refusal holds nothing back once a call was made")
	assert.Equal(t, ReasonResolved, reason)
}

// A refused reinvestigation or resolved call stays requested.
func TestRefusedCallsStayDue(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	fph := FingerprintHash("db-1")
	r := apply(t, e.s, defaults, "db-1", "1", 1, t0)
	at := t0.Add(defaults.GroupWait)
	_, _, err := e.s.Claim(ctx, "p1", fph, ReasonOpened, "req_1", "a", at, defaults, time.Minute)
	require.NoError(t, err)
	_, _, err = e.s.Complete(ctx, "p1", fph, "req_1", OutcomeDelivered, at)
	require.NoError(t, err)
	_, _, err = e.s.Act(ctx, "p1", r.Incident.ID, ActionReinvestigate, "user:a@example.com", at)
	require.NoError(t, err)
	_, ok, err := e.s.Claim(ctx, "p1", fph, ReasonReinvestigate, "req_2", "a", at, defaults, time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	inc, _, err := e.s.Complete(ctx, "p1", fph, "req_2", OutcomeRefused, at)
	require.NoError(t, err)
	assert.True(t, inc.ReinvestigateRequested)

	_, _, err = e.s.Act(ctx, "p1", r.Incident.ID, ActionResolve, "user:a@example.com", at)
	require.NoError(t, err)
	later := at.Add(time.Minute)
	c, ok, err := e.s.Claim(ctx, "p1", fph, ReasonReinvestigate, "req_3", "a", later, defaults, time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "req_2", c.Pending.RequestID)
	_, _, err = e.s.Complete(ctx, "p1", fph, "req_2", OutcomeDelivered, later)
	require.NoError(t, err)
	_, ok, err = e.s.Claim(ctx, "p1", fph, ReasonResolved, "req_4", "a", later, defaults, time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	inc, _, err = e.s.Complete(ctx, "p1", fph, "req_4", OutcomeRefused, later)
	require.NoError(t, err)
	assert.False(t, inc.ResolvedCallDone)
	reason, _, due := Due(inc, defaults, later.Add(time.Minute), time.Minute)
	require.True(t, due)
	assert.Equal(t, ReasonResolved, reason)
}

// An incident reopened while its resolved call runs gets a resolved call again when it
// resolves again.
func TestReopenDuringTheResolvedCall(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	set := defaults
	set.ReopenWithin = time.Hour
	fph := FingerprintHash("db-1")
	apply(t, e.s, set, "db-1", "1", 1, t0)
	at := t0.Add(set.GroupWait)
	_, _, err := e.s.Claim(ctx, "p1", fph, ReasonOpened, "req_1", "a", at, set, time.Minute)
	require.NoError(t, err)
	_, _, err = e.s.Complete(ctx, "p1", fph, "req_1", OutcomeDelivered, at)
	require.NoError(t, err)
	_, err = e.s.Apply(ctx, "p1", set, Join{Fingerprint: "db-1", BatchKey: "2", Resolve: true, At: at.Add(time.Second)})
	require.NoError(t, err)
	_, ok, err := e.s.Claim(ctx, "p1", fph, ReasonResolved, "req_2", "a", at.Add(2*time.Second), set, time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	// Reopened and resolved again while the call runs.
	apply(t, e.s, set, "db-1", "3", 1, at.Add(3*time.Second))
	_, err = e.s.Apply(ctx, "p1", set, Join{Fingerprint: "db-1", BatchKey: "4", Resolve: true, At: at.Add(4 * time.Second)})
	require.NoError(t, err)
	inc, _, err := e.s.Complete(ctx, "p1", fph, "req_2", OutcomeDelivered, at.Add(5*time.Second))
	require.NoError(t, err)
	assert.False(t, inc.ResolvedCallDone)
	reason, _, due := Due(inc, set, at.Add(5*time.Second), time.Minute)
	require.True(t, due)
	assert.Equal(t, ReasonResolved, reason)
	// Reopened and still open when it ends: no resolved call was told of this opening.
	_, ok, err = e.s.Claim(ctx, "p1", fph, ReasonResolved, "req_3", "a", at.Add(6*time.Second), set, time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	apply(t, e.s, set, "db-1", "5", 1, at.Add(7*time.Second))
	inc, _, err = e.s.Complete(ctx, "p1", fph, "req_3", OutcomeDelivered, at.Add(8*time.Second))
	require.NoError(t, err)
	assert.Equal(t, StatusOpen, inc.Status)
	assert.False(t, inc.ResolvedCallDone)
}

// A call the budget keeps refusing is tried again a minute after each refusal under its
// first request id: no new c-key per attempt (ByRequest still finds it), one timeline
// entry counting the attempts, and the call finally made keeps that id.
func TestRefusedCallRetriesUnderOneRequestID(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	fph := FingerprintHash("db-1")
	set := defaults
	set.GroupInterval = 24 * time.Hour // the retry waits a minute, not the interval
	r := apply(t, e.s, set, "db-1", "1", 3, t0)
	at := t0.Add(set.GroupWait)
	var inc Incident
	for k := range 5 {
		c, ok, err := e.s.Claim(ctx, "p1", fph, ReasonOpened, "req_"+strconv.Itoa(k), "a", at, set, time.Minute)
		require.NoError(t, err)
		require.True(t, ok, "attempt %d", k)
		require.Equal(t, "req_0", c.Pending.RequestID, "attempt %d", k)
		inc, _, err = e.s.Complete(ctx, "p1", fph, c.Pending.RequestID, OutcomeRefused, at)
		require.NoError(t, err)
		_, _, due := Due(inc, set, at.Add(59*time.Second), time.Minute)
		require.False(t, due)
		at = at.Add(time.Minute)
	}
	keys, err := e.s.KV().ListKeysFiltered(ctx, cKey("p1", "*"))
	require.NoError(t, err)
	var ck []string
	for k := range keys.Keys() {
		ck = append(ck, k)
	}
	assert.Equal(t, []string{cKey("p1", "req_0")}, ck, "one c-key for all attempts")
	var refused []Entry
	for _, en := range inc.Timeline {
		if en.Outcome == OutcomeRefused {
			refused = append(refused, en)
		}
	}
	require.Len(t, refused, 1, "one timeline entry for the refused call")
	assert.Equal(t, int64(5), refused[0].Count)
	assert.Equal(t, at.Add(-time.Minute), refused[0].At, "the last attempt")

	// The budget lets it through: the call is made under the same id, which finds it.
	c, ok, err := e.s.Claim(ctx, "p1", fph, ReasonOpened, "req_9", "a", at, set, time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "req_0", c.Pending.RequestID)
	found, reason, ok, err := e.s.ByRequest(ctx, "p1", "req_0")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, r.Incident.ID, found.ID)
	assert.Equal(t, ReasonOpened, reason)
	inc, _, err = e.s.Complete(ctx, "p1", fph, "req_0", OutcomeDelivered, at)
	require.NoError(t, err)
	assert.True(t, inc.OpeningDone)
	assert.Empty(t, inc.RefusedRequestID)

	// A later refused call with another reason gets its own id and c-key.
	apply(t, e.s, set, "db-1", "2", 1, at)
	_, _, err = e.s.Act(ctx, "p1", inc.ID, ActionResolve, "user:a@example.com", at)
	require.NoError(t, err)
	c, ok, err = e.s.Claim(ctx, "p1", fph, ReasonResolved, "req_10", "a", at, set, time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, "req_10", c.Pending.RequestID)
}
