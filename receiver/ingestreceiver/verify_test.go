package ingestreceiver

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/sourceverify"
)

const ghSecret = "it's a secret to everybody"

func verifiedSources() map[string]mirror.Source {
	gh := sourceverify.Config{Scheme: sourceverify.SchemeGitHub, Secret: ghSecret}.Stored()
	tok := sourceverify.Config{Scheme: sourceverify.SchemeURLToken, Secret: "tok_0123456789abcdef01"}.Stored()
	return map[string]mirror.Source{
		"in_gh":    {ID: "src_gh", ProjectID: "p1", Name: "github", Connector: "webhook", Preset: "github", Verification: &gh},
		"in_tok":   {ID: "src_tok", ProjectID: "p1", Name: "simple", Connector: "webhook", Verification: &tok},
		"in_plain": {ID: "src_plain", ProjectID: "p1", Name: "plain", Connector: "webhook"},
		"in_am":    {ID: "src_am", ProjectID: "p1", Name: "am", Connector: "webhook", Preset: "alertmanager"},
	}
}

func githubSig(body string) string {
	m := hmac.New(sha256.New, []byte(ghSecret))
	m.Write([]byte(body))
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// A source with a verification stores what its sender signed, and nothing else: the body
// is checked before it is read, and a refusal names what to fix.
func TestPushVerification(t *testing.T) {
	tr := startTestReceiver(t, nil, &fakeAuth{sources: verifiedSources()})
	body := `{"action":"opened","pull_request":{"number":7,"title":"Fix"},"repository":{"full_name":"o/r"}}`
	gh := func(b, sig string) answer {
		return do(t, http.MethodPost, tr.url+"/ingest/in_gh", []byte(b), map[string]string{
			"X-GitHub-Event": "pull_request", "X-GitHub-Delivery": "d-1", "X-Hub-Signature-256": sig})
	}
	a := gh(body, githubSig(body))
	require.Equal(t, http.StatusAccepted, a.status, "%s", a.body)
	assert.JSONEq(t, `{"accepted":1}`, string(a.body))

	for name, c := range map[string]struct{ body, sig string }{
		"one byte changed": {body[:len(body)-2] + `x}`, githubSig(body)},
		"no signature":     {body, ""},
		"other secret":     {body, "sha256=" + hex.EncodeToString(make([]byte, 32))},
	} {
		a := gh(c.body, c.sig)
		assert.Equal(t, http.StatusUnauthorized, a.status, "%s: %s", name, a.body)
		assert.Equal(t, "signature_invalid", a.code(t), name)
		assert.Contains(t, string(a.body), "X-Hub-Signature-256", name)
	}
	got := tr.consumed()
	require.Len(t, got, 1, "refused requests store nothing")
	var rec struct {
		EventType string          `json:"_event_type"`
		Payload   json.RawMessage `json:"payload"`
	}
	require.NoError(t, json.Unmarshal([]byte(got[0].recs[0]), &rec))
	assert.Equal(t, "pull_request.opened", rec.EventType)
	assert.JSONEq(t, body, string(rec.Payload))
	assert.Equal(t, []string{"src:src_gh:d-1"}, got[0].info.RecordIDs, "the delivery id is the message id")
	assert.Equal(t, "src_gh", got[0].info.SourceID)
}

func TestPushURLToken(t *testing.T) {
	tr := startTestReceiver(t, nil, &fakeAuth{sources: verifiedSources()})
	for name, c := range map[string]struct {
		path   string
		status int
		code   string
	}{
		"the whole URL":             {"/ingest/in_tok/tok_0123456789abcdef01", 202, ""},
		"without the token":         {"/ingest/in_tok", 401, "signature_invalid"},
		"another token":             {"/ingest/in_tok/tok_0123456789abcdef02", 401, "signature_invalid"},
		"an empty token":            {"/ingest/in_tok/", 404, "not_found"},
		"below the token":           {"/ingest/in_tok/tok_0123456789abcdef01/x", 404, "not_found"},
		"a source without a token":  {"/ingest/in_plain/tok_0123456789abcdef01", 404, "not_found"},
		"a source without, no path": {"/ingest/in_plain", 202, ""},
	} {
		a := do(t, http.MethodPost, tr.url+c.path, []byte(`{"n":1}`), nil)
		assert.Equal(t, c.status, a.status, "%s: %s", name, a.body)
		if c.code != "" {
			assert.Equal(t, c.code, a.code(t), name)
		}
	}
	assert.Len(t, tr.consumed(), 2)
}

// An Alertmanager notification is one record per alert, each with its own message id, so
// a repeat of the notification is stored once and the resolve is new.
func TestPushAlertmanagerPreset(t *testing.T) {
	tr := startTestReceiver(t, nil, &fakeAuth{sources: verifiedSources()})
	body := `{"version":"4","groupKey":"{}:{alertname=\"X\"}","status":"firing","receiver":"svc","groupLabels":{},"commonLabels":{},"commonAnnotations":{},"externalURL":"http://am",
	"alerts":[{"status":"firing","labels":{"alertname":"X","i":"1"},"annotations":{"summary":"one"},"startsAt":"2024-05-01T12:00:00Z","endsAt":"0001-01-01T00:00:00Z","fingerprint":"f1"},
	          {"status":"firing","labels":{"alertname":"X","i":"2"},"annotations":{},"startsAt":"2024-05-01T12:00:00Z","endsAt":"0001-01-01T00:00:00Z","fingerprint":"f2"}]}`
	a := do(t, http.MethodPost, tr.url+"/ingest/in_am", []byte(body), nil)
	require.Equal(t, http.StatusAccepted, a.status, "%s", a.body)
	assert.JSONEq(t, `{"accepted":2}`, string(a.body))
	got := tr.consumed()
	require.Len(t, got, 1)
	require.Len(t, got[0].recs, 2)
	require.Len(t, got[0].info.RecordIDs, 2)
	assert.NotEqual(t, got[0].info.RecordIDs[0], got[0].info.RecordIDs[1])
	for i, rec := range got[0].recs {
		var r struct {
			EventType string `json:"_event_type"`
			Timestamp string `json:"timestamp"`
		}
		require.NoError(t, json.Unmarshal([]byte(rec), &r))
		assert.Equal(t, "alert.firing", r.EventType)
		assert.Equal(t, "2024-05-01T12:00:00.000000000Z", r.Timestamp)
		assert.Regexp(t, `^src:src_am:`, got[0].info.RecordIDs[i])
	}

	a = do(t, http.MethodPost, tr.url+"/ingest/in_am", []byte(`{"alerts":"no"}`), nil)
	assert.Equal(t, http.StatusBadRequest, a.status, "%s", a.body)
	assert.Equal(t, "invalid_body", a.code(t))
	assert.Len(t, tr.consumed(), 1)
}

// CloudEvents on /v1/events: the event's type and source become the record's fields, its
// data the record, its source and id the message id; in structured, batched and binary
// mode alike.
func TestEventsCloudEvents(t *testing.T) {
	tr := startTestReceiver(t, nil, &fakeAuth{})
	key := map[string]string{"X-API-Key": "key-p1"}
	with := func(h map[string]string) map[string]string {
		out := map[string]string{"X-API-Key": "key-p1"}
		for k, v := range h {
			out[k] = v
		}
		return out
	}
	structured := `{"specversion":"1.0","type":"com.example.order","source":"/shop","id":"o-1","time":"2024-05-01T12:00:00Z","data":{"total":3}}`
	a := do(t, http.MethodPost, tr.url+"/v1/events", []byte(structured), with(map[string]string{"Content-Type": "application/cloudevents+json; charset=utf-8"}))
	require.Equal(t, http.StatusAccepted, a.status, "%s", a.body)
	a = do(t, http.MethodPost, tr.url+"/v1/events", []byte(`[`+structured+`,{"specversion":"1.0","type":"t2","source":"/s","id":"2","data":"text"}]`),
		with(map[string]string{"Content-Type": "application/cloudevents-batch+json"}))
	require.Equal(t, http.StatusAccepted, a.status, "%s", a.body)
	assert.JSONEq(t, `{"accepted":2}`, string(a.body))
	a = do(t, http.MethodPost, tr.url+"/v1/events", []byte(`plain text`), with(map[string]string{"Content-Type": "text/plain",
		"Ce-Specversion": "1.0", "Ce-Type": "com.example.ping", "Ce-Source": "/pinger", "Ce-Id": "p-1", "X-Event-Type": "ignored"}))
	require.Equal(t, http.StatusAccepted, a.status, "%s", a.body)
	// Not a CloudEvent: as before.
	a = do(t, http.MethodPost, tr.url+"/v1/events", []byte(`{"specversion":"1.0"}`), key)
	require.Equal(t, http.StatusAccepted, a.status, "%s", a.body)
	// A structured event without a type is refused whole.
	a = do(t, http.MethodPost, tr.url+"/v1/events", []byte(`{"specversion":"1.0","id":"x"}`), with(map[string]string{"Content-Type": "application/cloudevents+json"}))
	assert.Equal(t, http.StatusBadRequest, a.status, "%s", a.body)
	assert.Equal(t, "invalid_body", a.code(t))

	got := tr.consumed()
	require.Len(t, got, 4)
	assert.JSONEq(t, `{"total":3,"_event_type":"com.example.order","_source":"/shop","_time":"2024-05-01T12:00:00Z"}`, got[0].recs[0])
	assert.Regexp(t, `^ce:sha256:[0-9a-f]{64}$`, got[0].info.RecordIDs[0])
	assert.Equal(t, got[0].info.RecordIDs[0], got[1].info.RecordIDs[0], "the same event is the same message id in a batch")
	assert.JSONEq(t, `{"data":"text","_event_type":"t2","_source":"/s"}`, got[1].recs[1])
	assert.JSONEq(t, `{"data":"plain text","_event_type":"com.example.ping","_source":"/pinger"}`, got[2].recs[0])
	assert.Equal(t, `{"specversion":"1.0"}`, got[3].recs[0])
	assert.Nil(t, got[3].info.RecordIDs)
}
