// Package apierror writes the contract's JSON error shape,
// {"error": {"code": "...", "message": "..."}}, shared by the receiver and the control plane.
package apierror

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// Codes of the contract (section 2). Each goes with one HTTP status.
const (
	InvalidJSON      = "invalid_json"
	InvalidBody      = "invalid_body"
	InvalidPipeline  = "invalid_pipeline"
	MissingAPIKey    = "missing_api_key"
	InvalidAPIKey    = "invalid_api_key"
	InvalidToken     = "invalid_token"
	Forbidden        = "forbidden"
	NotFound         = "not_found"
	MethodNotAllowed = "method_not_allowed"
	Conflict         = "conflict"
	PayloadTooLarge  = "payload_too_large"
	// RecordTooLargeAfterTransforms (413) is a record a pipeline's transforms grew past
	// SVC_MAX_RECORD_BYTES: the record's error in a dry run and a delivery's error.
	RecordTooLargeAfterTransforms = "record_too_large_after_transforms"
	UnsupportedMediaType          = "unsupported_media_type"
	QuotaExceeded                 = "quota_exceeded"
	RateLimited                   = "rate_limited"
	// ResultsLimitExceeded (429) refuses an agent result past one of its project's
	// allowances: results per request id, unmatched results per hour, results storage.
	ResultsLimitExceeded = "results_limit_exceeded"
	// ProjectLimitReached (403) refuses a new project to an account that owns as many as
	// it may (SVC_MAX_PROJECTS_PER_ACCOUNT, or its own from `accounts set-limit`).
	ProjectLimitReached = "project_limit_reached"
	Unavailable         = "unavailable"
	Internal            = "internal"
	// IdempotencyKeyReused (422): an Idempotency-Key sent again with a different request
	// than the one it first came with; nothing of the second request is stored.
	IdempotencyKeyReused = "idempotency_key_reused"
	// InvalidCredentials (401) is a login's wrong email or password. It is not
	// invalid_token, which a client reads as "my token ended, log in again": a client
	// that did that after a failed login would only fail again.
	InvalidCredentials = "invalid_credentials"
	// SignatureInvalid (401) is a push request its source's verification refused
	// (docs/contract.md#section-5): a signature, basic credential or URL token that does
	// not match, is missing, malformed or stale, or a sender-issued secret not set yet.
	SignatureInvalid = "signature_invalid"
	// IncidentResolved (409) refuses acknowledging or muting an incident that is already
	// resolved: nothing is left to acknowledge or silence (resolve and reinvestigate
	// still apply).
	IncidentResolved = "incident_resolved"
	// InsufficientScope (403) refuses a credential that is valid but lacks the scope the
	// request needs (an API key without read on a console read, without results on an
	// agent result, a read-only personal access token on a change); the message names it.
	InsufficientScope = "insufficient_scope"
)

// Error is an API error: a status, a stable code and a message a person can act on.
// RetryAfter, when set, is sent as the Retry-After header (429 and 503).
type Error struct {
	Status     int
	Code       string
	Message    string
	RetryAfter time.Duration
	// Limit, when positive, is sent as "limit" beside code and message: the number a
	// client refused for reaching a limit needs without parsing the message.
	Limit int64
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// New returns an Error.
func New(status int, code, message string) *Error {
	return &Error{Status: status, Code: code, Message: message}
}

// Body is the JSON shape of an error answer.
type Body struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Limit   int64  `json:"limit,omitempty"`
	} `json:"error"`
}

// Write answers the request with e.
func Write(w http.ResponseWriter, e *Error) {
	var b Body
	b.Error.Code = e.Code
	b.Error.Message = e.Message
	b.Error.Limit = e.Limit
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", RetryAfterSeconds(e.RetryAfter))
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(e.Status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // messages quote expressions like "a >= 1"; keep them readable
	_ = enc.Encode(b)
}

// RetryAfterSeconds formats d as the delay-seconds form of Retry-After, at least 1.
func RetryAfterSeconds(d time.Duration) string {
	s := int64((d + time.Second - 1) / time.Second)
	if s < 1 {
		s = 1
	}
	return strconv.FormatInt(s, 10)
}
