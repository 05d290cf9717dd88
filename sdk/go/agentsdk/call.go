package agentsdk

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/otelcol-svc/otelcol-svc/internal/webhooksig"
)

// DefaultMaxBodyBytes bounds what ParseCall and VerifyWebhook read when the Verifier sets
// no limit. It is well above what the collector sends (batch_size records, or one window).
const DefaultMaxBodyBytes = 10 << 20

// Errors of the receiving half. Each is answered with its own status by HTTPStatus.
var (
	// ErrSignature: the request is not signed with the secret, or the signature is too
	// old or malformed. errors.Is also matches the webhooksig error underneath
	// (webhooksig.ErrTimestampTooOld, webhooksig.ErrNoMatchingSig, ...).
	ErrSignature = errors.New("the request's signature does not verify")
	// ErrBody: the body is not a call (or, for VerifyWebhook, not JSON).
	ErrBody = errors.New("the request's body is not valid")
	// ErrBodyTooLarge: the body exceeds the Verifier's MaxBodyBytes.
	ErrBodyTooLarge = errors.New("the request's body is too large")
	// ErrNoSecret: the Verifier has no Secret and does not AllowUnsigned.
	ErrNoSecret = errors.New("no webhook secret configured: set the project's whsec_... signing secret, or AllowUnsigned for local development")
)

// Verifier checks and decodes requests from otelcol-svc. The zero value with a Secret is
// ready to use.
type Verifier struct {
	// Secret is the project's signing secret, "whsec_" and base64 (the prefix is optional).
	Secret string
	// AllowUnsigned, with an empty Secret, accepts requests without checking any
	// signature: for local development against a project without a signing secret.
	// Without it an empty Secret is an error (ErrNoSecret), so a configuration value
	// that failed to load cannot silently switch verification off. A non-empty Secret is
	// always checked.
	AllowUnsigned bool
	// Tolerance is how far webhook-timestamp may be from this machine's clock; it
	// bounds how long a captured request can be replayed. Zero means 5 minutes.
	Tolerance time.Duration
	// MaxBodyBytes bounds the body read; zero means DefaultMaxBodyBytes.
	MaxBodyBytes int64
}

// Call is one call of the collector to the agent, verified and decoded. Exactly one of
// Records (batch mode) and Trigger (window mode) is set.
type Call struct {
	// RequestID names the call; quote it when sending the result (Client.SendResult).
	// Every retry of a call carries the same id, so it also serves to drop duplicates.
	RequestID string
	// Records are the records of a batch-mode call, each byte for byte as sent.
	Records []json.RawMessage
	// Trigger is the record that triggered a window-mode call.
	Trigger json.RawMessage
	// Window holds the records of the trigger's group that came before it, oldest first.
	Window []json.RawMessage
	// Raw is the body as received.
	Raw []byte
}

// Windowed reports whether the call is a window-mode call ({"trigger", "window"}).
func (c *Call) Windowed() bool { return c.Trigger != nil }

// Webhook is one delivery of a webhook sink: an agent's result, forwarded by otelcol-svc.
type Webhook struct {
	// RequestID is the id the agent quoted when it sent the result.
	RequestID string
	// WebhookID names the delivery (the signed webhook-id). It is the same on every
	// attempt and redelivery of a result, so deduplicate by it.
	WebhookID string
	// Payload is the result, byte for byte as the agent sent it: any JSON value.
	Payload json.RawMessage
}

// ParseCall verifies r with secret and decodes it as a call. See Verifier.ParseCall.
func ParseCall(r *http.Request, secret string) (*Call, error) {
	return Verifier{Secret: secret}.ParseCall(r)
}

// VerifyWebhook verifies r with secret and returns the payload. See Verifier.VerifyWebhook.
func VerifyWebhook(r *http.Request, secret string) (*Webhook, error) {
	return Verifier{Secret: secret}.VerifyWebhook(r)
}

// ParseCall reads r's body, verifies its signature and decodes it: a JSON array of
// records (batch mode) or {"trigger": <record>, "window": [<records>]} (window mode).
// The error says what failed; HTTPStatus turns it into the status to answer with.
func (v Verifier) ParseCall(r *http.Request) (*Call, error) {
	body, id, err := v.read(r)
	if err != nil {
		return nil, err
	}
	c, err := decodeCall(body)
	if err != nil {
		return nil, err
	}
	c.RequestID = id
	return c, nil
}

// VerifyWebhook reads r's body and verifies its signature, for a webhook sink's receiver.
// The body may be any JSON value.
func (v Verifier) VerifyWebhook(r *http.Request) (*Webhook, error) {
	body, id, err := v.read(r)
	if err != nil {
		return nil, err
	}
	if !json.Valid(body) {
		return nil, fmt.Errorf("%w: it is not JSON", ErrBody)
	}
	return &Webhook{RequestID: id, WebhookID: r.Header.Get(webhooksig.HeaderID), Payload: body}, nil
}

// read returns the verified body of r and its request id.
func (v Verifier) read(r *http.Request) ([]byte, string, error) {
	if v.Secret == "" && !v.AllowUnsigned {
		return nil, "", ErrNoSecret
	}
	limit := v.MaxBodyBytes
	if limit <= 0 {
		limit = DefaultMaxBodyBytes
	}
	if r.ContentLength > limit {
		return nil, "", fmt.Errorf("%w: %d bytes, the limit is %d", ErrBodyTooLarge, r.ContentLength, limit)
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return nil, "", fmt.Errorf("%w: reading it failed: %v", ErrBody, err)
	}
	if int64(len(body)) > limit {
		return nil, "", fmt.Errorf("%w: more than %d bytes", ErrBodyTooLarge, limit)
	}
	if v.Secret != "" {
		if err := webhooksig.Verify(v.Secret, r.Header, body, time.Now(), v.Tolerance); err != nil {
			if errors.Is(err, webhooksig.ErrInvalidSecret) {
				return nil, "", err
			}
			return nil, "", fmt.Errorf("%w: %w", ErrSignature, err)
		}
	}
	// X-Request-Id is what the receiver expects back. A call's webhook-id carries the
	// same value, so it stands in for a sender that sets only the Standard Webhooks
	// headers.
	id := r.Header.Get("X-Request-Id")
	if id == "" {
		id = r.Header.Get(webhooksig.HeaderID)
	}
	if id == "" {
		return nil, "", fmt.Errorf("%w: the X-Request-Id header is missing, so the result could not be matched to the call", ErrBody)
	}
	return body, id, nil
}

func decodeCall(body []byte) (*Call, error) {
	c := &Call{Raw: body}
	switch first(body) {
	case '[':
		if err := json.Unmarshal(body, &c.Records); err != nil {
			return nil, fmt.Errorf("%w: not a JSON array of records: %v", ErrBody, err)
		}
		if c.Records == nil {
			c.Records = []json.RawMessage{}
		}
	case '{':
		var w struct {
			Trigger json.RawMessage   `json:"trigger"`
			Window  []json.RawMessage `json:"window"`
		}
		if err := json.Unmarshal(body, &w); err != nil {
			return nil, fmt.Errorf(`%w: not a window call {"trigger": ..., "window": [...]}: %v`, ErrBody, err)
		}
		if len(w.Trigger) == 0 || string(w.Trigger) == "null" {
			return nil, fmt.Errorf(`%w: a window call without "trigger"`, ErrBody)
		}
		c.Trigger, c.Window = w.Trigger, w.Window
		if c.Window == nil {
			c.Window = []json.RawMessage{}
		}
	default:
		return nil, fmt.Errorf("%w: expected a JSON array of records or a window call object", ErrBody)
	}
	return c, nil
}

// first returns the first byte of b that is not JSON whitespace, or 0.
func first(b []byte) byte {
	b = bytes.TrimLeft(b, " \t\r\n")
	if len(b) == 0 {
		return 0
	}
	return b[0]
}

// HTTPStatus is the status an agent answers a failed ParseCall or VerifyWebhook with.
// The collector retries 5xx and gives up on other 4xx (they go to the dead-letter
// stream), so a misconfigured agent (500) gets its calls again once it is fixed, while
// forged and malformed requests (401, 400, 413) are not repeated.
func HTTPStatus(err error) int {
	switch {
	case err == nil:
		return http.StatusOK
	case errors.Is(err, ErrSignature):
		return http.StatusUnauthorized
	case errors.Is(err, ErrBodyTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, ErrBody):
		return http.StatusBadRequest
	default:
		return http.StatusInternalServerError
	}
}
