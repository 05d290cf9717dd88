package sourcepreset

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/cloudevents/sdk-go/v2/binding"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// received is one request as a server saw it.
type received struct {
	header http.Header
	body   []byte
}

// sendWithSDK posts e the way the CloudEvents SDK's HTTP binding writes it (binary mode
// unless ctx forces structured) and returns what the server received.
func sendWithSDK(t *testing.T, ctx context.Context, e cloudevents.Event) received {
	t.Helper()
	got := make(chan received, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- received{header: r.Header.Clone(), body: b}
		w.WriteHeader(http.StatusAccepted)
	}))
	defer srv.Close()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, nil)
	require.NoError(t, err)
	require.NoError(t, cehttp.WriteRequest(ctx, binding.ToMessage(&e), req))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	return <-got
}

func sampleEvent(t *testing.T, id string) cloudevents.Event {
	e := cloudevents.NewEvent()
	e.SetID(id)
	e.SetSource("https://github.com/cloudevents/spec/pull")
	e.SetType("com.github.pull_request.opened")
	e.SetSubject("123 é/ü")
	e.SetTime(time.Date(2018, 4, 5, 17, 31, 0, 0, time.UTC))
	e.SetExtension("comexampleextension1", "value")
	require.NoError(t, e.SetData(cloudevents.ApplicationJSON, map[string]any{"number": 123, "title": "Fix it"}))
	return e
}

func TestCloudEventsBinaryModeFromTheSDK(t *testing.T) {
	got := sendWithSDK(t, context.Background(), sampleEvent(t, "A234-1234-1234"))
	require.Equal(t, "1.0", got.header.Get("Ce-Specversion"), "the SDK wrote binary mode")

	evs, err := Split(CloudEvents, got.header, got.body, Limits{})
	require.NoError(t, err)
	require.Len(t, evs, 1)
	ev := evs[0]
	assert.Equal(t, "com.github.pull_request.opened", ev.EventType)
	assert.Equal(t, "https://github.com/cloudevents/spec/pull", ev.Source)
	assert.Equal(t, time.Date(2018, 4, 5, 17, 31, 0, 0, time.UTC), ev.Time)
	assert.JSONEq(t, `{"number":123,"title":"Fix it"}`, string(ev.Payload), "the body is the data")
	assert.Equal(t, map[string]string{"subject": "123 é/ü", "comexampleextension1": "value"}, ev.Labels)
	assert.Equal(t, "com.github.pull_request.opened from https://github.com/cloudevents/spec/pull: 123 é/ü", ev.Text)
	assert.Equal(t, "A234-1234-1234", ev.Headers["ce-id"])
	assert.Equal(t, "application/json", ev.Headers["content-type"])

	again, err := Split(CloudEvents, got.header, got.body, Limits{})
	require.NoError(t, err)
	assert.Equal(t, ev.DedupID, again[0].DedupID, "a retry of the same event")
	other := sendWithSDK(t, context.Background(), sampleEvent(t, "A234-1234-1235"))
	evs, err = Split(CloudEvents, other.header, other.body, Limits{})
	require.NoError(t, err)
	assert.NotEqual(t, ev.DedupID, evs[0].DedupID, "another id is another event")
}

func TestCloudEventsStructuredModeFromTheSDK(t *testing.T) {
	e := sampleEvent(t, "B1")
	got := sendWithSDK(t, binding.WithForceStructured(context.Background()), e)
	require.Equal(t, ceStructured, got.header.Get("Content-Type"), "the SDK wrote structured mode")

	evs, err := Split(CloudEvents, got.header, got.body, Limits{})
	require.NoError(t, err)
	require.Len(t, evs, 1)
	ev := evs[0]
	assert.Equal(t, "com.github.pull_request.opened", ev.EventType)
	assert.Equal(t, time.Date(2018, 4, 5, 17, 31, 0, 0, time.UTC), ev.Time)
	assert.JSONEq(t, `{"number":123,"title":"Fix it"}`, string(ev.Payload), "structured mode stores the event's data")
	assert.Equal(t, map[string]string{"subject": "123 é/ü", "comexampleextension1": "value"}, ev.Labels)

	// The same event in binary and structured mode is the same event.
	bin := sendWithSDK(t, context.Background(), e)
	bevs, err := Split(CloudEvents, bin.header, bin.body, Limits{})
	require.NoError(t, err)
	assert.Equal(t, bevs[0].DedupID, ev.DedupID)

	// A structured event posted as plain application/json is still told apart.
	plain, err := Split(CloudEvents, header("Content-Type", "application/json"), got.body, Limits{})
	require.NoError(t, err)
	assert.Equal(t, ev.EventType, plain[0].EventType)
}

func TestCloudEventsBatch(t *testing.T) {
	a, b := sampleEvent(t, "1"), sampleEvent(t, "2")
	b.SetType("com.example.other")
	require.NoError(t, b.SetData("text/plain", "hello"))
	body, err := json.Marshal([]cloudevents.Event{a, b})
	require.NoError(t, err)
	evs, err := Split(CloudEvents, header("Content-Type", ceBatch+"; charset=utf-8"), body, Limits{})
	require.NoError(t, err)
	require.Len(t, evs, 2)
	assert.Equal(t, "com.github.pull_request.opened", evs[0].EventType)
	assert.Equal(t, "com.example.other", evs[1].EventType)
	assert.JSONEq(t, `{"data":"hello"}`, string(evs[1].Payload), "data that is not an object is wrapped")
	assert.NotEqual(t, evs[0].DedupID, evs[1].DedupID)

	_, err = Split(CloudEvents, header("Content-Type", ceBatch), []byte(`[{"specversion":"1.0","type":"a"},{"specversion":"1.0"}]`), Limits{})
	assert.EqualError(t, err, "cloudevents: batch[1]: the event has no type")
}

func TestCloudEventsRefused(t *testing.T) {
	_, err := Split(CloudEvents, header("Content-Type", "application/json"), []byte(`{"hello":"world"}`), Limits{})
	assert.ErrorContains(t, err, "cloudevents: the request is not a CloudEvent")
	_, err = Split(CloudEvents, header("Content-Type", ceStructured), []byte(`{"type":"x"}`), Limits{})
	assert.EqualError(t, err, "cloudevents: the event has no specversion")
	// Percent-encoded header values (the HTTP binding's rule for non-ASCII) are decoded.
	evs, err := Split(CloudEvents, header("Ce-Specversion", "1.0", "Ce-Type", "t", "Ce-Subject", "caf%C3%A9"), bytes.TrimSpace([]byte(` {} `)), Limits{})
	require.NoError(t, err)
	assert.Equal(t, "café", evs[0].Labels["subject"])
}

// Two senders that leave out source and both number their events from 1 must not lose
// each other's events as duplicates: without a source an id identifies nothing.
func TestCloudEventsWithoutSourceAreNotDeduplicated(t *testing.T) {
	body := []byte(`[{"specversion":"1.0","type":"a","id":"1"},{"specversion":"1.0","type":"b","id":"1"}]`)
	evs, err := Split(CloudEvents, header("Content-Type", ceBatch), body, Limits{})
	require.NoError(t, err)
	require.Len(t, evs, 2)
	assert.Empty(t, evs[0].DedupID)
	assert.Empty(t, evs[1].DedupID)
	h := header("Ce-Specversion", "1.0")
	h.Set("Ce-Type", "a")
	h.Set("Ce-Id", "1")
	bin, err := Split(CloudEvents, h, []byte(`{}`), Limits{})
	require.NoError(t, err)
	require.Len(t, bin, 1)
	assert.Empty(t, bin[0].DedupID, "binary mode without ce-source")
	h.Set("Ce-Source", "/a")
	bin, err = Split(CloudEvents, h, []byte(`{}`), Limits{})
	require.NoError(t, err)
	assert.NotEmpty(t, bin[0].DedupID, "with a source the id is the identity")
}
