package ingestreceiver

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/slack-go/slack"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/mirrorcache"
	"github.com/otelcol-svc/otelcol-svc/internal/incident"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// Slack shows signing secrets as 32 hex characters.
const (
	appSecret      = "e3b0c44298fc1c149afbf4c8996fb924"
	otherAppSecret = "0123456789abcdef0123456789abcdef"
)

// mirrorAuth is fakeAuth with a real mirror cache: the receiver finds slack_app
// destinations, and their signing secrets, in it.
type mirrorAuth struct {
	*fakeAuth
	cache *mirrorcache.Cache
}

func (m mirrorAuth) MirrorCache() *mirrorcache.Cache { return m.cache }

// slackStack is a receiver over a real NATS whose mirror holds project p1 (a slack_app
// destination sk_slack, a webhook destination sk_hook) and project p2 (its own slack_app
// destination with another secret), and the incident store on the same NATS.
type slackStack struct {
	tr    *testReceiver
	js    jetstream.JetStream
	store *incident.Store
	url   string
}

func startSlackStack(t *testing.T) *slackStack {
	t.Helper()
	ctx := context.Background()
	n := testenv.StartNATS(t)
	_, js := testenv.Connect(t, n.URL())
	m, err := mirror.Open(ctx, js, 1)
	require.NoError(t, err)
	require.NoError(t, m.PutProject(ctx, mirror.Project{ID: "p1", AccountID: "a1", Version: 1, Sinks: []mirror.Sink{
		{ID: "sk_slack", Kind: "slack_app", Enabled: true, BotToken: "xoxb-1", SigningSecret: appSecret, Channel: "C1"},
		{ID: "sk_hook", Kind: "webhook", Enabled: true, URL: "https://example.com/hook"},
		{ID: "sk_nosecret", Kind: "slack_app", Enabled: true, BotToken: "xoxb-3", Channel: "C3"},
	}}))
	require.NoError(t, m.PutProject(ctx, mirror.Project{ID: "p2", AccountID: "a2", Version: 1, Sinks: []mirror.Sink{
		{ID: "sk_slack", Kind: "slack_app", Enabled: true, BotToken: "xoxb-2", SigningSecret: otherAppSecret, Channel: "C2"},
	}}))
	cache := mirrorcache.NewCache(zap.NewNop())
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); cache.Run(cctx, js) }()
	t.Cleanup(func() { cancel(); <-done })
	require.Eventually(t, func() bool {
		_, p1 := cache.Project("p1")
		_, p2 := cache.Project("p2")
		return cache.Ready() && p1 && p2
	}, 10*time.Second, 10*time.Millisecond)

	fa := &fakeAuth{js: js}
	tr := startTestReceiver(t, nil, fa)
	tr.dp = mirrorAuth{fakeAuth: fa, cache: cache}
	st, err := incident.Open(ctx, js, 1)
	require.NoError(t, err)
	return &slackStack{tr: tr, js: js, store: st, url: tr.url}
}

func (s *slackStack) open(t *testing.T, project, fingerprint string) incident.Incident {
	t.Helper()
	res, err := s.store.Apply(context.Background(), project, incident.Settings{GroupWait: time.Hour, GroupInterval: time.Minute, ResolveAfter: 24 * time.Hour},
		incident.Join{Fingerprint: fingerprint, BatchKey: "b1", Events: 1, Title: "Checkout fails", At: time.Now().UTC()})
	require.NoError(t, err)
	// The processor publishes the opening's notices and clears them; here they count as
	// published, so the output stream holds only what the buttons cause.
	require.NoError(t, s.store.Published(context.Background(), project, res.Incident.ID, incident.MaxSeq(res.Notices, res.Incident.ID)))
	return res.Incident
}

func (s *slackStack) get(t *testing.T, project, id string) incident.Incident {
	t.Helper()
	inc, err := s.store.Get(context.Background(), project, id)
	require.NoError(t, err)
	return inc
}

// slackForm is the body Slack posts when a button of ours is pressed.
func slackForm(t *testing.T, actionID, value string, user map[string]string) []byte {
	t.Helper()
	payload, err := json.Marshal(map[string]any{
		"type": "block_actions", "api_app_id": "A1", "token": "legacy", "trigger_id": "1.2.3",
		"team":    map[string]string{"id": "T1", "domain": "acme"},
		"user":    user,
		"channel": map[string]string{"id": "C1", "name": "incidents"},
		"message": map[string]any{"type": "message", "ts": "1700000000.000100", "text": "Checkout fails",
			"blocks": []any{map[string]any{"type": "header", "block_id": "h", "text": map[string]any{"type": "plain_text", "text": "Checkout fails"}}}},
		"actions": []any{map[string]any{"type": "button", "block_id": "incident_actions", "action_id": actionID, "value": value,
			"text": map[string]any{"type": "plain_text", "text": "Acknowledge"}, "action_ts": "1700000001.000200"}},
		"response_url": "https://hooks.slack.com/actions/T1/1/x",
	})
	require.NoError(t, err)
	return []byte(url.Values{"payload": {string(payload)}}.Encode())
}

// signSlack computes the headers Slack sends: v0=hex(HMAC-SHA256(secret, "v0:ts:body")).
func signSlack(secret string, ts time.Time, body []byte) http.Header {
	stamp := strconv.FormatInt(ts.Unix(), 10)
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("v0:" + stamp + ":"))
	m.Write(body)
	h := http.Header{}
	h.Set("Content-Type", "application/x-www-form-urlencoded")
	h.Set("X-Slack-Request-Timestamp", stamp)
	h.Set("X-Slack-Signature", "v0="+hex.EncodeToString(m.Sum(nil)))
	return h
}

func (s *slackStack) post(t *testing.T, path string, body []byte, h http.Header) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.url+path, bytes.NewReader(body))
	require.NoError(t, err)
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return answer{status: resp.StatusCode, header: resp.Header, body: b}
}

// slackVerifies is slack-go's judgement of the same request.
func slackVerifies(h http.Header, secret string, body []byte) bool {
	v, err := slack.NewSecretsVerifier(h, secret)
	if err != nil {
		return false
	}
	_, _ = v.Write(body)
	return v.Ensure() == nil
}

func outputNotices(t *testing.T, js jetstream.JetStream, project string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, streams.OutputStream(project))
	if err != nil {
		require.ErrorIs(t, err, jetstream.ErrStreamNotFound)
		return nil
	}
	info, err := s.Info(ctx)
	require.NoError(t, err)
	var out []string
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		require.NoError(t, err)
		if id := m.Header.Get(incident.HeaderIncidentID); id != "" {
			out = append(out, id+" "+string(m.Data))
		}
	}
	return out
}

const slackPath = "/slack/interactions/p1/sk_slack"

// A button pressed in Slack acts on the incident as Slack's user, once Slack's signature
// is verified; what slack-go accepts is accepted, and what it refuses is refused.
func TestSlackButtonActsOnTheIncident(t *testing.T) {
	s := startSlackStack(t)
	inc := s.open(t, "p1", "db-down")
	body := slackForm(t, "incident_acknowledge", inc.ID, map[string]string{"id": "U1", "username": "alice", "name": "Alice A", "team_id": "T1"})
	now := time.Now()

	refused := map[string]struct {
		body []byte
		h    http.Header
	}{
		"one byte changed":   {append(bytes.Clone(body[:len(body)-1]), body[len(body)-1]^1), signSlack(appSecret, now, body)},
		"another secret":     {body, signSlack(otherAppSecret, now, body)},
		"301 s old":          {body, signSlack(appSecret, now.Add(-301*time.Second), body)},
		"no signature":       {body, http.Header{"X-Slack-Request-Timestamp": {strconv.FormatInt(now.Unix(), 10)}}},
		"no timestamp":       {body, http.Header{"X-Slack-Signature": signSlack(appSecret, now, body)["X-Slack-Signature"]}},
		"not v0":             {body, http.Header{"X-Slack-Request-Timestamp": {strconv.FormatInt(now.Unix(), 10)}, "X-Slack-Signature": {"v1=00"}}},
		"signed for another": {body, signSlack(otherAppSecret, now, body)},
	}
	for name, c := range refused {
		assert.False(t, slackVerifies(c.h, appSecret, c.body), "%s: slack-go refuses it too", name)
		a := s.post(t, slackPath, c.body, c.h)
		assert.Equal(t, http.StatusUnauthorized, a.status, "%s: %s", name, a.body)
		assert.Equal(t, "signature_invalid", a.code(t), name)
		assert.Contains(t, string(a.body), "nothing was changed", name)
	}
	assert.Equal(t, incident.StatusOpen, s.get(t, "p1", inc.ID).Status, "refused requests change nothing")
	assert.Empty(t, outputNotices(t, s.js, "p1"), "and tell no destination")

	h := signSlack(appSecret, time.Now().Add(-290*time.Second), body)
	require.True(t, slackVerifies(h, appSecret, body), "signed as Slack signs")
	a := s.post(t, slackPath, body, h)
	require.Equal(t, http.StatusOK, a.status, "%s", a.body)
	assert.Empty(t, a.body, "Slack wants an empty 200")
	got := s.get(t, "p1", inc.ID)
	assert.Equal(t, incident.StatusAcknowledged, got.Status)
	assert.Equal(t, "slack:alice", got.AcknowledgedBy)
	assert.Empty(t, got.Outbox, "its notice is published, so cleared from the outbox")
	var notices []string
	require.Eventually(t, func() bool { notices = outputNotices(t, s.js, "p1"); return len(notices) == 1 }, 5*time.Second, 20*time.Millisecond)
	assert.True(t, strings.HasPrefix(notices[0], inc.ID+" "), notices[0])
	assert.Contains(t, notices[0], `"transition":"acknowledged"`)
	assert.Contains(t, notices[0], `"by":"slack:alice"`)

	// The other buttons; the user is named by username, else name, else id.
	for _, c := range []struct {
		action string
		user   map[string]string
		check  func(incident.Incident)
	}{
		{"incident_mute", map[string]string{"id": "U2", "name": "bob"}, func(i incident.Incident) {
			assert.Equal(t, "slack:bob", i.MutedBy)
			assert.True(t, i.MutedUntil.After(time.Now()))
		}},
		{"incident_resolve", map[string]string{"id": "U3"}, func(i incident.Incident) {
			assert.Equal(t, incident.StatusResolved, i.Status)
			assert.Equal(t, "slack:U3", i.ResolvedBy)
		}},
		{"incident_reinvestigate", map[string]string{"id": "U1", "username": "alice"}, func(i incident.Incident) {
			assert.True(t, i.ReinvestigateRequested)
		}},
	} {
		b := slackForm(t, c.action, inc.ID, c.user)
		a := s.post(t, slackPath, b, signSlack(appSecret, time.Now(), b))
		require.Equal(t, http.StatusOK, a.status, "%s: %s", c.action, a.body)
		c.check(s.get(t, "p1", inc.ID))
	}

	// Acknowledging a resolved incident is a conflict, as in the console.
	b := slackForm(t, "incident_acknowledge", inc.ID, map[string]string{"id": "U1"})
	a = s.post(t, slackPath, b, signSlack(appSecret, time.Now(), b))
	assert.Equal(t, http.StatusConflict, a.status, "%s", a.body)
	assert.Equal(t, "incident_resolved", a.code(t))
}

func TestSlackInteractionsURLNamesASlackAppDestination(t *testing.T) {
	s := startSlackStack(t)
	inc := s.open(t, "p1", "db-down")
	body := slackForm(t, "incident_resolve", inc.ID, map[string]string{"id": "U1", "username": "alice"})
	for name, path := range map[string]string{
		"unknown project":          "/slack/interactions/p9/sk_slack",
		"unknown destination":      "/slack/interactions/p1/sk_nope",
		"a webhook destination":    "/slack/interactions/p1/sk_hook",
		"without the destination":  "/slack/interactions/p1",
		"below the destination":    "/slack/interactions/p1/sk_slack/x",
		"project the secret isn't": "/slack/interactions/p2/sk_slack",
	} {
		a := s.post(t, path, body, signSlack(appSecret, time.Now(), body))
		want := http.StatusNotFound
		if name == "project the secret isn't" {
			want = http.StatusUnauthorized // p2's destination has its own secret
		}
		assert.Equal(t, want, a.status, "%s: %s", name, a.body)
	}
	a := s.post(t, "/slack/interactions/p1/sk_nosecret", body, signSlack(appSecret, time.Now(), body))
	assert.Equal(t, http.StatusUnauthorized, a.status, "no signing secret saved yet: %s", a.body)
	assert.Contains(t, string(a.body), "no signing secret")
	assert.Equal(t, incident.StatusOpen, s.get(t, "p1", inc.ID).Status, "nothing was resolved")

	big := append(bytes.Clone(body), []byte("&pad="+strings.Repeat("x", maxSlackBody))...)
	a = s.post(t, slackPath, big, signSlack(appSecret, time.Now(), big))
	assert.Equal(t, http.StatusRequestEntityTooLarge, a.status, "%s", a.body)
	assert.Equal(t, "payload_too_large", a.code(t))

	req, err := http.NewRequest(http.MethodGet, s.url+slackPath, nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
	assert.Equal(t, incident.StatusOpen, s.get(t, "p1", inc.ID).Status)
}

// What is signed but asks nothing of us (another app's button, another kind of
// interaction) is answered 200 and changes nothing; a signed request for an incident
// that does not exist is 404.
func TestSlackInteractionsThatAreNotOurButtons(t *testing.T) {
	s := startSlackStack(t)
	inc := s.open(t, "p1", "db-down")
	for name, body := range map[string][]byte{
		"another action":    slackForm(t, "approve_deploy", inc.ID, map[string]string{"id": "U1"}),
		"a prefix only":     slackForm(t, "incident_", inc.ID, map[string]string{"id": "U1"}),
		"a view submission": []byte(url.Values{"payload": {`{"type":"view_submission","user":{"id":"U1"},"view":{"id":"V1"}}`}}.Encode()),
	} {
		a := s.post(t, slackPath, body, signSlack(appSecret, time.Now(), body))
		assert.Equal(t, http.StatusOK, a.status, "%s: %s", name, a.body)
	}
	for name, body := range map[string][]byte{
		"no payload":       []byte("foo=bar"),
		"payload not JSON": []byte("payload=%7Bnope"),
	} {
		a := s.post(t, slackPath, body, signSlack(appSecret, time.Now(), body))
		assert.Equal(t, http.StatusBadRequest, a.status, "%s: %s", name, a.body)
		assert.Equal(t, "invalid_body", a.code(t), name)
	}
	for name, id := range map[string]string{"unknown": incident.ID(incident.FingerprintHash("other"), 1), "malformed": "inc_x"} {
		body := slackForm(t, "incident_acknowledge", id, map[string]string{"id": "U1"})
		a := s.post(t, slackPath, body, signSlack(appSecret, time.Now(), body))
		assert.Equal(t, http.StatusNotFound, a.status, "%s: %s", name, a.body)
	}
	got := s.get(t, "p1", inc.ID)
	assert.Equal(t, incident.StatusOpen, got.Status)
	assert.Empty(t, outputNotices(t, s.js, "p1"))
}

func TestParseSlackInteraction(t *testing.T) {
	body := slackForm(t, "incident_mute", "inc_x_1", map[string]string{"id": "U1", "username": "al\nice", "name": "Alice"})
	act, err := parseSlackInteraction(body)
	require.NoError(t, err)
	assert.Equal(t, slackAction{Action: "mute", IncidentID: "inc_x_1", By: "slack:alice"}, act, "control characters are dropped")
	long := slackForm(t, "incident_mute", "inc_x_1", map[string]string{"id": strings.Repeat("U", 1000)})
	act, err = parseSlackInteraction(long)
	require.NoError(t, err)
	assert.Len(t, act.By, len("slack:")+maxSlackUser)
}
