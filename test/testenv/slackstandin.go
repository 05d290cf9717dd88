package testenv

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Slack stands in for Slack's Web API (chat.postMessage and chat.update), answering as
// Slack does: {"ok": true, "channel", "ts", "message"}, or {"ok": false, "error"} with
// status 200, and 429 with Retry-After when rate limited. It takes only the bot token
// Token, sent as "Authorization: Bearer <token>". Safe for concurrent use.
type Slack struct {
	// Token is the bot token it accepts: configure the slack_app destination with it.
	Token string

	srv *httptest.Server

	mu       sync.Mutex
	n        int
	messages []SlackMessage          // every chat.postMessage taken, in order
	updates  []SlackMessage          // every chat.update taken, in order
	current  map[string]SlackMessage // ts -> the message as last posted or updated
	calls    []SlackCall
	limited  int
	retryIn  int
	refuse   []string
}

// SlackMessage is a message as Slack took it.
type SlackMessage struct {
	Channel  string
	TS       string
	ThreadTS string
	Text     string
	// Blocks are the Block Kit blocks as sent (JSON), nil without.
	Blocks json.RawMessage
}

// SlackCall is one request the stand-in got, whatever it answered.
type SlackCall struct {
	Method string
	Header http.Header
	Form   url.Values
	// Answer is the error it answered ("" for ok; "ratelimited" for a 429).
	Answer string
	// At is when it came.
	At time.Time
}

// NewSlack starts a stand-in with a fresh bot token; it stops with the test.
func NewSlack(t T) *Slack {
	t.Helper()
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	s := &Slack{Token: "xoxb-test-" + hex.EncodeToString(b), current: map[string]SlackMessage{}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

// URL is the API's base, for the sink exporter's slack_api_url.
func (s *Slack) URL() string { return s.srv.URL + "/api/" }

// RateLimit makes the next n calls answer 429 ratelimited with Retry-After: retryAfter
// seconds.
func (s *Slack) RateLimit(n, retryAfter int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.limited, s.retryIn = n, retryAfter
}

// Refuse makes the next calls answer {"ok": false, "error": code}, one per code.
func (s *Slack) Refuse(codes ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refuse = append(s.refuse, codes...)
}

// Messages are the messages posted (roots, replies and plain messages), in order.
func (s *Slack) Messages() []SlackMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]SlackMessage(nil), s.messages...)
}

// Roots are the messages posted outside any thread, in order.
func (s *Slack) Roots() []SlackMessage {
	var out []SlackMessage
	for _, m := range s.Messages() {
		if m.ThreadTS == "" {
			out = append(out, m)
		}
	}
	return out
}

// Updates are the chat.update calls taken, in order.
func (s *Slack) Updates() []SlackMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]SlackMessage(nil), s.updates...)
}

// Replies are the messages posted in the thread of ts, in order.
func (s *Slack) Replies(ts string) []SlackMessage {
	var out []SlackMessage
	for _, m := range s.Messages() {
		if m.ThreadTS == ts {
			out = append(out, m)
		}
	}
	return out
}

// Current is message ts as last posted or updated.
func (s *Slack) Current(ts string) (SlackMessage, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.current[ts]
	return m, ok
}

// Calls are every request it got, in order.
func (s *Slack) Calls() []SlackCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]SlackCall(nil), s.calls...)
}

// maxSlackBody bounds what the stand-in reads of a request.
const maxSlackBody = 4 << 20

func (s *Slack) serve(w http.ResponseWriter, r *http.Request) {
	method, ok := strings.CutPrefix(r.URL.Path, "/api/")
	if !ok || r.Method != http.MethodPost {
		http.NotFound(w, r)
		return
	}
	form, err := readSlackForm(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	call := SlackCall{Method: method, Header: r.Header.Clone(), Form: form, At: time.Now()}
	answer := func(status int, body map[string]any) {
		if e, _ := body["error"].(string); e != "" {
			call.Answer = e
		}
		s.calls = append(s.calls, call)
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(body)
	}
	refuse := func(code string) { answer(http.StatusOK, map[string]any{"ok": false, "error": code}) }
	auth := r.Header.Get("Authorization")
	switch {
	case auth == "":
		refuse("not_authed")
		return
	case auth != "Bearer "+s.Token:
		refuse("invalid_auth")
		return
	case s.limited > 0:
		s.limited--
		w.Header().Set("Retry-After", strconv.Itoa(s.retryIn))
		answer(http.StatusTooManyRequests, map[string]any{"ok": false, "error": "ratelimited"})
		return
	case len(s.refuse) > 0:
		code := s.refuse[0]
		s.refuse = s.refuse[1:]
		refuse(code)
		return
	}
	m := SlackMessage{Channel: form.Get("channel"), TS: form.Get("ts"), ThreadTS: form.Get("thread_ts"), Text: form.Get("text")}
	if b := form.Get("blocks"); b != "" {
		if !json.Valid([]byte(b)) {
			refuse("invalid_blocks")
			return
		}
		m.Blocks = json.RawMessage(b)
	}
	if m.Channel == "" {
		refuse("channel_not_found")
		return
	}
	if m.Text == "" && m.Blocks == nil {
		refuse("no_text")
		return
	}
	switch method {
	case "chat.postMessage":
		s.n++
		m.TS = fmt.Sprintf("1700000000.%06d", s.n)
		if m.ThreadTS != "" {
			if _, ok := s.current[m.ThreadTS]; !ok {
				refuse("thread_not_found")
				return
			}
		}
		s.messages = append(s.messages, m)
	case "chat.update":
		old, ok := s.current[m.TS]
		if !ok || old.Channel != m.Channel {
			refuse("message_not_found")
			return
		}
		m.ThreadTS = old.ThreadTS
		s.updates = append(s.updates, m)
	default:
		refuse("unknown_method")
		return
	}
	s.current[m.TS] = m
	answer(http.StatusOK, map[string]any{"ok": true, "channel": m.Channel, "ts": m.TS,
		"message": map[string]any{"type": "message", "text": m.Text, "ts": m.TS, "thread_ts": m.ThreadTS, "blocks": m.Blocks}})
}

// readSlackForm reads a Web API call's arguments: a form (what slack-go sends for chat
// methods) or a JSON object.
func readSlackForm(r *http.Request) (url.Values, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxSlackBody))
	if err != nil {
		return nil, err
	}
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if ct != "application/json" {
		return url.ParseQuery(string(body))
	}
	var args map[string]any
	if err := json.Unmarshal(body, &args); err != nil {
		return nil, err
	}
	form := url.Values{}
	for k, v := range args {
		if str, ok := v.(string); ok {
			form.Set(k, str)
			continue
		}
		b, _ := json.Marshal(v)
		form.Set(k, string(b))
	}
	return form, nil
}
