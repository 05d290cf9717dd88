package ingestreceiver

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/incident"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

func postIncidentResult(t *testing.T, tr *testReceiver, project, id string, payload any) answer {
	t.Helper()
	body, err := json.Marshal(map[string]any{"request_id": id, "payload": payload})
	require.NoError(t, err)
	return do(t, http.MethodPost, tr.url+"/internal/agent-output", body, map[string]string{"X-API-Key": "key-" + project})
}

// The result of an incident's call is attached to the incident: the console and the
// Slack root message show what the agent found. Other results leave incidents alone.
func TestIncidentCallResultsAreAttached(t *testing.T) {
	n := testenv.StartNATS(t)
	_, js := testenv.Connect(t, n.URL())
	tr := startTestReceiver(t, nil, &fakeAuth{js: js})
	withIssuer(t, tr, js)
	require.Eventually(t, func() bool { return tr.ids.Load() != nil }, 10*time.Second, 10*time.Millisecond)
	exp := exporterIssuer(t, n.URL())
	ctx := context.Background()

	// No incident was ever opened: results are stored as always, and no bucket is made.
	a := postResult(t, tr, "p1", exp.New("p1"))
	require.Equal(t, http.StatusAccepted, a.status, "%s", a.body)
	_, err := js.KeyValue(ctx, incident.Bucket)
	require.ErrorIs(t, err, jetstream.ErrBucketNotFound)

	st, err := incident.Open(ctx, js, 1)
	require.NoError(t, err)
	set := incident.Settings{GroupWait: 0, GroupInterval: time.Minute, ResolveAfter: time.Hour}
	res, err := st.Apply(ctx, "p1", set, incident.Join{Fingerprint: "db-down", BatchKey: "b1", Events: 3, Title: "DB down", At: time.Now().UTC()})
	require.NoError(t, err)
	call := exp.New("p1")
	_, ok, err := st.Claim(ctx, "p1", incident.FingerprintHash("db-down"), incident.ReasonOpened, call, "pipeline-1", time.Now().UTC(), set, time.Minute)
	require.NoError(t, err)
	require.True(t, ok, "the opening call is due")
	before, err := st.Get(ctx, "p1", res.Incident.ID)
	require.NoError(t, err)

	// Results of other calls, or under ids never issued to the project, change nothing.
	for _, id := range []string{exp.New("p1"), "req_00112233445566778899aabbccddeeff", exp.New("p2")} {
		a := postResult(t, tr, "p1", id)
		require.Equal(t, http.StatusAccepted, a.status, "%s", a.body)
	}
	a = postIncidentResult(t, tr, "p2", call, map[string]string{"summary": "p2 claims it"})
	require.Equal(t, http.StatusAccepted, a.status, "%s", a.body)
	got, err := st.Get(ctx, "p1", res.Incident.ID)
	require.NoError(t, err)
	assert.Equal(t, before.Timeline, got.Timeline)
	assert.Empty(t, got.LastResult)

	a = postIncidentResult(t, tr, "p1", call, map[string]any{"summary": "the primary ran out of connections", "confidence": 0.8})
	require.Equal(t, http.StatusAccepted, a.status, "%s", a.body)
	got, err = st.Get(ctx, "p1", res.Incident.ID)
	require.NoError(t, err)
	assert.Equal(t, "the primary ran out of connections", got.LastResult)
	last := got.Timeline[len(got.Timeline)-1]
	assert.Equal(t, "result", last.Type)
	assert.Equal(t, call, last.RequestID)

	// Without a text field the result is its compact JSON, cut to 500 characters.
	a = postIncidentResult(t, tr, "p1", call, map[string]any{"findings": []string{strings.Repeat("é", 600)}})
	require.Equal(t, http.StatusAccepted, a.status, "%s", a.body)
	got, err = st.Get(ctx, "p1", res.Incident.ID)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(got.LastResult, `{"findings":["éé`), got.LastResult)
	assert.Equal(t, 500, len([]rune(got.LastResult)))
}

func TestResultText(t *testing.T) {
	for payload, want := range map[string]string{
		`{"text":"a","summary":"b","message":"c"}`:      "a",
		`{"summary":"b","message":"c"}`:                 "b",
		`{"message":"c"}`:                               "c",
		`{"text":"  ","summary":{"x":1},"message":"c"}`: "c",
		`{"text": 1}`:                                   `{"text":1}`,
		` { "a" : [1, 2] } `:                            `{"a":[1,2]}`,
		`"plain words"`:                                 "plain words",
		`42`:                                            "42",
	} {
		assert.Equal(t, want, resultText([]byte(payload)), payload)
	}
	long := resultText([]byte(`{"text":"` + strings.Repeat("ü", 501) + `"}`))
	assert.Equal(t, strings.Repeat("ü", 500), long, "500 characters, not bytes")
}
