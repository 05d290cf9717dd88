package service

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/outbound"
)

var slackSink = mirror.Sink{ID: "s_1", Kind: KindSlackApp, BotToken: "xoxb-1234567890-abcdefghij", SigningSecret: "0123456789abcdef0123456789abcdef", Channel: "C0123ABCDE"}

// Slack's API address is the operator's, but it is still reached through the SSRF-safe
// client: pointed at a private address without SVC_OUTBOUND_ALLOW, nothing is sent.
func TestSlackTestMessageRefusesAPrivateAddress(t *testing.T) {
	srv, got := receiver(t, http.StatusOK, `{"ok": true}`)
	res := SendSlackTestMessage(context.Background(), outbound.NewClient(outbound.Options{}), srv.URL+"/api/", "p_1", slackSink)
	assert.False(t, res.Delivered)
	assert.Contains(t, res.Error, "destination refused: 127.0.0.1 is a loopback address")
	assert.NotContains(t, res.Error, slackSink.BotToken)
	assert.Empty(t, got)
}

// Slack down: the status it answered, not a JSON error.
func TestSlackTestMessageReportsAServerError(t *testing.T) {
	srv, _ := receiver(t, http.StatusServiceUnavailable, "<html>down</html>")
	res := SendSlackTestMessage(context.Background(), outbound.NewClient(outbound.Options{AllowCIDRs: loopback}), srv.URL+"/api/", "p_1", slackSink)
	assert.False(t, res.Delivered)
	assert.Equal(t, http.StatusServiceUnavailable, res.StatusCode)
	assert.Equal(t, "Slack's API answered 503 Service Unavailable", res.Error)
	assert.Equal(t, "<html>down</html>", res.ResponseExcerpt)
}

// The test button sends as a delivery does: the bot token in the Authorization header,
// never in the form body where a proxy's request log would keep it; Slack's answer is
// reported as the other kinds' tests report theirs.
func TestSlackTestMessageSendsTheTokenAsABearer(t *testing.T) {
	srv, got := receiver(t, http.StatusOK, `{"ok": true, "channel": "C0123ABCDE", "ts": "1700000000.000100"}`)
	res := SendSlackTestMessage(context.Background(), outbound.NewClient(outbound.Options{AllowCIDRs: loopback}), srv.URL+"/api/", "p_1", slackSink)
	assert.True(t, res.Delivered, "%+v", res)
	assert.Equal(t, http.StatusOK, res.StatusCode)
	r := <-got
	assert.Equal(t, "Bearer "+slackSink.BotToken, r.header.Get("Authorization"))
	assert.NotContains(t, string(r.body), slackSink.BotToken)
	assert.Contains(t, string(r.body), "channel=C0123ABCDE")
	assert.Contains(t, string(r.body), "project+p_1")
}

// A refusal names Slack's error and says what to do about it.
func TestSlackTestMessageExplainsARefusal(t *testing.T) {
	srv, _ := receiver(t, http.StatusOK, `{"ok": false, "error": "not_in_channel"}`)
	res := SendSlackTestMessage(context.Background(), outbound.NewClient(outbound.Options{AllowCIDRs: loopback}), srv.URL+"/api/", "p_1", slackSink)
	assert.False(t, res.Delivered)
	assert.Equal(t, "Slack answered not_in_channel: "+slackErrorHints["not_in_channel"], res.Error)
	assert.NotContains(t, res.Error, slackSink.BotToken)
}

func TestSlackAPIURLSetting(t *testing.T) {
	u, err := SlackAPIURL("")
	assert.NoError(t, err)
	assert.Equal(t, "https://slack.com/api/", u)
	u, err = SlackAPIURL("http://slack-proxy.internal:8080/api")
	assert.NoError(t, err)
	assert.Equal(t, "http://slack-proxy.internal:8080/api/", u, "slack-go joins method names to it")
	_, err = SlackAPIURL("slack.com/api")
	assert.Error(t, err)
}
