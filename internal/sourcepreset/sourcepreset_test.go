package sourcepreset

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Sample payloads in testdata, each as its sender's documentation shows it:
//
//   - alertmanager.json: the webhook_config payload format,
//     https://prometheus.io/docs/alerting/latest/configuration/#webhook_config
//     (values from a real notification of Alertmanager 0.25; one alert resolved).
//   - grafana.json: https://grafana.com/docs/grafana/latest/alerting/configure-notifications/manage-contact-points/integrations/webhook-notifier/
//   - github_*.json: https://docs.github.com/en/webhooks/webhook-events-and-payloads
//     (push, pull_request, workflow_run; cut to the fields that matter here).
//   - stripe_event.json: https://docs.stripe.com/api/events/object
//   - sentry_issue.json: https://docs.sentry.io/integrations/integration-platform/webhooks/issues/
//   - pagerduty_incident.json: https://developer.pagerduty.com/docs/webhooks-overview
//     (the V3 webhook payload example).

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	return b
}

func header(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

func decode(t testing.TB, raw []byte) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(raw, &m), "%s", raw)
	return m
}

func mustTime(t testing.TB, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339Nano, s)
	require.NoError(t, err)
	return v.UTC()
}

func TestValid(t *testing.T) {
	for _, p := range Names() {
		assert.True(t, Valid(p), p)
	}
	assert.False(t, Valid(""))
	assert.False(t, Valid("GitHub"))
	_, err := Split("gitlab", nil, []byte(`{}`), Limits{})
	require.ErrorIs(t, err, ErrUnknownPreset)
	assert.Contains(t, err.Error(), "alertmanager, grafana, github")
}

func TestAlertmanagerOneEventPerAlert(t *testing.T) {
	body := fixture(t, "alertmanager.json")
	evs, err := Split(Alertmanager, header("User-Agent", "Alertmanager/0.25.0", "Authorization", "Bearer osi_secret"), body, Limits{})
	require.NoError(t, err)
	require.Len(t, evs, 2)

	firing, resolved := evs[0], evs[1]
	assert.Equal(t, "alert.firing", firing.EventType)
	assert.Equal(t, "alert.resolved", resolved.EventType)
	assert.Equal(t, mustTime(t, "2023-02-06T13:08:45.828Z"), firing.Time, "firing: startsAt")
	assert.Equal(t, mustTime(t, "2023-02-06T13:06:15.5Z"), resolved.Time, "resolved: endsAt")
	assert.Equal(t, "BlackBox Probe Failure: https://server.example.org", firing.Text, "annotations.summary")
	assert.Equal(t, "ProbeFailure", resolved.Text, "no summary: the alert name")
	assert.Equal(t, map[string]string{"alertname": "ProbeFailure", "instance": "https://server.example.org", "job": "http_checks", "severity": "critical"}, firing.Labels)
	assert.Equal(t, map[string]string{"user-agent": "Alertmanager/0.25.0"}, firing.Headers, "credentials are never kept")

	p := decode(t, firing.Payload)
	assert.Equal(t, "1a30ba71cca2921f", p["fingerprint"])
	assert.Equal(t, "http://prometheus.example.org:9090/graph?g0.expr=probe_success+%3D%3D+0&g0.tab=1", p["generatorURL"])
	group := p["group"].(map[string]any)
	assert.Equal(t, `{}/{severity="critical"}:{alertname="ProbeFailure"}`, group["groupKey"])
	assert.Equal(t, map[string]any{"alertname": "ProbeFailure", "job": "http_checks", "severity": "critical"}, group["commonLabels"])
	assert.Equal(t, "otelcol-svc", group["receiver"])
	assert.NotContains(t, group, "alerts", "each event holds its own alert only")
	// The alert's own bytes come first, unchanged.
	var alerts struct{ Alerts []json.RawMessage }
	require.NoError(t, json.Unmarshal(body, &alerts))
	assert.True(t, bytes.HasPrefix(firing.Payload, bytes.TrimSpace(bytes.TrimSuffix(bytes.TrimSpace(alerts.Alerts[0]), []byte("}")))))

	require.NotEmpty(t, firing.DedupID)
	assert.NotEqual(t, firing.DedupID, resolved.DedupID)
}

// Alertmanager repeats a notification (repeat_interval, or a retry after a failed send)
// with the same group, status and alerts: stored once. Resolving the alert is a new event,
// and so is the alert firing again later (a new startsAt).
func TestAlertmanagerDedupIDs(t *testing.T) {
	body := fixture(t, "alertmanager.json")
	first, err := Split(Alertmanager, nil, body, Limits{})
	require.NoError(t, err)
	again, err := Split(Alertmanager, nil, body, Limits{})
	require.NoError(t, err)
	assert.Equal(t, first[0].DedupID, again[0].DedupID)
	assert.Equal(t, first[1].DedupID, again[1].DedupID)

	resolvedBody := strings.Replace(string(body), `"status": "firing",
      "labels": {
        "alertname": "ProbeFailure",
        "instance": "https://server.example.org"`, `"status": "resolved",
      "labels": {
        "alertname": "ProbeFailure",
        "instance": "https://server.example.org"`, 1)
	require.NotEqual(t, string(body), resolvedBody)
	resolved, err := Split(Alertmanager, nil, []byte(resolvedBody), Limits{})
	require.NoError(t, err)
	assert.Equal(t, "alert.resolved", resolved[0].EventType)
	assert.NotEqual(t, first[0].DedupID, resolved[0].DedupID, "a resolve is new")

	refired, err := Split(Alertmanager, nil, []byte(strings.Replace(string(body), "2023-02-06T13:08:45.828Z", "2023-02-06T15:00:00Z", 1)), Limits{})
	require.NoError(t, err)
	assert.NotEqual(t, first[0].DedupID, refired[0].DedupID, "firing again later is new")

	// The same alert in another group (another route) is another notification.
	other, err := Split(Alertmanager, nil, []byte(strings.Replace(string(body), `"groupKey": "{}/`, `"groupKey": "{}/{team=\"x\"}/`, 1)), Limits{})
	require.NoError(t, err)
	assert.NotEqual(t, first[0].DedupID, other[0].DedupID)

	// Grafana's identical body is another sender's notification.
	g, err := Split(Grafana, nil, body, Limits{})
	require.NoError(t, err)
	assert.NotEqual(t, first[0].DedupID, g[0].DedupID)
}

func TestAlertmanagerWithoutFingerprintUsesLabels(t *testing.T) {
	a := `{"groupKey":"g","status":"firing","alerts":[{"status":"firing","labels":{"alertname":"A","x":"1"},"startsAt":"2024-01-01T00:00:00Z"}]}`
	b := `{"groupKey":"g","status":"firing","alerts":[{"status":"firing","labels":{"x":"1","alertname":"A"},"startsAt":"2024-01-01T00:00:00Z"}]}`
	c := `{"groupKey":"g","status":"firing","alerts":[{"status":"firing","labels":{"alertname":"A","x":"2"},"startsAt":"2024-01-01T00:00:00Z"}]}`
	ea, err := Split(Alertmanager, nil, []byte(a), Limits{})
	require.NoError(t, err)
	eb, err := Split(Alertmanager, nil, []byte(b), Limits{})
	require.NoError(t, err)
	ec, err := Split(Alertmanager, nil, []byte(c), Limits{})
	require.NoError(t, err)
	assert.Equal(t, ea[0].DedupID, eb[0].DedupID, "label order does not matter")
	assert.NotEqual(t, ea[0].DedupID, ec[0].DedupID)
}

func TestGrafanaAlerts(t *testing.T) {
	evs, err := Split(Grafana, header("User-Agent", "Grafana"), fixture(t, "grafana.json"), Limits{})
	require.NoError(t, err)
	require.Len(t, evs, 2)
	assert.Equal(t, "alert.firing", evs[0].EventType)
	assert.Equal(t, mustTime(t, "2021-10-12T07:51:03.157076Z"), evs[0].Time)
	assert.Equal(t, "This alert was triggered for zone us-1", evs[0].Text)
	assert.Equal(t, "eu-1", evs[1].Labels["zone"])
	p := decode(t, evs[1].Payload)
	assert.Equal(t, map[string]any{"B": 44.23943737541908, "C": float64(1)}, p["values"], "Grafana's own alert fields are kept")
	group := p["group"].(map[string]any)
	assert.Equal(t, float64(1), group["orgId"])
	assert.Equal(t, "alerting", group["state"])
	assert.Equal(t, "[FIRING:2]  (blue)", group["title"])
	assert.Equal(t, map[string]any{"team": "blue"}, group["commonLabels"])
	assert.Equal(t, "{}:{}", group["groupKey"])
	assert.NotEqual(t, evs[0].DedupID, evs[1].DedupID)
}

func TestAlertBodiesRefused(t *testing.T) {
	for _, tc := range []struct{ body, msg string }{
		{``, "alertmanager: the body is not a JSON object"},
		{`[{"status":"firing"}]`, "alertmanager: the body is not a JSON object"},
		{`{"status":"firing"}`, "alertmanager: the body has no alerts[]"},
		{`{"alerts":{}}`, "alertmanager: alerts is not an array"},
		{`{"alerts":[1]}`, "alertmanager: alerts[0] is not an object"},
		{`{"alerts":[{"labels":{}}]}`, "alertmanager: alerts[0] has no status"},
		{`{"alerts":[]} x`, "alertmanager: the body is not valid JSON"},
	} {
		_, err := Split(Alertmanager, nil, []byte(tc.body), Limits{})
		var e *Error
		require.ErrorAs(t, err, &e, tc.body)
		assert.True(t, strings.HasPrefix(err.Error(), tc.msg), "%s: %v", tc.body, err)
	}
	_, err := Split(Grafana, nil, []byte(`{}`), Limits{})
	assert.EqualError(t, err, "grafana: the body has no alerts[]; this URL takes Grafana Alerting's webhook notifications")
}

func TestLimits(t *testing.T) {
	alert := `{"status":"firing","labels":{"alertname":"A"},"fingerprint":"f%d"}`
	var parts []string
	for i := 0; i < 4; i++ {
		parts = append(parts, fmt.Sprintf(alert, i))
	}
	body := []byte(`{"groupKey":"g","alerts":[` + strings.Join(parts, ",") + `]}`)
	evs, err := Split(Alertmanager, nil, body, Limits{MaxEvents: 4})
	require.NoError(t, err)
	assert.Len(t, evs, 4)
	_, err = Split(Alertmanager, nil, body, Limits{MaxEvents: 3})
	assert.ErrorContains(t, err, "the body holds 4 alerts, more than the 3 one request may carry")

	batch := []byte(`[{"specversion":"1.0","type":"a","id":"1","source":"s"},{"specversion":"1.0","type":"a","id":"2","source":"s"}]`)
	_, err = Split(CloudEvents, header("Content-Type", ceBatch), batch, Limits{MaxEvents: 1})
	assert.ErrorContains(t, err, "the batch holds 2 events, more than the 1")

	// A small group repeated on many alerts is what real notifications look like; a large
	// group on many alerts would multiply the body, and is refused instead.
	big := strings.Repeat("x", 200<<10)
	parts = parts[:0]
	for i := 0; i < 100; i++ {
		parts = append(parts, fmt.Sprintf(alert, i))
	}
	body = []byte(`{"groupKey":"g","commonAnnotations":{"d":"` + big + `"},"alerts":[` + strings.Join(parts, ",") + `]}`)
	_, err = Split(Alertmanager, nil, body, Limits{})
	assert.ErrorContains(t, err, "too large to repeat on each of its 100 alerts")
}

func TestGitHubPullRequest(t *testing.T) {
	h := header("X-GitHub-Event", "pull_request", "X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958",
		"X-GitHub-Hook-ID", "292430182", "X-Hub-Signature-256", "sha256=d57c68ca6f92289e6987922ff26938930f6e66a2d161ef06abdf1859230aa23c",
		"User-Agent", "GitHub-Hookshot/044aadd", "Content-Type", "application/json")
	body := fixture(t, "github_pull_request.json")
	evs, err := Split(GitHub, h, body, Limits{})
	require.NoError(t, err)
	require.Len(t, evs, 1)
	ev := evs[0]
	assert.Equal(t, "pull_request.opened", ev.EventType)
	assert.Equal(t, "octo/repo: PR #12 opened by alice: Fix the thing", ev.Text)
	assert.Equal(t, mustTime(t, "2019-05-15T15:20:34Z"), ev.Time, "pull_request.updated_at")
	assert.Equal(t, "72d3162e-cc78-11e3-81ab-4c9367dc0958", ev.DedupID)
	assert.Equal(t, map[string]string{"repository": "octo/repo", "sender": "alice", "organization": "octo", "base": "main"}, ev.Labels)
	assert.Equal(t, map[string]string{
		"x-github-event": "pull_request", "x-github-delivery": "72d3162e-cc78-11e3-81ab-4c9367dc0958",
		"x-github-hook-id": "292430182", "user-agent": "GitHub-Hookshot/044aadd",
	}, ev.Headers, "the signature is not kept")
	assert.Equal(t, string(bytes.TrimSpace(body)), string(ev.Payload), "the payload as sent")
}

func TestGitHubPushAndWorkflowRun(t *testing.T) {
	evs, err := Split(GitHub, header("X-GitHub-Event", "push", "X-GitHub-Delivery", "d1"), fixture(t, "github_push.json"), Limits{})
	require.NoError(t, err)
	push := evs[0]
	assert.Equal(t, "push", push.EventType, "push has no action")
	assert.Equal(t, "Codertocat/Hello-World: Codertocat pushed 1 commit to main: Update README.md", push.Text)
	assert.Equal(t, mustTime(t, "2019-05-15T19:20:30Z"), push.Time, "head_commit.timestamp")
	assert.Equal(t, "refs/heads/main", push.Labels["ref"])

	evs, err = Split(GitHub, header("X-GitHub-Event", "workflow_run"), fixture(t, "github_workflow_run.json"), Limits{})
	require.NoError(t, err)
	run := evs[0]
	assert.Equal(t, "workflow_run.completed", run.EventType)
	assert.Equal(t, "octo-org/octo-repo: workflow Build completed (failure) on main", run.Text)
	assert.Equal(t, mustTime(t, "2020-01-22T19:33:58Z"), run.Time)
	assert.Equal(t, "failure", run.Labels["conclusion"])
	assert.Empty(t, run.DedupID, "no delivery header, no dedup id")

	evs, err = Split(GitHub, header("X-GitHub-Event", "check_run"),
		[]byte(`{"action":"completed","check_run":{"name":"lint","conclusion":"success","started_at":"2024-01-01T00:00:00Z","completed_at":"2024-01-01T00:01:00Z"},"repository":{"full_name":"o/r"},"sender":{"login":"bot"}}`), Limits{})
	require.NoError(t, err)
	assert.Equal(t, "o/r: check lint completed (success)", evs[0].Text)
	assert.Equal(t, mustTime(t, "2024-01-01T00:01:00Z"), evs[0].Time)

	evs, err = Split(GitHub, header("X-GitHub-Event", "issues"),
		[]byte(`{"action":"closed","issue":{"number":3,"title":"Broken","updated_at":"2024-02-01T00:00:00Z"},"repository":{"full_name":"o/r"},"sender":{"login":"bob"}}`), Limits{})
	require.NoError(t, err)
	assert.Equal(t, "o/r: issue #3 closed by bob: Broken", evs[0].Text)
	assert.Equal(t, "issues.closed", evs[0].EventType)

	_, err = Split(GitHub, nil, fixture(t, "github_push.json"), Limits{})
	assert.ErrorContains(t, err, "github: the request has no X-GitHub-Event header")
}

func TestStripe(t *testing.T) {
	evs, err := Split(Stripe, header("Stripe-Signature", "t=1492774577,v1=5257a869e7", "User-Agent", "Stripe/1.0 (+https://stripe.com/docs/webhooks)"), fixture(t, "stripe_event.json"), Limits{})
	require.NoError(t, err)
	ev := evs[0]
	assert.Equal(t, "setup_intent.created", ev.EventType)
	assert.Equal(t, time.Unix(1686089970, 0).UTC(), ev.Time)
	assert.Equal(t, "evt_1NG8Du2eZvKYlo2CUI79vXWy", ev.DedupID)
	assert.Equal(t, "setup_intent.created seti_1NG8Du2eZvKYlo2C9XMqbR0x", ev.Text)
	assert.Equal(t, map[string]string{"object": "setup_intent", "livemode": "false"}, ev.Labels)
	assert.NotContains(t, ev.Headers, "stripe-signature")

	evs, err = Split(Stripe, nil, []byte(`{"id":"evt_2","type":"charge.succeeded","created":"2024-05-01T12:00:00.5Z","data":{"object":{"id":"ch_1","object":"charge","amount":2000,"currency":"usd"}}}`), Limits{})
	require.NoError(t, err)
	assert.Equal(t, mustTime(t, "2024-05-01T12:00:00.5Z"), evs[0].Time, "v2 events write created as RFC 3339")
	assert.Equal(t, "charge.succeeded ch_1 (2000 USD)", evs[0].Text)

	_, err = Split(Stripe, nil, []byte(`{"id":"evt_1"}`), Limits{})
	assert.EqualError(t, err, "stripe: the event has no type; this URL takes Stripe webhook events")
}

func TestSentry(t *testing.T) {
	h := header("Request-ID", "f2d7c1a7-66d5-4d50-a4b4-4c0bbf2d0a31", "Sentry-Hook-Resource", "issue",
		"Sentry-Hook-Timestamp", "1566248318", "Sentry-Hook-Signature", "2a4b…")
	evs, err := Split(Sentry, h, fixture(t, "sentry_issue.json"), Limits{})
	require.NoError(t, err)
	ev := evs[0]
	assert.Equal(t, "issue.created", ev.EventType)
	assert.Equal(t, mustTime(t, "2019-08-19T20:58:37.391Z"), ev.Time, "a new issue's firstSeen")
	assert.Equal(t, "f2d7c1a7-66d5-4d50-a4b4-4c0bbf2d0a31", ev.DedupID)
	assert.Equal(t, "issue created: ReferenceError: blooopy is not defined", ev.Text)
	assert.Equal(t, map[string]string{"project": "front-end", "level": "error", "actor": "Sentry"}, ev.Labels)
	assert.Equal(t, map[string]string{"request-id": "f2d7c1a7-66d5-4d50-a4b4-4c0bbf2d0a31", "sentry-hook-resource": "issue", "sentry-hook-timestamp": "1566248318"}, ev.Headers)

	// Resolving an issue happens when the hook is sent, not at the lastSeen.
	h.Set("Request-ID", "r2")
	evs, err = Split(Sentry, h, bytes.Replace(fixture(t, "sentry_issue.json"), []byte(`"action": "created"`), []byte(`"action": "resolved"`), 1), Limits{})
	require.NoError(t, err)
	assert.Equal(t, "issue.resolved", evs[0].EventType)
	assert.Equal(t, time.Unix(1566248318, 0).UTC(), evs[0].Time)

	_, err = Split(Sentry, nil, fixture(t, "sentry_issue.json"), Limits{})
	assert.ErrorContains(t, err, "sentry: the request has no Sentry-Hook-Resource header")
}

func TestPagerDuty(t *testing.T) {
	h := header("X-Webhook-Id", "e0d0f1e0-7d2f-4ab4-9d73-d1a32f1e1b66", "X-Webhook-Subscription", "PY1OQVE", "X-PagerDuty-Signature", "v1=abc")
	evs, err := Split(PagerDuty, h, fixture(t, "pagerduty_incident.json"), Limits{})
	require.NoError(t, err)
	ev := evs[0]
	assert.Equal(t, "incident.priority_updated", ev.EventType)
	assert.Equal(t, mustTime(t, "2020-10-02T18:45:22.169Z"), ev.Time)
	assert.Equal(t, "5ac64822-4adc-4fda-ade0-410becf0de4f", ev.DedupID)
	assert.Equal(t, "incident.priority_updated: #2 A little bump in the road", ev.Text)
	assert.Equal(t, map[string]string{"resource_type": "incident", "service": "API Service", "agent": "Tenex Engineer", "status": "triggered"}, ev.Labels)
	assert.NotContains(t, ev.Headers, "x-pagerduty-signature")
	assert.Equal(t, "PY1OQVE", ev.Headers["x-webhook-subscription"])

	_, err = Split(PagerDuty, nil, []byte(`{"messages":[]}`), Limits{})
	assert.ErrorContains(t, err, "pagerduty: the body has no event object; this URL takes PagerDuty v3 webhooks")
}

// Standard Webhooks senders (https://www.standardwebhooks.com/) name each delivery in the
// webhook-id header: the dedup id of a preset whose own id is missing.
func TestStandardWebhooksIDFallback(t *testing.T) {
	evs, err := Split(GitHub, header("X-GitHub-Event", "ping", "Webhook-Id", "msg_2b9Dn7"), []byte(`{"zen":"Keep it logically awesome."}`), Limits{})
	require.NoError(t, err)
	assert.Equal(t, "msg_2b9Dn7", evs[0].DedupID)
	assert.Equal(t, "ping", evs[0].EventType)
	evs, err = Split(Stripe, header("Webhook-Id", "msg_1"), []byte(`{"id":"evt_9","type":"x"}`), Limits{})
	require.NoError(t, err)
	assert.Equal(t, "evt_9", evs[0].DedupID, "the sender's own id first")
}

func TestDedupIDsFitAMessageID(t *testing.T) {
	long := strings.Repeat("a", 200)
	for _, id := range []string{long, "has space", "new\nline", "\x7f", "é"} {
		got := dedupID(id)
		assert.True(t, strings.HasPrefix(got, "sha256:"), id)
		assert.Len(t, got, len("sha256:")+64)
	}
	assert.Equal(t, "evt_1", dedupID("evt_1"))
	assert.Empty(t, dedupID(""))
	assert.NotEqual(t, dedupID("a/b", "c"), dedupID("a", "b/c"))
}

func TestEveryPayloadIsAnObject(t *testing.T) {
	for _, tc := range []struct {
		preset string
		h      http.Header
		body   string
	}{
		{CloudEvents, header("Ce-Specversion", "1.0", "Ce-Type", "t", "Content-Type", "text/plain"), "plain text"},
		{CloudEvents, header("Ce-Specversion", "1.0", "Ce-Type", "t"), "[1,2]"},
		{CloudEvents, header("Ce-Specversion", "1.0", "Ce-Type", "t"), "\xff\xfe"},
		{CloudEvents, header("Ce-Specversion", "1.0", "Ce-Type", "t"), ""},
		{CloudEvents, header("Content-Type", ceStructured), `{"specversion":"1.0","type":"t","data":"text"}`},
		{CloudEvents, header("Content-Type", ceStructured), `{"specversion":"1.0","type":"t","data_base64":"AAE="}`},
		{CloudEvents, header("Content-Type", ceStructured), `{"specversion":"1.0","type":"t"}`},
		{Alertmanager, nil, `{"status":"firing","alerts":[{"status":"resolved"},{ }]}`},
	} {
		evs, err := Split(tc.preset, tc.h, []byte(tc.body), Limits{})
		require.NoError(t, err, tc.body)
		for _, ev := range evs {
			assert.True(t, json.Valid(ev.Payload), "%q: %s", tc.body, ev.Payload)
			assert.Equal(t, byte('{'), ev.Payload[0], "%q: %s", tc.body, ev.Payload)
		}
	}
}

func TestErrorsAreForTheSender(t *testing.T) {
	for _, p := range Names() {
		_, err := Split(p, nil, []byte(`not json`), Limits{})
		var e *Error
		require.True(t, errors.As(err, &e), "%s: %v", p, err)
		assert.Equal(t, p, e.Preset)
		assert.True(t, strings.HasPrefix(err.Error(), p+": "), err.Error())
	}
}

func TestDedupIDsNeverMergeDistinctEvents(t *testing.T) {
	// A batch under one webhook-id: each event its own id.
	batch := []byte(`[{"specversion":"1.0","type":"a","source":"/s"},{"specversion":"1.0","type":"a","source":"/s"}]`)
	evs, err := Split(CloudEvents, header("Content-Type", ceBatch, "Webhook-Id", "msg_1"), batch, Limits{})
	require.NoError(t, err)
	require.Len(t, evs, 2)
	assert.NotEmpty(t, evs[0].DedupID)
	assert.NotEqual(t, evs[0].DedupID, evs[1].DedupID)
	// Without ids, no dedup id: events of one source are not merged.
	evs, err = Split(CloudEvents, header("Content-Type", ceBatch), batch, Limits{})
	require.NoError(t, err)
	assert.Empty(t, evs[0].DedupID)
	assert.Empty(t, evs[1].DedupID)
}
