package agentsdk

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// OutputPath is where the receiver takes agent results.
const OutputPath = "/internal/agent-output"

// DefaultMaxAttempts is how many times SendResult tries when the Client sets no count.
const DefaultMaxAttempts = 4

// maxRetryWait caps how long SendResult waits on a Retry-After. A longer one (a monthly
// quota, say) is not worth blocking the agent for: SendResult returns the APIError, with
// RetryAfter set, and the agent decides.
const maxRetryWait = 30 * time.Second

// firstBackoff is the wait before the first retry when the receiver sets no Retry-After;
// it doubles on each retry.
var firstBackoff = 250 * time.Millisecond

// Client sends agent results to an otelcol-svc receiver.
type Client struct {
	// ReceiverURL is the receiver's base URL, e.g. "https://ingest.example.com" or
	// "http://localhost:4318".
	ReceiverURL string
	// APIKey is one of the project's API keys (the one that sends events works).
	APIKey string
	// HTTPClient makes the requests; nil means a client with a 30 s timeout.
	HTTPClient *http.Client
	// MaxAttempts bounds the tries of one SendResult; zero means DefaultMaxAttempts.
	MaxAttempts int
}

var defaultHTTPClient = &http.Client{Timeout: 30 * time.Second}

// APIError is an error answer of the receiver: {"error": {"code", "message"}}.
type APIError struct {
	Status  int    // the HTTP status, e.g. 401
	Code    string // the contract's code, e.g. "invalid_api_key"; empty if the body had none
	Message string // what to do about it
	// RetryAfter is the receiver's Retry-After (429 and 503), zero when absent.
	RetryAfter time.Duration
}

func (e *APIError) Error() string {
	code := e.Code
	if code == "" {
		code = http.StatusText(e.Status)
	}
	return fmt.Sprintf("otelcol-svc receiver answered %d %s: %s", e.Status, code, e.Message)
}

// SendResult posts payload as the result of the call requestID. payload is sent as JSON:
// a json.RawMessage or []byte as it is (it must be valid JSON), anything else through
// encoding/json. Connection errors, 429 and 5xx answers are retried with backoff,
// honouring Retry-After; other failures return at once, as an *APIError when the
// receiver answered.
func (c *Client) SendResult(ctx context.Context, requestID string, payload any) error {
	if c.ReceiverURL == "" || c.APIKey == "" {
		return errors.New("agentsdk: Client needs ReceiverURL and APIKey")
	}
	if requestID == "" {
		return errors.New("agentsdk: requestID is empty; pass the RequestID of the call the result answers")
	}
	body, err := outputBody(requestID, payload)
	if err != nil {
		return err
	}
	attempts := c.MaxAttempts
	if attempts <= 0 {
		attempts = DefaultMaxAttempts
	}
	backoff := firstBackoff
	for attempt := 1; ; attempt++ {
		wait, err := c.post(ctx, requestID, body)
		if err == nil {
			return nil
		}
		if wait < 0 || attempt >= attempts || ctx.Err() != nil {
			return err
		}
		if wait == 0 {
			// Jitter spreads the retries of agents that failed together.
			wait = backoff/2 + rand.N(backoff/2+1)
			backoff *= 2
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

// outputBody builds {"request_id": ..., "payload": ...} with the payload's bytes untouched.
func outputBody(requestID string, payload any) ([]byte, error) {
	var raw []byte
	switch p := payload.(type) {
	case json.RawMessage:
		raw = p
	case []byte:
		raw = p
	default:
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		// Results often quote text with <, > and &; keep it readable in the sinks.
		enc.SetEscapeHTML(false)
		if err := enc.Encode(payload); err != nil {
			return nil, fmt.Errorf("agentsdk: the payload cannot be encoded as JSON: %w", err)
		}
		raw = bytes.TrimRight(buf.Bytes(), "\n")
	}
	if !json.Valid(raw) {
		return nil, errors.New("agentsdk: the payload is not valid JSON")
	}
	id, _ := json.Marshal(requestID)
	out := make([]byte, 0, len(raw)+len(id)+28)
	out = append(out, `{"request_id":`...)
	out = append(out, id...)
	out = append(out, `,"payload":`...)
	out = append(out, raw...)
	return append(out, '}'), nil
}

// post makes one attempt. wait < 0 means the error is final; 0 means retry after the
// backoff; > 0 means retry after that long (Retry-After).
func (c *Client) post(ctx context.Context, requestID string, body []byte) (time.Duration, error) {
	url := strings.TrimRight(c.ReceiverURL, "/") + OutputPath
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return -1, fmt.Errorf("agentsdk: ReceiverURL %q is not usable: %w", c.ReceiverURL, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-API-Key", c.APIKey)
	req.Header.Set("X-Request-Id", requestID)
	req.Header.Set("User-Agent", "otelcol-svc-agentsdk-go")
	hc := c.HTTPClient
	if hc == nil {
		hc = defaultHTTPClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("agentsdk: sending the result of %s: %w", requestID, err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 == 2 {
		return 0, nil
	}
	e := apiError(resp, answer)
	switch {
	case resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode < 500:
		return -1, e
	case e.RetryAfter > maxRetryWait:
		return -1, e
	}
	return e.RetryAfter, e
}

func apiError(resp *http.Response, answer []byte) *APIError {
	e := &APIError{Status: resp.StatusCode}
	var b struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(answer, &b) == nil && b.Error.Code != "" {
		e.Code, e.Message = b.Error.Code, b.Error.Message
	} else {
		// Not the receiver's shape (a proxy's page, say): show its start.
		e.Message = strings.TrimSpace(string(answer))
		if len(e.Message) > 200 {
			e.Message = e.Message[:200] + "..."
		}
		if e.Message == "" {
			e.Message = "the answer had no body"
		}
	}
	if s, err := strconv.Atoi(strings.TrimSpace(resp.Header.Get("Retry-After"))); err == nil && s > 0 {
		e.RetryAfter = time.Duration(s) * time.Second
	}
	return e
}
