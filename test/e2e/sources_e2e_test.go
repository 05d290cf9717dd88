package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/apikey"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// pushSource is a push source published into the mirror as the control plane does: the
// source under its ingest key, and its ingest-scoped API key.
type pushSource struct {
	mirror.Source
	IngestKey string // in the URL
	APIKey    string // osi_..., sent as Authorization: Bearer
}

func (s pushSource) url(base string) string { return base + "/ingest/" + s.IngestKey }

func newIngestKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "in_" + hex.EncodeToString(b[:])
}

// source publishes src (ID and ProjectID set) with a new ingest key and ingest-scoped key,
// and waits until the receiver knows both: an empty array is then answered 400 (nothing
// is stored) instead of 404 or 401.
func (e *env) source(t *testing.T, src mirror.Source, wait map[string]string) pushSource {
	t.Helper()
	ps := pushSource{Source: src, IngestKey: newIngestKey(), APIKey: apikey.Generate(apikey.KindIngest)}
	ctx := context.Background()
	require.NoError(t, e.m.PutKey(ctx, apikey.Hash(ps.APIKey), mirror.KeyEntry{KeyID: "k-" + src.ID, ProjectID: src.ProjectID, Scope: mirror.ScopeIngest, SourceID: src.ID}))
	require.NoError(t, e.m.PutSource(ctx, ps.IngestKey, src))
	if wait == nil {
		wait = map[string]string{"Authorization": "Bearer " + ps.APIKey}
	}
	require.Eventually(t, func() bool {
		return post(t, ps.url(e.col.HTTP), "", "application/json", []byte(`[]`), wait).StatusCode == http.StatusBadRequest
	}, 10*time.Second, 20*time.Millisecond, "source never known to the receiver")
	return ps
}

func bearer(key string) map[string]string { return map[string]string{"Authorization": "Bearer " + key} }

type envelopeRecord struct {
	EventType string            `json:"_event_type"`
	Source    string            `json:"_source"`
	Timestamp string            `json:"timestamp"`
	Text      string            `json:"text"`
	Labels    map[string]string `json:"labels"`
	Payload   json.RawMessage   `json:"payload"`
}

func githubSource(project string) mirror.Source {
	return mirror.Source{
		ID: "src_" + project, ProjectID: project, Name: "github", Connector: "webhook",
		EventTypeField: "action", TextTemplate: "{repo.name}: {action}", EventTimeField: "created_at",
		Labels: map[string]string{"repo": "repo.name"},
	}
}

func TestSourcePushStoresOneEnvelopePerObject(t *testing.T) {
	e := startReceiver(t, nil)
	e.project(t, "push")
	src := e.source(t, githubSource("push"), nil)

	one := `{"action":"opened","created_at":"2024-05-01T12:00:00.5Z","repo":{"name":"acme/api"},"amount":1.50}`
	list := []string{
		`{"action":"closed","created_at":"2024-05-01T14:00:00+02:00","repo":{"name":"acme/web"}}`,
		`{"created_at":"2024-05-01T12:00:02Z","repo":{"name":"acme/db"},"big":12345678901234567890}`,
		`{ "action" : "reopened", "repo": {"name": "acme/api"}, "created_at": "2024-05-01T12:00:03Z" }`,
	}
	lines := []string{
		`{"action":"synchronize","created_at":"2024-05-01T12:00:04Z","repo":{"name":"acme/x"}}`,
		`{"action":"labeled","created_at":"2024-05-01T12:00:05Z","repo":{"name":"acme/y"},"label":"bug"}`,
		`{"action":"edited","repo":{"name":"acme/z"}}`,
	}
	pretty := "{\n  \"action\": \"deleted\",\n  \"repo\": {\"name\": \"acme/old\"},\n  \"created_at\": \"2024-05-01T12:00:07Z\"\n}"

	before := time.Now().UTC()
	for _, c := range []struct {
		contentType, body string
		n                 int
	}{
		{"application/json", one, 1},
		{"application/json", "[" + strings.Join(list, ",\n ") + "]", 3},
		// Several lines of objects are NDJSON, even when sent as application/json.
		{"application/json", strings.Join(lines, "\n") + "\n", 3},
		// One object over several lines is one object, even when sent as NDJSON.
		{"application/x-ndjson", pretty, 1},
	} {
		r := post(t, src.url(e.col.HTTP), "", c.contentType, []byte(c.body), bearer(src.APIKey))
		require.Equal(t, http.StatusAccepted, r.StatusCode, "%s", r.Body)
		assert.JSONEq(t, `{"accepted": `+itoa(c.n)+`}`, string(r.Body))
	}
	after := time.Now().UTC()

	msgs := stored(t, e.js, "push")
	require.Len(t, msgs, 8)
	sent := append(append(append([]string{one}, list...), lines...), pretty)
	want := []struct{ typ, ts, text, repo string }{
		{"opened", "2024-05-01T12:00:00.500000000Z", "acme/api: opened", "acme/api"},
		{"closed", "2024-05-01T12:00:00.000000000Z", "acme/web: closed", "acme/web"},
		{"webhook_event", "2024-05-01T12:00:02.000000000Z", "acme/db: ", "acme/db"}, // no action: the source's event type
		{"reopened", "2024-05-01T12:00:03.000000000Z", "acme/api: reopened", "acme/api"},
		{"synchronize", "2024-05-01T12:00:04.000000000Z", "acme/x: synchronize", "acme/x"},
		{"labeled", "2024-05-01T12:00:05.000000000Z", "acme/y: labeled", "acme/y"},
		{"edited", "", "acme/z: edited", "acme/z"}, // no created_at: the time received
		{"deleted", "2024-05-01T12:00:07.000000000Z", "acme/old: deleted", "acme/old"},
	}
	for i, m := range msgs {
		assert.Equal(t, "source", m.Header.Get(streams.HeaderSignal), "record %d", i)
		assert.Equal(t, src.ID, m.Header.Get(streams.HeaderSourceID), "record %d", i)
		var rec envelopeRecord
		require.NoError(t, json.Unmarshal(m.Data, &rec), "%s", m.Data)
		assert.Equal(t, sent[i], string(rec.Payload), "record %d: the payload byte for byte", i)
		assert.Equal(t, want[i].typ, rec.EventType, "record %d", i)
		assert.Equal(t, "github", rec.Source, "record %d", i)
		assert.Equal(t, want[i].text, rec.Text, "record %d", i)
		assert.Equal(t, map[string]string{"repo": want[i].repo}, rec.Labels, "record %d", i)
		if want[i].ts != "" {
			assert.Equal(t, want[i].ts, rec.Timestamp, "record %d", i)
		} else {
			ts, err := time.Parse(time.RFC3339Nano, rec.Timestamp)
			require.NoError(t, err)
			assert.False(t, ts.Before(before.Truncate(time.Microsecond)) || ts.After(after), "record %d: %s not the time received", i, rec.Timestamp)
		}
		assert.True(t, bytes.HasPrefix(m.Data, []byte(`{"_event_type":`)), "the contract's envelope: %s", m.Data)
	}
}

func TestSourceEventTypeDefaultsAndSourceEventType(t *testing.T) {
	e := startReceiver(t, nil)
	e.project(t, "types")
	named := githubSource("types")
	named.ID, named.EventType = "src_named", "github.event"
	plain := mirror.Source{ID: "src_plain", ProjectID: "types", Name: "plain", Connector: "webhook"}
	a := e.source(t, named, nil)
	b := e.source(t, plain, nil)
	require.Equal(t, http.StatusAccepted, post(t, a.url(e.col.HTTP), "", "application/json", []byte(`{"x":1}`), bearer(a.APIKey)).StatusCode)
	require.Equal(t, http.StatusAccepted, post(t, b.url(e.col.HTTP), "", "application/json", []byte(`{"action":"opened"}`), bearer(b.APIKey)).StatusCode)
	msgs := stored(t, e.js, "types")
	require.Len(t, msgs, 2)
	var ra, rb envelopeRecord
	require.NoError(t, json.Unmarshal(msgs[0].Data, &ra))
	require.NoError(t, json.Unmarshal(msgs[1].Data, &rb))
	assert.Equal(t, "github.event", ra.EventType, "a missing event_type_field value falls back to the source's event_type")
	assert.Equal(t, "webhook_event", rb.EventType, "no event_type: webhook_event")
	assert.Equal(t, "plain", rb.Source)
	assert.Equal(t, "", rb.Text)
	assert.Empty(t, rb.Labels)
	assert.Equal(t, "src_plain", msgs[1].Header.Get(streams.HeaderSourceID))
}

func TestSourcePushAuthWithIngestKey(t *testing.T) {
	e := startReceiver(t, nil)
	projectKey := e.project(t, "authk")
	src := e.source(t, githubSource("authk"), nil)
	other := githubSource("authk")
	other.ID = "src_other"
	otherSrc := e.source(t, other, nil)
	url := src.url(e.col.HTTP)
	body := []byte(`{"action":"opened"}`)

	for name, c := range map[string]struct {
		url     string
		headers map[string]string
		status  int
		code    string
	}{
		"no credentials":               {url, nil, 401, "missing_api_key"},
		"project key as Bearer":        {url, bearer(projectKey), 401, "invalid_api_key"},
		"project key as X-API-Key":     {url, map[string]string{"X-API-Key": projectKey}, 401, "missing_api_key"},
		"another source's ingest key":  {url, bearer(otherSrc.APIKey), 401, "invalid_api_key"},
		"unknown key":                  {url, bearer(apikey.Generate(apikey.KindIngest)), 401, "invalid_api_key"},
		"service token, none is set":   {url, map[string]string{"X-Service-Token": "0123456789abcdef0123"}, 401, "invalid_token"},
		"unknown ingest URL":           {e.col.HTTP + "/ingest/" + newIngestKey(), bearer(src.APIKey), 404, "not_found"},
		"ingest URL without a key":     {e.col.HTTP + "/ingest/", bearer(src.APIKey), 404, "not_found"},
		"ingest key on /v1/events":     {e.col.HTTP + "/v1/events", bearer(src.APIKey), 401, "invalid_api_key"},
		"ingest key as events API key": {e.col.HTTP + "/v1/events", map[string]string{"X-API-Key": src.APIKey}, 401, "invalid_api_key"},
	} {
		r := post(t, c.url, "", "application/json", body, c.headers)
		assert.Equal(t, c.status, r.StatusCode, "%s: %s", name, r.Body)
		assert.Equal(t, c.code, errorCode(t, r), name)
	}
	assert.Empty(t, stored(t, e.js, "authk"), "refused requests store nothing")

	r := post(t, url, "", "application/json", body, bearer(src.APIKey))
	require.Equal(t, http.StatusAccepted, r.StatusCode, "%s", r.Body)
	r = post(t, otherSrc.url(e.col.HTTP), "", "application/json", body, bearer(otherSrc.APIKey))
	require.Equal(t, http.StatusAccepted, r.StatusCode, "%s", r.Body)
	msgs := stored(t, e.js, "authk")
	require.Len(t, msgs, 2)
	assert.Equal(t, src.ID, msgs[0].Header.Get(streams.HeaderSourceID))
	assert.Equal(t, otherSrc.ID, msgs[1].Header.Get(streams.HeaderSourceID))

	// Deleting the source's key (as deleting the source does) stops it within a second.
	require.NoError(t, e.m.DeleteKey(context.Background(), apikey.Hash(src.APIKey)))
	require.Eventually(t, func() bool {
		return post(t, url, "", "application/json", []byte(`[]`), bearer(src.APIKey)).StatusCode == http.StatusUnauthorized
	}, time.Second, 10*time.Millisecond)
}

func TestSourcePushAuthWithServiceToken(t *testing.T) {
	const token = "svc-token-0123456789abcdef"
	e := startReceiver(t, map[string]string{"SERVICE_INGEST_TOKEN": token})
	e.project(t, "auths")
	src := e.source(t, githubSource("auths"), map[string]string{"X-Service-Token": token})
	url := src.url(e.col.HTTP)
	body := []byte(`{"action":"opened"}`)
	for name, c := range map[string]struct {
		headers map[string]string
		status  int
		code    string
	}{
		"X-Service-Token":       {map[string]string{"X-Service-Token": token}, 202, ""},
		"Bearer service token":  {bearer(token), 202, ""},
		"ingest key still":      {bearer(src.APIKey), 202, ""},
		"wrong X-Service-Token": {map[string]string{"X-Service-Token": token + "x"}, 401, "invalid_token"},
		"wrong Bearer":          {bearer(token[:20]), 401, "invalid_api_key"},
		"none":                  {nil, 401, "missing_api_key"},
	} {
		r := post(t, url, "", "application/json", body, c.headers)
		assert.Equal(t, c.status, r.StatusCode, "%s: %s", name, r.Body)
		if c.code != "" {
			assert.Equal(t, c.code, errorCode(t, r), name)
		}
	}
	assert.Len(t, stored(t, e.js, "auths"), 3)
	assert.NotContains(t, e.col.Log(), token, "the token is never logged")
}

func TestSourcePushAuthOff(t *testing.T) {
	e := startReceiver(t, map[string]string{"SVC_INGEST_AUTH": "off"})
	e.project(t, "autho")
	src := e.source(t, githubSource("autho"), map[string]string{})
	r := post(t, src.url(e.col.HTTP), "", "application/json", []byte(`{"action":"opened"}`), nil)
	require.Equal(t, http.StatusAccepted, r.StatusCode, "%s", r.Body)
	r = post(t, e.col.HTTP+"/ingest/"+newIngestKey(), "", "application/json", []byte(`{"action":"opened"}`), nil)
	assert.Equal(t, http.StatusNotFound, r.StatusCode, "the ingest URL itself stays a secret")
	assert.Len(t, stored(t, e.js, "autho"), 1)
	assert.Contains(t, e.col.Log(), "push-ingest authentication is OFF")
}

func TestSourcePushRefusesBadBodiesAndStoresNothing(t *testing.T) {
	e := startReceiver(t, map[string]string{"SVC_MAX_BODY_BYTES": "2048"})
	e.project(t, "badpush")
	src := e.source(t, githubSource("badpush"), nil)
	url := src.url(e.col.HTTP)
	for name, c := range map[string]struct {
		contentType, body string
		status            int
		code, mention     string
	}{
		"too large":           {"application/json", `{"pad":"` + strings.Repeat("x", 4096) + `"}`, 413, "payload_too_large", ""},
		"not JSON":            {"application/json", `hello`, 400, "invalid_json", ""},
		"array with a number": {"application/json", `[{"a":1}, 2, {"b":3}]`, 400, "invalid_body", "element 1"},
		"NDJSON bad line":     {"application/x-ndjson", "{\"a\":1}\n{\"b\":2}\n{\"c\":\n", 400, "invalid_json", "element 2"},
		"NDJSON as JSON":      {"application/json", "{\"a\":1}\n[1]\n", 400, "invalid_body", "element 1"},
		"a string":            {"application/json", `"x"`, 400, "invalid_body", ""},
		"empty array":         {"application/json", `[]`, 400, "invalid_body", ""},
		"form encoded":        {"application/x-www-form-urlencoded", `payload=%7B%7D`, 400, "invalid_json", "application/json"},
	} {
		r := post(t, url, "", c.contentType, []byte(c.body), bearer(src.APIKey))
		assert.Equal(t, c.status, r.StatusCode, "%s: %s", name, r.Body)
		assert.Equal(t, c.code, errorCode(t, r), name)
		assert.Contains(t, string(r.Body), c.mention, name)
	}
	r := post(t, url, "", "application/json", nil, bearer(src.APIKey))
	assert.Equal(t, http.StatusBadRequest, r.StatusCode)
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
	assert.Empty(t, stored(t, e.js, "badpush"))
}

func TestSourcePushAnswers503UntilTheMirrorLoads(t *testing.T) {
	n := testenv.StartNATS(t)
	n.Stop() // the collector starts while NATS is down
	col := testenv.StartCollector(t, testenv.CollectorOptions{Config: "configs/receiver.yaml",
		Env: map[string]string{"NATS_URL": n.URL(), "SVC_STREAM_REPLICAS": "1"}, StartsUnhealthy: true})
	ingestKey := newIngestKey()
	r := post(t, col.HTTP+"/ingest/"+ingestKey, "", "application/json", []byte(`{"a":1}`), nil)
	require.Equal(t, http.StatusServiceUnavailable, r.StatusCode, "%s", r.Body)
	assert.Equal(t, "unavailable", errorCode(t, r))
	assert.NotEmpty(t, r.Header.Get("Retry-After"))

	n.Start(t)
	js, m := connectMirror(t, n.URL())
	e := &env{nats: n, col: col, js: js, m: m}
	e.project(t, "late")
	src := e.source(t, githubSource("late"), nil)
	// The mirror has the source now, but each of the collector's NATS connections
	// reconnects on its own schedule: until the exporter's has, a push is refused with 503
	// and Retry-After (the client retries), never accepted and lost or refused otherwise.
	require.Eventually(t, func() bool {
		r = post(t, src.url(col.HTTP), "", "application/json", []byte(`{"a":1}`), bearer(src.APIKey))
		if r.StatusCode != http.StatusAccepted {
			assert.Equal(t, http.StatusServiceUnavailable, r.StatusCode, "%s", r.Body)
			assert.NotEmpty(t, r.Header.Get("Retry-After"))
		}
		return r.StatusCode == http.StatusAccepted
	}, 20*time.Second, 100*time.Millisecond, "the push was not accepted once NATS and the mirror were back")
}

func TestSourceRecordsTriggerTheAgent(t *testing.T) {
	e := startEmbedded(t, nil)
	agent := startAgent(t)
	e.pipelineProject(t, "pushpipe", mirror.Pipeline{
		Trigger:          `signal == "source" and event["payload"]["action"] == "opened" and event["labels"]["repo"] == "acme/api"`,
		AgentEndpointURL: agent.URL,
	})
	src := e.source(t, githubSource("pushpipe"), nil)
	body := `[{"action":"closed","repo":{"name":"acme/api"}},{"action":"opened","repo":{"name":"acme/api"},"n":1.50},{"action":"opened","repo":{"name":"acme/web"}}]`
	r := post(t, src.url(e.col.HTTP), "", "application/json", []byte(body), bearer(src.APIKey))
	require.Equal(t, http.StatusAccepted, r.StatusCode, "%s", r.Body)
	pipelineSettled(t, e.js, "pushpipe") // a wrong second match would have been delivered by now
	var got []string
	for _, b := range batchRecords(t, agent.delivered()) {
		for _, rec := range b {
			got = append(got, string(rec))
		}
	}
	msgs := stored(t, e.js, "pushpipe")
	require.Len(t, msgs, 3)
	assert.Equal(t, []string{string(msgs[1].Data)}, got, "the matching envelope reaches the agent as stored")
	assert.Contains(t, got[0], `"payload":{"action":"opened","repo":{"name":"acme/api"},"n":1.50}`)
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

func TestSourcePushIdempotencyKeyStoresARetryOnce(t *testing.T) {
	e := startReceiver(t, nil)
	e.project(t, "idem")
	src := e.source(t, githubSource("idem"), nil)
	h := map[string]string{"Authorization": "Bearer " + src.APIKey, "Idempotency-Key": "delivery-72d3162e"}
	for i := 0; i < 2; i++ {
		r := post(t, src.url(e.col.HTTP), "", "application/json", []byte(`[{"action":"a"},{"action":"b"}]`), h)
		require.Equal(t, http.StatusAccepted, r.StatusCode, "%s", r.Body)
	}
	msgs := stored(t, e.js, "idem")
	require.Len(t, msgs, 2, "the retried delivery is stored once")
	assert.Equal(t, "src:"+src.ID+":delivery-72d3162e:1", msgs[1].Header.Get(streams.HeaderMsgID))
	assert.Equal(t, src.ID, msgs[1].Header.Get(streams.HeaderSourceID))
	assert.Equal(t, "source", msgs[1].Header.Get(streams.HeaderSignal))
}

// Two sources of one project that number their deliveries alike (many senders start at
// 1) share the project's stream and its duplicate window, but not their keys.
func TestSourcePushIdempotencyKeysOfTwoSourcesDoNotCollide(t *testing.T) {
	e := startReceiver(t, nil)
	key := e.project(t, "idem2")
	a := e.source(t, githubSource("idem2"), nil)
	other := githubSource("idem2")
	other.ID, other.Name = "src_idem2_b", "stripe"
	b := e.source(t, other, nil)
	for _, s := range []pushSource{a, b, a} {
		r := post(t, s.url(e.col.HTTP), "", "application/json", []byte(`{"action":"opened"}`),
			map[string]string{"Authorization": "Bearer " + s.APIKey, "Idempotency-Key": "1"})
		require.Equal(t, http.StatusAccepted, r.StatusCode, "%s", r.Body)
	}
	// The events API keeps the bare key as the message id (docs/contract.md#section-4).
	r := post(t, e.col.HTTP+"/v1/events", key, "application/json", []byte(`{"n":1}`), map[string]string{"Idempotency-Key": "1"})
	require.Equal(t, http.StatusAccepted, r.StatusCode, "%s", r.Body)
	msgs := stored(t, e.js, "idem2")
	require.Len(t, msgs, 3, "one record per source, the retry of the first source dropped, and the event")
	assert.Equal(t, a.ID, msgs[0].Header.Get(streams.HeaderSourceID))
	assert.Equal(t, b.ID, msgs[1].Header.Get(streams.HeaderSourceID))
	assert.Equal(t, "1", msgs[2].Header.Get(streams.HeaderMsgID))
}
