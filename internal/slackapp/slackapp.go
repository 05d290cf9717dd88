// Package slackapp is how a slack_app destination is posted to: Slack's Web API
// (chat.postMessage, chat.update) through slack-go, with the bot token in the
// Authorization header, and the Block Kit root message of an incident whose buttons Slack
// posts back to the receiver (root.go).
//
// Send makes one call and says how it went, without retrying: the caller's delivery
// engine (internal/delivery, an Exchange) retries, paces and logs it like any other
// delivery, and gives it the outbound client, so allow_cidrs and the refused addresses
// apply to the API's address as to any destination's.
package slackapp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/slack-go/slack"
)

// DefaultAPIURL is Slack's Web API.
const DefaultAPIURL = "https://slack.com/api/"

// Methods of the Web API this package calls.
const (
	MethodPostMessage = "chat.postMessage"
	MethodUpdate      = "chat.update"
)

// maxAnswer bounds how much of an answer is read. chat.postMessage answers with the
// message it posted, blocks included (tens of KiB at most); an answer cut short would
// not parse, and is taken as a failed attempt.
const maxAnswer = 1 << 20

// Message is one chat.postMessage, or a chat.update of the message TS when it is set.
type Message struct {
	Channel string
	// TS: update this message instead of posting one.
	TS string
	// ThreadTS: post as a reply in this message's thread.
	ThreadTS string
	// Text is mrkdwn, already escaped; with Blocks it is the notification's fallback.
	Text   string
	Blocks []slack.Block
}

// Method is the Web API method that sends m.
func (m Message) Method() string {
	if m.TS != "" {
		return MethodUpdate
	}
	return MethodPostMessage
}

// JSON is m as the delivery log shows it: the method and its arguments (never the token).
func (m Message) JSON() []byte {
	b, err := json.Marshal(struct {
		Method   string        `json:"method"`
		Channel  string        `json:"channel"`
		TS       string        `json:"ts,omitempty"`
		ThreadTS string        `json:"thread_ts,omitempty"`
		Text     string        `json:"text"`
		Blocks   []slack.Block `json:"blocks,omitempty"`
	}{m.Method(), m.Channel, m.TS, m.ThreadTS, m.Text, m.Blocks})
	if err != nil {
		// Blocks built here always encode; a message whose blocks do not is shown without them.
		b, _ = json.Marshal(map[string]string{"method": m.Method(), "channel": m.Channel, "text": m.Text})
	}
	return b
}

// Answer is how one call went.
type Answer struct {
	// Channel and TS name the message posted or updated, when Slack took it.
	Channel string
	TS      string
	// Err: no answer (connection, timeout, a refused address).
	Err error
	// Status is the HTTP status (0: none), RetryAfter its Retry-After header.
	Status     int
	RetryAfter string
	// Error is Slack's refusal in a 200 answer ({"ok": false, "error": ...}), "" when it
	// took the message; Retryable says Slack may take it later.
	Error     string
	Retryable bool
	// Body is what Slack answered; Sent the headers sent (the Authorization among them:
	// a log must redact it).
	Body []byte
	Sent http.Header
}

// OK reports whether Slack took the message.
func (a Answer) OK() bool {
	return a.Err == nil && a.Status == http.StatusOK && a.Error == "" && a.TS != ""
}

// retryable are the refusals worth trying again: Slack's own trouble and its rate limit
// (https://api.slack.com/methods/chat.postMessage#errors). The rest (invalid_auth,
// channel_not_found, not_in_channel, msg_too_long, invalid_blocks, ...) stay until the
// destination is fixed.
var retryable = []string{"ratelimited", "rate_limited", "internal_error", "fatal_error", "service_unavailable", "request_timeout"}

// Send makes the call m needs as the bot token's app, with hc to the API at apiURL (a
// base ending in "/"), sending userAgent.
func Send(ctx context.Context, hc *http.Client, apiURL, token, userAgent string, m Message) Answer {
	rec := &recorder{hc: hc, token: token, userAgent: userAgent}
	api := slack.New(token, slack.OptionAPIURL(apiURL), slack.OptionHTTPClient(rec))
	opts := []slack.MsgOption{slack.MsgOptionText(m.Text, false)}
	if len(m.Blocks) > 0 {
		opts = append(opts, slack.MsgOptionBlocks(m.Blocks...))
	}
	var (
		channel, ts string
		err         error
	)
	if m.TS != "" {
		channel, ts, _, err = api.UpdateMessageContext(ctx, m.Channel, m.TS, opts...)
	} else {
		if m.ThreadTS != "" {
			opts = append(opts, slack.MsgOptionTS(m.ThreadTS))
		}
		// A result's links are the agent's: no preview of a page nobody chose to show.
		opts = append(opts, slack.MsgOptionDisableLinkUnfurl(), slack.MsgOptionDisableMediaUnfurl())
		channel, ts, err = api.PostMessageContext(ctx, m.Channel, opts...)
	}
	a := Answer{Channel: channel, TS: ts, Status: rec.status, Body: rec.body, Sent: rec.sent}
	if rec.status != 0 {
		a.RetryAfter = rec.header.Get("Retry-After")
	}
	var refused slack.SlackErrorResponse
	switch {
	case rec.err != nil:
		a.Err = rec.err
	case rec.status == 0 && err != nil:
		a.Err = err // the request could not be built
	case rec.status != http.StatusOK:
	case errors.As(err, &refused):
		a.Error = refused.Err
		a.Retryable = slices.Contains(retryable, refused.Err)
	case err != nil:
		a.Error, a.Retryable = "the answer is not the Web API's JSON", true
	case ts == "":
		a.Error, a.Retryable = "the answer names no message (no ts)", true
	}
	return a
}

// recorder is slack-go's HTTP client: it sends the token as a bearer token rather than in
// the form (where a proxy's or a server's request log would keep it), and keeps what the
// caller's log needs of the exchange.
type recorder struct {
	hc        *http.Client
	token     string
	userAgent string

	sent   http.Header
	status int
	header http.Header
	body   []byte
	err    error
}

func (r *recorder) Do(req *http.Request) (*http.Response, error) {
	if err := r.moveToken(req); err != nil {
		r.err = err
		return nil, err
	}
	if r.userAgent != "" {
		req.Header.Set("User-Agent", r.userAgent)
	}
	r.sent = req.Header.Clone()
	resp, err := r.hc.Do(req)
	if err != nil {
		r.err = err
		return nil, err
	}
	defer resp.Body.Close()
	r.status, r.header = resp.StatusCode, resp.Header
	r.body, err = io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil && r.status == http.StatusOK {
		r.err = err
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(r.body))
	return resp, nil
}

// moveToken takes the token out of a form body into the Authorization header, which
// Slack reads for every method.
func (r *recorder) moveToken(req *http.Request) error {
	req.Header.Set("Authorization", "Bearer "+r.token)
	if req.Body == nil || !strings.HasPrefix(req.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		return nil
	}
	raw, err := io.ReadAll(req.Body)
	_ = req.Body.Close()
	if err != nil {
		return err
	}
	form, err := url.ParseQuery(string(raw))
	if err != nil {
		return err
	}
	form.Del("token")
	body := form.Encode()
	req.Body = io.NopCloser(strings.NewReader(body))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(body)), nil }
	req.ContentLength = int64(len(body))
	return nil
}
