package service

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/outbound"
)

// DefaultSlackAPIURL is Slack's Web API; SVC_SLACK_API_URL replaces it (a stand-in in
// tests, a proxy where one must be used). Only the test button reads it: the data plane's
// slack_app deliveries use the sink exporter's own setting.
const DefaultSlackAPIURL = "https://slack.com/api/"

// slackAnswerBytes bounds what is read of Slack's answer to a test: chat.postMessage
// answers a few hundred bytes; a larger answer is not Slack's and is cut off.
const slackAnswerBytes = 64 << 10

// answerRecorder keeps the status and the start of the answer slack-go reads, so that a
// Slack test reports them as the other kinds' tests do.
type answerRecorder struct {
	client  *http.Client
	status  int
	excerpt []byte
}

func (a *answerRecorder) Do(req *http.Request) (*http.Response, error) {
	resp, err := a.client.Do(req)
	if err != nil {
		return resp, err
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, slackAnswerBytes))
	_ = resp.Body.Close()
	if err != nil {
		return nil, err
	}
	a.status = resp.StatusCode
	a.excerpt = body[:min(len(body), excerptBytes)]
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp, nil
}

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
// SendTestMessage does. Neither the token nor the answer's headers appear in the report.
func SendSlackTestMessage(ctx context.Context, client *http.Client, apiURL, projectID string, sink mirror.Sink) SinkTestResult {
	if sink.BotToken == "" || sink.Channel == "" {
		return SinkTestResult{Error: "the destination has no bot token or channel: set them first"}
	}
	rec := &answerRecorder{client: client}
	api := slack.New(sink.BotToken, slack.OptionAPIURL(apiURL), slack.OptionHTTPClient(rec))
	start := time.Now()
	_, _, err := api.PostMessageContext(ctx, sink.Channel, slack.MsgOptionText(TestMessageText+" (project "+projectID+")", false))
	r := SinkTestResult{StatusCode: rec.status, LatencyMS: time.Since(start).Milliseconds(),
		ResponseExcerpt: strings.ToValidUTF8(string(rec.excerpt), "\uFFFD")}
	var slackErr slack.SlackErrorResponse
	var status slack.StatusCodeError
	var limited *slack.RateLimitedError
	switch {
	case err == nil:
		r.Delivered = true
	case errors.As(err, &slackErr):
		r.Error = "Slack answered " + slackErr.Err
		if hint := slackErrorHints[slackErr.Err]; hint != "" {
			r.Error += ": " + hint
		}
	case errors.As(err, &limited):
		r.Error = "Slack rate-limited the app: try again in " + limited.RetryAfter.String()
	case errors.As(err, &status):
		r.Error = "Slack's API answered " + status.Status
	case rec.status != 0:
		r.Error = "Slack's answer could not be read: " + err.Error()
	default:
		r.Error = callError(err)
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
