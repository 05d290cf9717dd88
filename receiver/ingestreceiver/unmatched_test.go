package ingestreceiver

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/exporter/exportertest"

	"github.com/otelcol-svc/otelcol-svc/exporter/jetstreamexporter"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/natsclient"
	"github.com/otelcol-svc/otelcol-svc/internal/requestid"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// withIssuer runs the receiver's background key loader on js, as Start does.
func withIssuer(t *testing.T, tr *testReceiver, js jetstream.JetStream) {
	t.Helper()
	tr.startIssuer(js)
	t.Cleanup(func() { tr.stopIDs(); tr.wg.Wait() })
}

// exporterIssuer is the key as the agent exporter, another process, loads it.
func exporterIssuer(t *testing.T, url string) *requestid.Issuer {
	t.Helper()
	_, js := testenv.Connect(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	iss, err := requestid.Load(ctx, js)
	require.NoError(t, err)
	return iss
}

func postResult(t *testing.T, tr *testReceiver, project, id string) answer {
	t.Helper()
	body, err := json.Marshal(map[string]any{"request_id": id, "payload": map[string]string{"summary": "ok"}})
	require.NoError(t, err)
	return do(t, http.MethodPost, tr.url+"/internal/agent-output", body, map[string]string{"X-API-Key": "key-" + project})
}

// storeWithExporter makes the receiver's logs pipeline the real JetStream exporter, so a
// test sees results as the sinks will: messages on the project's output stream.
func storeWithExporter(t *testing.T, tr *testReceiver, url string) {
	t.Helper()
	f := jetstreamexporter.NewFactory()
	cfg := f.CreateDefaultConfig().(*jetstreamexporter.Config)
	cfg.NATS = natsclient.Config{URL: url, ConnectTimeout: 2 * time.Second}
	cfg.Usage.Enabled = false // results are not usage; no mirror needed
	exp, err := f.CreateLogs(context.Background(), exportertest.NewNopSettings(f.Type()), cfg)
	require.NoError(t, err)
	require.NoError(t, exp.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { _ = exp.Shutdown(context.Background()) })
	tr.logs = exp
}

// storedResults returns the Svc-Unmatched header of each result on project's output
// stream, by request id.
func storedResults(t *testing.T, js jetstream.JetStream, project string, n int) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := js.OrderedConsumer(ctx, streams.OutputStream(project), jetstream.OrderedConsumerConfig{})
	require.NoError(t, err)
	batch, err := c.Fetch(n, jetstream.FetchMaxWait(2*time.Second))
	require.NoError(t, err)
	got := map[string]string{}
	for m := range batch.Messages() {
		got[m.Headers().Get(streams.HeaderRequestID)] = m.Headers().Get(streams.HeaderUnmatched)
	}
	require.NoError(t, batch.Error())
	return got
}

func TestResultsUnderIdsNotIssuedToTheProjectAreUnmatched(t *testing.T) {
	n := testenv.StartNATS(t)
	_, js := testenv.Connect(t, n.URL())
	tr := startTestReceiver(t, nil, &fakeAuth{js: js})
	storeWithExporter(t, tr, n.URL())
	withIssuer(t, tr, js)
	require.Eventually(t, func() bool { return tr.ids.Load() != nil }, 10*time.Second, 10*time.Millisecond)
	exp := exporterIssuer(t, n.URL())

	cases := []struct {
		name, id  string
		unmatched string
	}{
		{"issued to the project", exp.New("p1"), ""},
		{"made up", "req_00112233445566778899aabbccddeeff", "1"},
		{"issued to another project", exp.New("p2"), "1"},
		{"not even our shape", "my-own-id", "1"},
	}
	for _, c := range cases {
		a := postResult(t, tr, "p1", c.id)
		require.Equal(t, http.StatusAccepted, a.status, "%s: %s", c.name, a.body)
		assert.JSONEq(t, `{"accepted": true, "request_id": "`+c.id+`"}`, string(a.body), "%s: answered as always", c.name)
	}
	stored := storedResults(t, js, "p1", len(cases))
	require.Len(t, stored, len(cases), "every result is stored, matched or not")
	for _, c := range cases {
		assert.Equal(t, c.unmatched, stored[c.id], "%s: Svc-Unmatched", c.name)
	}
}

func TestResultsAreNotMarkedUntilTheKeyLoads(t *testing.T) {
	n := testenv.StartNATS(t)
	_, js := testenv.Connect(t, n.URL())
	exp := exporterIssuer(t, n.URL())
	n.Stop()

	tr := startTestReceiver(t, nil, &fakeAuth{js: js})
	withIssuer(t, tr, js)
	a := postResult(t, tr, "p1", "req_00112233445566778899aabbccddeeff")
	require.Equal(t, http.StatusAccepted, a.status, "%s", a.body)
	got := tr.consumed()
	require.Len(t, got, 1)
	assert.False(t, got[0].info.Unmatched, "no false alarm while the key is unknown")

	n.Start(t) // NATS back: the loader's retry picks the stored key up
	require.Eventually(t, func() bool { return tr.ids.Load() != nil }, 20*time.Second, 20*time.Millisecond)
	assert.True(t, tr.unmatched("p1", "req_00112233445566778899aabbccddeeff"))
	assert.False(t, tr.unmatched("p1", exp.New("p1")), "the same key as the exporter's")
}
