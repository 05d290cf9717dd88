package ingestreceiver

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/deliverylog"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

func (tr *testReceiver) ledgerOpen() bool {
	tr.results.mu.Lock()
	defer tr.results.mu.Unlock()
	return tr.results.ledger != nil
}

func ledgerOf(t *testing.T, tr *testReceiver, project string) deliverylog.LedgerView {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	v, err := deliverylog.View(ctx, tr.dp.JetStream(), project, deliverylog.ViewOptions{})
	require.NoError(t, err)
	return v
}

// Each stored result counts in its project's ledger, and those under request ids never
// issued to the project count as unmatched too; the counts are flushed at shutdown.
func TestResultsAreCountedInTheLedger(t *testing.T) {
	n := testenv.StartNATS(t)
	_, js := testenv.Connect(t, n.URL())
	tr := startTestReceiver(t, nil, &fakeAuth{js: js})
	withIssuer(t, tr, js)
	tr.startLedger(js)
	require.Eventually(t, func() bool { return tr.ids.Load() != nil && tr.ledgerOpen() }, 10*time.Second, 10*time.Millisecond)
	exp := exporterIssuer(t, n.URL())

	for _, id := range []string{exp.New("p1"), exp.New("p1"), "req_00112233445566778899aabbccddeeff", exp.New("p2")} {
		a := postResult(t, tr, "p1", id)
		require.Equal(t, http.StatusAccepted, a.status, "%s", a.body)
	}
	a := postResult(t, tr, "p2", exp.New("p2"))
	require.Equal(t, http.StatusAccepted, a.status, "%s", a.body)
	require.NoError(t, tr.Shutdown(context.Background()))

	v := ledgerOf(t, tr, "p1")
	assert.EqualValues(t, 4, v.Results)
	assert.EqualValues(t, 2, v.Unmatched, "made up, and another project's")
	v = ledgerOf(t, tr, "p2")
	assert.EqualValues(t, 1, v.Results)
	assert.EqualValues(t, 0, v.Unmatched)
}

// A refused result is not a result.
func TestRefusedResultsAreNotCounted(t *testing.T) {
	n := testenv.StartNATS(t)
	_, js := testenv.Connect(t, n.URL())
	tr := startTestReceiver(t, nil, &fakeAuth{js: js})
	tr.startLedger(js)
	require.Eventually(t, tr.ledgerOpen, 10*time.Second, 10*time.Millisecond)
	a := do(t, http.MethodPost, tr.url+"/internal/agent-output", []byte(`{"payload":{}}`), map[string]string{"X-API-Key": "key-p1"})
	require.Equal(t, http.StatusBadRequest, a.status, "%s", a.body)
	a = postResult(t, tr, "p1", "req_1")
	require.Equal(t, http.StatusAccepted, a.status, "%s", a.body)
	require.NoError(t, tr.Shutdown(context.Background()))
	assert.EqualValues(t, 1, ledgerOf(t, tr, "p1").Results)
}

// The receiver takes results while NATS is away; they are counted once the ledger opens.
func TestResultsCountedWhileNATSIsAwayReachTheLedger(t *testing.T) {
	n := testenv.StartNATS(t)
	_, js := testenv.Connect(t, n.URL())
	n.Stop()
	tr := startTestReceiver(t, nil, &fakeAuth{js: js})
	tr.startLedger(js)
	for range 3 {
		a := postResult(t, tr, "p1", "req_00112233445566778899aabbccddeeff")
		require.Equal(t, http.StatusAccepted, a.status, "%s", a.body)
	}
	assert.False(t, tr.ledgerOpen())

	n.Start(t)
	require.Eventually(t, tr.ledgerOpen, 20*time.Second, 20*time.Millisecond)
	a := postResult(t, tr, "p1", "req_00112233445566778899aabbccddeeff")
	require.Equal(t, http.StatusAccepted, a.status, "%s", a.body)
	require.NoError(t, tr.Shutdown(context.Background()))
	v := ledgerOf(t, tr, "p1")
	assert.EqualValues(t, 4, v.Results)
	assert.EqualValues(t, 0, v.Unmatched, "no key loaded: nothing marked")
}

// An agent written elsewhere sends metadata of its own beside request_id and payload:
// the result is stored and counted, not refused with 400 unknown field "extra".
func TestResultWithExtraTopLevelFieldsIsStored(t *testing.T) {
	n := testenv.StartNATS(t)
	_, js := testenv.Connect(t, n.URL())
	tr := startTestReceiver(t, nil, &fakeAuth{js: js})
	tr.startLedger(js)
	require.Eventually(t, tr.ledgerOpen, 10*time.Second, 10*time.Millisecond)
	body := `{"request_id":"req_1","extra":{"agent":"someone-else/1.2"},"payload":{"summary":"ok"},"trace_id":"abc"}`
	a := do(t, http.MethodPost, tr.url+"/internal/agent-output", []byte(body),
		map[string]string{"X-API-Key": "key-p1"})
	require.Equal(t, http.StatusAccepted, a.status, "%s", a.body)
	assert.Contains(t, string(a.body), `"request_id":"req_1"`)
	require.NoError(t, tr.Shutdown(context.Background()))
	assert.EqualValues(t, 1, ledgerOf(t, tr, "p1").Results)
}
