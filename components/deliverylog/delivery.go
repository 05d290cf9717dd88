package deliverylog

import (
	"errors"
	"regexp"
	"time"
)

// Kinds and states of a delivery.
const (
	KindAgent = "agent"
	KindSink  = "sink"

	StatePending      = "pending"
	StateRetrying     = "retrying"
	StateDelivered    = "delivered"
	StateDeadLettered = "dead_lettered"
)

// Bounds on what one delivery stores.
const (
	MaxRequestBody = 64 << 10
	MaxAnswer      = 4 << 10
	MaxAttempts    = 32
	MaxError       = 1 << 10
)

// Attempt is one try of a delivery.
type Attempt struct {
	At         time.Time `json:"at"`
	StatusCode int       `json:"status_code"`
	Error      string    `json:"error,omitempty"`
	LatencyMS  int64     `json:"latency_ms"`
}

// Delivery is the latest state of one delivery with its attempt log.
type Delivery struct {
	ID               string    `json:"id"`
	Kind             string    `json:"kind"`
	SinkID           string    `json:"sink_id,omitempty"`
	RequestID        string    `json:"request_id,omitempty"`
	State            string    `json:"state"`
	Attempts         int       `json:"attempts"`
	StatusCode       int       `json:"status_code"`
	Error            string    `json:"error,omitempty"`
	LatencyMS        int64     `json:"latency_ms"`
	Records          int       `json:"records"`
	CreatedAt        time.Time `json:"created_at"`
	UpdatedAt        time.Time `json:"updated_at"`
	ReplayOf         string    `json:"replay_of,omitempty"`
	AttemptLog       []Attempt `json:"attempt_log,omitempty"`
	RequestBody      []byte    `json:"request_body,omitempty"`
	RequestTruncated bool      `json:"request_truncated,omitempty"`
	Answer           []byte    `json:"answer,omitempty"`
	AnswerTruncated  bool      `json:"answer_truncated,omitempty"`
}

// ErrInvalidID is returned for a project or delivery id that is not one subject token
// of letters, digits, '-' and '_' (so "*", ">", "." and "../" never reach a subject).
var ErrInvalidID = errors.New("deliverylog: invalid id")

// ErrNotFound is returned by Get for a delivery the project does not have.
var ErrNotFound = errors.New("deliverylog: delivery not found")

var tokenRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

func validToken(s string) bool { return tokenRE.MatchString(s) }

func capBytes(b []byte, n int) ([]byte, bool) {
	if len(b) <= n {
		return append([]byte(nil), b...), false
	}
	return append([]byte(nil), b[:n]...), true
}

func capString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
