package service

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/outbound"
	"github.com/otelcol-svc/otelcol-svc/internal/slackapp"
)

// DefaultSlackAPIURL is Slack's Web API; SVC_SLACK_API_URL replaces it (a stand-in in
// tests, a proxy where one must be used). Only the test button reads it: the data plane's
// slack_app deliveries use the sink exporter's own setting.
const DefaultSlackAPIURL = slackapp.DefaultAPIURL

// slackErrorHints say what to do about Slack's error codes a new app meets.
var slackErrorHints = map[string]string{
	"not_in_channel":    "the app is not in the channel: invite it (/invite @your-app in the channel)",
	"channel_not_found": "no channel with this id or name is visible to the app: check the channel, and invite the app to a private channel",
	"invalid_auth":      "Slack refused the bot token: copy the app's Bot User OAuth Token again (OAuth & Permissions)",
	"not_authed":        "Slack received no bot token",
	"token_revoked":     "the bot token was revoked: reinstall the app and paste its new Bot User OAuth Token",
	"account_inactive":  "the bot token belongs to a deleted app or a deactivated workspace",
	"missing_scope":     "the app lacks the chat:write scope: add it (OAuth & Permissions, Bot Token Scopes) and reinstall the app",
	"is_archived":       "the channel is archived",
}

// SendSlackTestMessage posts the test message to a slack_app sink's channel with
// chat.postMessage at apiURL (Slack's Web API, ending in /), with its bot token, through
// client (which decides which addresses may be reached), and reports what happened as
// SendTestMessage does. It sends as a delivery does (internal/slackapp: the token in the
// Authorization header, never in the form a proxy's log would keep), so a passing test
// means deliveries pass too. Neither the token nor the answer's headers appear in the
// report.
func SendSlackTestMessage(ctx context.Context, client *http.Client, apiURL, projectID string, sink mirror.Sink) SinkTestResult {
	if sink.BotToken == "" || sink.Channel == "" {
		return SinkTestResult{Error: "the destination has no bot token or channel: set them first"}
	}
	start := time.Now()
	a := slackapp.Send(ctx, client, apiURL, sink.BotToken, "otelcol-svc",
		slackapp.Message{Channel: sink.Channel, Text: TestMessageText + " (project " + projectID + ")"})
	r := SinkTestResult{StatusCode: a.Status, LatencyMS: time.Since(start).Milliseconds(),
		ResponseExcerpt: strings.ToValidUTF8(string(a.Body[:min(len(a.Body), excerptBytes)]), "\uFFFD")}
	switch {
	case a.OK():
		r.Delivered = true
	case a.Err != nil:
		r.Error = callError(a.Err)
	case a.Status == http.StatusTooManyRequests:
		r.Error = "Slack rate-limited the app: try again later"
		if secs, err := strconv.Atoi(a.RetryAfter); err == nil && secs >= 0 {
			r.Error = "Slack rate-limited the app: try again in " + (time.Duration(secs) * time.Second).String()
		}
	case a.Status != http.StatusOK:
		r.Error = fmt.Sprintf("Slack's API answered %d %s", a.Status, http.StatusText(a.Status))
	default:
		r.Error = "Slack answered " + a.Error
		if hint := slackErrorHints[a.Error]; hint != "" {
			r.Error += ": " + hint
		}
	}
	return r
}

// SlackAPIURL checks SVC_SLACK_API_URL's value ("" is Slack's own) and returns it ending
// in /, as slack-go joins method names to it.
func SlackAPIURL(raw string) (string, error) {
	if raw == "" {
		return DefaultSlackAPIURL, nil
	}
	if err := outbound.CheckURL(raw); err != nil {
		return "", err
	}
	if !strings.HasSuffix(raw, "/") {
		raw += "/"
	}
	return raw, nil
}
