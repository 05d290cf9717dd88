package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/otelcol-svc/otelcol-svc/internal/apikey"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/sourceverify"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// Push sources that check their senders themselves (signatures, basic auth, a token in
// the URL) and read well-known senders' bodies (presets), against a collector process,
// with the senders' own signing libraries.

// verifiedSource publishes src as the control plane does (its verification in the
// Stored() form) and waits until the receiver knows it: its ingest key, which needs no
// verification, is then answered 400 or 202 for an empty array instead of 404.
func (e *env) verifiedSource(t *testing.T, src mirror.Source) pushSource {
	t.Helper()
	ps := e.sourceNoWait(t, src)
	require.Eventually(t, func() bool {
		c := post(t, ps.url(e.col.HTTP), "", "application/json", []byte(`[]`), bearer(ps.APIKey)).StatusCode
		return c == http.StatusBadRequest || c == http.StatusAccepted
	}, 10*time.Second, 20*time.Millisecond, "source never known to the receiver")
	return ps
}

// sourceNoWait publishes src with a new ingest key and ingest-scoped key, as e.source
// does, whose wait needs a 400 for [] that a preset may answer 202 (no events).
func (e *env) sourceNoWait(t *testing.T, src mirror.Source) pushSource {
	t.Helper()
	ps := pushSource{Source: src, IngestKey: newIngestKey(), APIKey: apikey.Generate(apikey.KindIngest)}
	ctx := context.Background()
	require.NoError(t, e.m.PutKey(ctx, apikey.Hash(ps.APIKey), mirror.KeyEntry{KeyID: "k-" + src.ID, ProjectID: src.ProjectID, Scope: mirror.ScopeIngest, SourceID: src.ID}))
	require.NoError(t, e.m.PutSource(ctx, ps.IngestKey, src))
	return ps
}

func verification(c sourceverify.Config) *sourceverify.Config {
	s := c.Stored()
	return &s
}

// msgIDs returns the Nats-Msg-Id of each message.
func msgIDs(msgs []*jetstream.RawStreamMsg) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.Header.Get(streams.HeaderMsgID)
	}
	return out
}

// signGitHub signs bodies with octokit's @octokit/webhooks-methods, the signer GitHub's
// own SDK uses (internal/sourceverify/testdata/signers). Skipped without node or the
// installed packages, except under CI=true.
func signGitHub(t *testing.T, secret string, bodies ...string) []string {
	t.Helper()
	dir := filepath.Join(testenv.RepoRoot(), "internal", "sourceverify", "testdata", "signers")
	node, err := exec.LookPath("node")
	_, serr := os.Stat(filepath.Join(dir, "node_modules", "@octokit", "webhooks-methods"))
	if err != nil || serr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("signing with octokit needs node and `make signers` (CI=true: not skipped)")
		}
		t.Skip("skipping: signing with octokit needs node and node_modules (cd internal/sourceverify/testdata/signers && npm ci)")
	}
	var reqs []map[string]any
	for _, b := range bodies {
		reqs = append(reqs, map[string]any{"scheme": "github", "secret": secret, "body": b})
	}
	in, err := json.Marshal(reqs)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "sign.mjs")
	cmd.Dir = dir
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "node sign.mjs: %s", stderr.String())
	var hs []map[string]string
	require.NoError(t, json.Unmarshal(out, &hs))
	sigs := make([]string, len(hs))
	for i, h := range hs {
		sigs[i] = h["X-Hub-Signature-256"]
		require.NotEmpty(t, sigs[i])
	}
	return sigs
}

func TestSourcesVerified(t *testing.T) {
	e := startReceiver(t, nil)

	t.Run("github", func(t *testing.T) {
		e.project(t, "ghv")
		secret := sourceverify.NewSecret(sourceverify.SchemeGitHub)
		src := e.verifiedSource(t, mirror.Source{ID: "src_ghv", ProjectID: "ghv", Name: "github", Connector: "webhook", Preset: "github",
			Verification: verification(sourceverify.Config{Scheme: sourceverify.SchemeGitHub, Secret: secret})})
		body := `{"action":"opened","issue":{"number":12,"title":"Crash on start","created_at":"2024-05-01T12:00:00Z"},"repository":{"full_name":"acme/api"},"sender":{"login":"octocat"}}`
		sig := signGitHub(t, secret, body)[0]
		gh := func(b string) response {
			return post(t, src.url(e.col.HTTP), "", "application/json", []byte(b), map[string]string{
				"X-GitHub-Event": "issues", "X-GitHub-Delivery": "72d3162e-cc78-11e3-81ab-4c9367dc0958",
				"X-Hub-Signature-256": sig, "User-Agent": "GitHub-Hookshot/044aadd"})
		}
		r := gh(body)
		require.Equal(t, http.StatusAccepted, r.StatusCode, "%s", r.Body)
		msgs := stored(t, e.js, "ghv")
		require.Len(t, msgs, 1)
		var rec envelopeRecord
		require.NoError(t, json.Unmarshal(msgs[0].Data, &rec))
		assert.Equal(t, "issues.opened", rec.EventType)
		assert.JSONEq(t, body, string(rec.Payload))
		assert.Equal(t, "src:src_ghv:72d3162e-cc78-11e3-81ab-4c9367dc0958", msgs[0].Header.Get(streams.HeaderMsgID))

		// One byte changed: refused, nothing stored.
		tampered := strings.Replace(body, `"number":12`, `"number":13`, 1)
		r = gh(tampered)
		assert.Equal(t, http.StatusUnauthorized, r.StatusCode, "%s", r.Body)
		assert.Equal(t, "signature_invalid", errorCode(t, r))
		assert.Len(t, stored(t, e.js, "ghv"), 1)

		// GitHub's redelivery of the same delivery: accepted, stored once.
		r = gh(body)
		require.Equal(t, http.StatusAccepted, r.StatusCode, "%s", r.Body)
		assert.Len(t, stored(t, e.js, "ghv"), 1)

		// The source's ingest key still opens it, for an operator with curl.
		r = post(t, src.url(e.col.HTTP), "", "application/json", []byte(body), map[string]string{
			"Authorization": "Bearer " + src.APIKey, "X-GitHub-Event": "issues", "X-GitHub-Delivery": "manual-1"})
		require.Equal(t, http.StatusAccepted, r.StatusCode, "%s", r.Body)
		assert.Len(t, stored(t, e.js, "ghv"), 2)
	})

	t.Run("stripe", func(t *testing.T) {
		e.project(t, "stv")
		secret := "whsec_" + sourceverify.NewSecret(sourceverify.SchemeGitHub)
		src := e.verifiedSource(t, mirror.Source{ID: "src_stv", ProjectID: "stv", Name: "stripe", Connector: "webhook", Preset: "stripe",
			Verification: verification(sourceverify.Config{Scheme: sourceverify.SchemeStripe, Secret: secret})})
		body := []byte(`{"id":"evt_1PJ","object":"event","type":"invoice.paid","created":1714564800,"data":{"object":{"id":"in_1","amount_paid":4200}}}`)
		send := func(ts time.Time) response {
			signed := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: secret, Timestamp: ts})
			return post(t, src.url(e.col.HTTP), "", "application/json; charset=utf-8", body, map[string]string{"Stripe-Signature": signed.Header})
		}
		r := send(time.Now())
		require.Equal(t, http.StatusAccepted, r.StatusCode, "%s", r.Body)
		msgs := stored(t, e.js, "stv")
		require.Len(t, msgs, 1)
		var rec envelopeRecord
		require.NoError(t, json.Unmarshal(msgs[0].Data, &rec))
		assert.Equal(t, "invoice.paid", rec.EventType)
		assert.Equal(t, "2024-05-01T12:00:00.000000000Z", rec.Timestamp)
		assert.Equal(t, "src:src_stv:evt_1PJ", msgs[0].Header.Get(streams.HeaderMsgID))

		// Older than Stripe's five minutes of tolerance: a replay.
		r = send(time.Now().Add(-301 * time.Second))
		assert.Equal(t, http.StatusUnauthorized, r.StatusCode, "%s", r.Body)
		assert.Equal(t, "signature_invalid", errorCode(t, r))
		assert.Contains(t, string(r.Body), "Stripe-Signature")
		assert.Len(t, stored(t, e.js, "stv"), 1)
	})

	t.Run("cloudevents", func(t *testing.T) {
		key := e.project(t, "cev")
		src := e.verifiedSource(t, mirror.Source{ID: "src_cev", ProjectID: "cev", Name: "producer", Connector: "webhook", Preset: "cloudevents"})
		at := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
		event := func(id string) cloudevents.Event {
			ev := cloudevents.NewEvent()
			ev.SetID(id)
			ev.SetSource("/shop/orders")
			ev.SetType("com.example.order.created")
			ev.SetTime(at)
			require.NoError(t, ev.SetData(cloudevents.ApplicationJSON, map[string]any{"order": id, "total": 3}))
			return ev
		}
		sendCE := func(target string, header [2]string, ctx context.Context, ev cloudevents.Event) {
			t.Helper()
			c, err := cloudevents.NewClientHTTP(cehttp.WithTarget(target), cehttp.WithHeader(header[0], header[1]))
			require.NoError(t, err)
			res := c.Send(ctx, ev)
			require.True(t, cloudevents.IsACK(res), "%v", res)
			var hr *cehttp.Result
			require.True(t, cloudevents.ResultAs(res, &hr), "%v", res)
			require.Equal(t, http.StatusAccepted, hr.StatusCode, "%v", res)
		}
		binary := cloudevents.WithEncodingBinary(context.Background())
		structured := cloudevents.WithEncodingStructured(context.Background())

		// /v1/events with the project's key.
		events := e.col.HTTP + "/v1/events"
		apiKey := [2]string{"X-API-Key", key}
		sendCE(events, apiKey, binary, event("o-1"))
		sendCE(events, apiKey, structured, event("o-2"))
		sendCE(events, apiKey, structured, event("o-1")) // the same event again, in the other mode
		msgs := stored(t, e.js, "cev")
		require.Len(t, msgs, 2, "an event's source and id are its identity")
		for i, id := range []string{"o-1", "o-2"} {
			assert.Equal(t, "event", msgs[i].Header.Get(streams.HeaderSignal))
			assert.Regexp(t, `^ce:`, msgs[i].Header.Get(streams.HeaderMsgID))
			assert.JSONEq(t, `{"order":"`+id+`","total":3,"_event_type":"com.example.order.created","_source":"/shop/orders","_time":"2024-05-01T12:00:00Z"}`, string(msgs[i].Data))
		}
		assert.NotEqual(t, msgs[0].Header.Get(streams.HeaderMsgID), msgs[1].Header.Get(streams.HeaderMsgID))

		// A push source with the cloudevents preset.
		auth := [2]string{"Authorization", "Bearer " + src.APIKey}
		sendCE(src.url(e.col.HTTP), auth, binary, event("o-3"))
		sendCE(src.url(e.col.HTTP), auth, structured, event("o-4"))
		sendCE(src.url(e.col.HTTP), auth, binary, event("o-3"))
		msgs = stored(t, e.js, "cev")
		require.Len(t, msgs, 4)
		for i, id := range []string{"o-3", "o-4"} {
			m := msgs[2+i]
			var rec envelopeRecord
			require.NoError(t, json.Unmarshal(m.Data, &rec))
			assert.Equal(t, "com.example.order.created", rec.EventType)
			assert.Equal(t, "2024-05-01T12:00:00.000000000Z", rec.Timestamp)
			assert.Equal(t, "/shop/orders", rec.Labels["source"])
			assert.JSONEq(t, `{"order":"`+id+`","total":3}`, string(rec.Payload))
			assert.Regexp(t, `^src:src_cev:`, m.Header.Get(streams.HeaderMsgID))
		}
	})

	t.Run("url_token", func(t *testing.T) {
		e.project(t, "utv")
		tok := sourceverify.NewSecret(sourceverify.SchemeURLToken)
		src := mirror.Source{ID: "src_utv", ProjectID: "utv", Name: "simple", Connector: "webhook",
			Verification: verification(sourceverify.Config{Scheme: sourceverify.SchemeURLToken, Secret: tok})}
		ps := e.verifiedSource(t, src)
		url := ps.url(e.col.HTTP) + "/" + tok
		r := send(t, http.MethodPost, url, []byte(`{"n":1}`), nil)
		require.Equal(t, http.StatusAccepted, r.StatusCode, "%s", r.Body)
		require.Len(t, stored(t, e.js, "utv"), 1)
		r = send(t, http.MethodPost, ps.url(e.col.HTTP), []byte(`{"n":2}`), nil)
		assert.Equal(t, http.StatusUnauthorized, r.StatusCode, "%s", r.Body)
		assert.Equal(t, "signature_invalid", errorCode(t, r))

		// Rotated: the old URL stops working within a second.
		newTok := sourceverify.NewSecret(sourceverify.SchemeURLToken)
		src.Verification = verification(sourceverify.Config{Scheme: sourceverify.SchemeURLToken, Secret: newTok})
		require.NoError(t, e.m.PutSource(context.Background(), ps.IngestKey, src))
		accepted := 1 // until the receiver has the new token, the old one is still accepted
		require.Eventually(t, func() bool {
			c := send(t, http.MethodPost, url, []byte(`{"n":3}`), nil).StatusCode
			if c == http.StatusAccepted {
				accepted++
			}
			return c == http.StatusUnauthorized
		}, time.Second, 10*time.Millisecond, "the old token still works")
		r = send(t, http.MethodPost, ps.url(e.col.HTTP)+"/"+newTok, []byte(`{"n":4}`), nil)
		require.Equal(t, http.StatusAccepted, r.StatusCode, "%s", r.Body)
		assert.Len(t, stored(t, e.js, "utv"), accepted+1)
	})

	t.Run("alertmanager", func(t *testing.T) {
		e.project(t, "amv")
		pass := sourceverify.NewSecret(sourceverify.SchemeBasic)
		src := e.verifiedSource(t, mirror.Source{ID: "src_amv", ProjectID: "amv", Name: "alertmanager", Connector: "webhook", Preset: "alertmanager",
			Verification: verification(sourceverify.Config{Scheme: sourceverify.SchemeBasic, Username: "alertmanager", Password: pass})})
		// Alertmanager's webhook body (prometheus.io/docs/alerting/latest/configuration/#webhook_config).
		notification := func(status string, alerts ...string) []byte {
			return []byte(`{"version":"4","groupKey":"{}:{alertname=\"HighLatency\"}","truncatedAlerts":0,"status":"` + status + `","receiver":"svc",
			"groupLabels":{"alertname":"HighLatency"},"commonLabels":{"alertname":"HighLatency","severity":"page"},"commonAnnotations":{},
			"externalURL":"http://alertmanager:9093","alerts":[` + strings.Join(alerts, ",") + `]}`)
		}
		alert := func(status, instance, fp, endsAt string) string {
			return `{"status":"` + status + `","labels":{"alertname":"HighLatency","severity":"page","instance":"` + instance + `"},
			"annotations":{"summary":"latency over 1s on ` + instance + `"},"startsAt":"2024-05-01T12:00:00Z","endsAt":"` + endsAt + `",
			"generatorURL":"http://prometheus:9090/graph","fingerprint":"` + fp + `"}`
		}
		basic := func(user, pw string) map[string]string {
			return map[string]string{"Authorization": "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pw)), "User-Agent": "Alertmanager/0.27.0"}
		}
		firing := notification("firing", alert("firing", "api-1", "a1b2c3d4e5f60718", "0001-01-01T00:00:00Z"), alert("firing", "api-2", "b1b2c3d4e5f60718", "0001-01-01T00:00:00Z"))
		r := post(t, src.url(e.col.HTTP), "", "application/json", firing, basic("alertmanager", pass))
		require.Equal(t, http.StatusAccepted, r.StatusCode, "%s", r.Body)
		assert.JSONEq(t, `{"accepted":2}`, string(r.Body))
		types := func() []string {
			var out []string
			for _, m := range stored(t, e.js, "amv") {
				var rec envelopeRecord
				require.NoError(t, json.Unmarshal(m.Data, &rec))
				out = append(out, rec.EventType+" "+rec.Labels["instance"])
			}
			return out
		}
		assert.Equal(t, []string{"alert.firing api-1", "alert.firing api-2"}, types())

		// Alertmanager repeats the notification (repeat_interval, or a retry): nothing new.
		r = post(t, src.url(e.col.HTTP), "", "application/json", firing, basic("alertmanager", pass))
		require.Equal(t, http.StatusAccepted, r.StatusCode, "%s", r.Body)
		assert.Len(t, stored(t, e.js, "amv"), 2)

		// Wrong password: refused, nothing stored.
		r = post(t, src.url(e.col.HTTP), "", "application/json", firing, basic("alertmanager", pass+"x"))
		assert.Equal(t, http.StatusUnauthorized, r.StatusCode, "%s", r.Body)
		assert.Equal(t, "signature_invalid", errorCode(t, r))

		resolved := notification("resolved", alert("resolved", "api-1", "a1b2c3d4e5f60718", "2024-05-01T12:05:00Z"))
		r = post(t, src.url(e.col.HTTP), "", "application/json", resolved, basic("alertmanager", pass))
		require.Equal(t, http.StatusAccepted, r.StatusCode, "%s", r.Body)
		assert.Equal(t, []string{"alert.firing api-1", "alert.firing api-2", "alert.resolved api-1"}, types())
		ids := msgIDs(stored(t, e.js, "amv"))
		for _, id := range ids {
			assert.True(t, strings.HasPrefix(id, "src:src_amv:"), id)
		}
		assert.Len(t, ids, 3)
	})
}
