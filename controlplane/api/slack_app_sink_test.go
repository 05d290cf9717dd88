package api

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
)

const (
	botToken      = "xoxb-1234567890-0987654321-AbCdEfGhIjKlMnOpQrStUvWx"
	signingSecret = "8f742231b10e8888abcd99yyyzzz85a5"
)

// mirrorSinks are the project's destinations as the data plane reads them.
func (e *modeEnv) mirrorSinks(t *testing.T) []mirror.Sink {
	t.Helper()
	var p mirror.Project
	require.NoError(t, json.Unmarshal(e.mirrorEntry(t), &p))
	return p.Sinks
}

// A slack_app destination's bot token and signing secret are write-only: every answer,
// to every role, shows them redacted with *_set; the mirror carries them for the sink
// role and the receiver; a PATCH without them (or with the redacted text a client read)
// keeps them.
func TestSlackAppSinkSecretsAreWriteOnly(t *testing.T) {
	eachDatabase(t, func(t *testing.T, databaseURL string) {
		e := startModeEnv(t, databaseURL)
		status, created, raw := e.do(t, "admin", "POST", "/sinks",
			`{"kind": "slack_app", "bot_token": "`+botToken+`", "signing_secret": "`+signingSecret+`", "channel": "C0123ABCDE"}`)
		require.Equal(t, http.StatusCreated, status, raw)
		id := created["id"].(string)
		want := map[string]any{"id": id, "kind": "slack_app", "enabled": true, "channel": "C0123ABCDE",
			"bot_token": "[redacted]", "bot_token_set": true, "signing_secret": "[redacted]", "signing_secret_set": true,
			"interactions_url": testReceiverURL + "/slack/interactions/p_1/" + id}
		for k, v := range want {
			assert.Equal(t, v, created[k], k)
		}
		assert.NotContains(t, created, "url", "Slack's API address is the deployment's, not the sink's")

		for _, who := range []string{"owner", "admin", "member"} {
			status, one, raw := e.do(t, who, "GET", "/sinks/"+id, "")
			require.Equal(t, http.StatusOK, status, raw)
			for k, v := range want {
				assert.Equal(t, v, one[k], "%s reads %s", who, k)
			}
			_, _, list := e.do(t, who, "GET", "/sinks", "")
			for _, raw := range []string{raw, list} {
				assert.NotContains(t, raw, botToken, "%s never reads the bot token", who)
				assert.NotContains(t, raw, signingSecret, "%s never reads the signing secret", who)
			}
		}
		sinks := e.mirrorSinks(t)
		require.Len(t, sinks, 1)
		assert.Equal(t, mirror.Sink{ID: id, Kind: "slack_app", Enabled: true, BotToken: botToken, SigningSecret: signingSecret,
			Channel: "C0123ABCDE", Since: sinks[0].Since}, sinks[0], "the data plane gets the secrets")

		// A PATCH naming neither secret, or echoing what it read, keeps both.
		status, patched, raw := e.do(t, "owner", "PATCH", "/sinks/"+id, `{"channel": "#incidents"}`)
		require.Equal(t, http.StatusOK, status, raw)
		assert.Equal(t, "#incidents", patched["channel"])
		status, _, raw = e.do(t, "owner", "PATCH", "/sinks/"+id, `{"bot_token": "[redacted]", "signing_secret": "[redacted]", "enabled": false}`)
		require.Equal(t, http.StatusOK, status, raw)
		sinks = e.mirrorSinks(t)
		assert.Equal(t, botToken, sinks[0].BotToken)
		assert.Equal(t, signingSecret, sinks[0].SigningSecret)
		assert.Equal(t, "#incidents", sinks[0].Channel)
		assert.False(t, sinks[0].Enabled)

		// A new one replaces it.
		status, _, raw = e.do(t, "owner", "PATCH", "/sinks/"+id, `{"bot_token": "xoxb-2222222222-rotated-token"}`)
		require.Equal(t, http.StatusOK, status, raw)
		assert.Equal(t, "xoxb-2222222222-rotated-token", e.mirrorSinks(t)[0].BotToken)
		assert.Equal(t, signingSecret, e.mirrorSinks(t)[0].SigningSecret)

		// A member changes nothing.
		status, _, _ = e.do(t, "member", "PATCH", "/sinks/"+id, `{"channel": "C9999999999"}`)
		assert.Equal(t, http.StatusForbidden, status)
		status, _, _ = e.do(t, "member", "POST", "/sinks",
			`{"kind": "slack_app", "bot_token": "`+botToken+`", "signing_secret": "`+signingSecret+`", "channel": "C0123ABCDE"}`)
		assert.Equal(t, http.StatusForbidden, status)
	})
}

// What Slack would refuse, or what is not a slack_app's, is refused when saved, naming
// the field, and nothing is stored.
func TestSlackAppSinkRefusals(t *testing.T) {
	e := startModeEnv(t, "")
	valid := map[string]string{"kind": "slack_app", "bot_token": botToken, "signing_secret": signingSecret, "channel": "C0123ABCDE"}
	body := func(change map[string]string) string {
		m := map[string]string{}
		for k, v := range valid {
			m[k] = v
		}
		for k, v := range change {
			if v == "-" {
				delete(m, k)
			} else {
				m[k] = v
			}
		}
		b, _ := json.Marshal(m)
		return string(b)
	}
	for _, c := range []struct {
		change map[string]string
		says   string
	}{
		{map[string]string{"bot_token": "-"}, "bot_token is required"},
		{map[string]string{"bot_token": "xoxp-1234567890-user-token"}, "bot_token must be a Slack bot token"},
		{map[string]string{"bot_token": "xoxb-short"}, "bot_token must be a Slack bot token"},
		{map[string]string{"bot_token": "xoxb-1234567890 with spaces"}, "bot_token must be a Slack bot token"},
		{map[string]string{"signing_secret": "-"}, "signing_secret is required"},
		{map[string]string{"signing_secret": "tooshort"}, "signing_secret must be 16 to 128 visible characters"},
		{map[string]string{"signing_secret": "has a space in it somewhere here"}, "signing_secret must be"},
		{map[string]string{"channel": "-"}, "channel is required"},
		{map[string]string{"channel": "general"}, "channel must be"},
		{map[string]string{"channel": "#General Chat"}, "channel must be"},
		{map[string]string{"url": "https://hooks.slack.com/services/x"}, "url is not used by slack_app sinks"},
		{map[string]string{"format": "slack"}, "not used by slack_app sinks"},
		{map[string]string{"kind": "webhook", "url": "https://hooks.example.com/x"}, "bot_token, signing_secret and channel are for slack_app sinks"},
		{map[string]string{"kind": "email", "url": "https://hooks.example.com/x"}, `kind must be "webhook", "chat" or "slack_app"`},
	} {
		status, out, raw := e.do(t, "owner", "POST", "/sinks", body(c.change))
		require.Equal(t, http.StatusBadRequest, status, "%v: %s", c.change, raw)
		code, msg := errorOf(out)
		assert.Equal(t, "invalid_body", code)
		assert.Contains(t, msg, c.says, "%v", c.change)
		assert.NotContains(t, raw, botToken, "the refusal does not repeat a secret")
	}
	_, list, _ := e.do(t, "owner", "GET", "/sinks", "")
	assert.Empty(t, list["sinks"])

	status, created, raw := e.do(t, "owner", "POST", "/sinks", body(nil))
	require.Equal(t, http.StatusCreated, status, raw)
	id := created["id"].(string)
	for _, c := range []struct{ patch, says string }{
		{`{"bot_token": ""}`, "bot_token is required"},
		{`{"signing_secret": "x"}`, "signing_secret must be"},
		{`{"kind": "chat"}`, "kind cannot change"},
	} {
		status, out, raw := e.do(t, "owner", "PATCH", "/sinks/"+id, c.patch)
		require.Equal(t, http.StatusBadRequest, status, "%s: %s", c.patch, raw)
		_, msg := errorOf(out)
		assert.Contains(t, msg, c.says, c.patch)
	}
	assert.Equal(t, botToken, e.mirrorSinks(t)[0].BotToken, "a refused PATCH changes nothing")
}

// slackStandIn is Slack's Web API as far as chat.postMessage goes: it records the calls
// and answers as Slack does, ok or the error given.
func slackStandIn(t *testing.T, slackError string) (apiURL string, calls chan url.Values, tokens chan string) {
	t.Helper()
	calls, tokens = make(chan url.Values, 4), make(chan string, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/chat.postMessage" {
			http.NotFound(w, r)
			return
		}
		b, _ := io.ReadAll(r.Body)
		form, _ := url.ParseQuery(string(b))
		calls <- form
		// slack-go sends the token in the form for chat.postMessage, in the header for
		// other methods: Slack takes either.
		token := form.Get("token")
		if h, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
			token = h
		}
		tokens <- token
		w.Header().Set("Content-Type", "application/json")
		if slackError != "" {
			_, _ = io.WriteString(w, `{"ok": false, "error": "`+slackError+`"}`)
			return
		}
		_, _ = io.WriteString(w, `{"ok": true, "channel": "`+form.Get("channel")+`", "ts": "1700000000.000100"}`)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/api/", calls, tokens
}

// The test button posts a message to the channel with the bot token through Slack's Web
// API (SVC_SLACK_API_URL) and reports what Slack said, as for other destinations.
func TestSlackAppSinkTestMessage(t *testing.T) {
	e := startModeEnv(t, "")
	status, created, raw := e.do(t, "owner", "POST", "/sinks",
		`{"kind": "slack_app", "bot_token": "`+botToken+`", "signing_secret": "`+signingSecret+`", "channel": "C0123ABCDE"}`)
	require.Equal(t, http.StatusCreated, status, raw)
	id := created["id"].(string)

	apiURL, calls, tokens := slackStandIn(t, "")
	e.svc.SlackAPIURL = apiURL
	status, res, raw := e.do(t, "admin", "POST", "/sinks/"+id+"/test", "")
	require.Equal(t, http.StatusOK, status, raw)
	assert.Equal(t, true, res["delivered"], raw)
	assert.EqualValues(t, 200, res["status_code"])
	assert.Equal(t, "", res["error"])
	assert.Contains(t, res["response_excerpt"], `"ok": true`)
	form := <-calls
	assert.Equal(t, "C0123ABCDE", form.Get("channel"))
	assert.Contains(t, form.Get("text"), "Test message from otelcol-svc")
	assert.Equal(t, botToken, <-tokens, "posted with the bot token")

	apiURL, _, _ = slackStandIn(t, "not_in_channel")
	e.svc.SlackAPIURL = apiURL
	status, res, raw = e.do(t, "owner", "POST", "/sinks/"+id+"/test", "")
	require.Equal(t, http.StatusOK, status, raw)
	assert.Equal(t, false, res["delivered"])
	assert.True(t, strings.HasPrefix(res["error"].(string), "Slack answered not_in_channel: the app is not in the channel: invite it"), raw)
	assert.NotContains(t, raw, botToken)

	status, _, _ = e.do(t, "member", "POST", "/sinks/"+id+"/test", "")
	assert.Equal(t, http.StatusForbidden, status)
}
