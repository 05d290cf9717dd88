package deliverylog

import (
	"errors"
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
	MaxSeqs        = 10000
)

// Final is how a delivery ended.
type Final struct {
	State string // StateDelivered or StateDeadLettered
	// Answer is the other side's last answer; its first MaxAnswer bytes are kept.
	Answer        []byte
	DeadLetterSeq uint64
	// Error, when set, replaces the last attempt's error: why a delivery ended that
	// never made an attempt (an invalid URL, a replay whose body is gone).
	Error string
}

// Attempt is one try of a delivery; error is always present ("" for a success), as
// docs/contract.md#section-11 names it.
type Attempt struct {
	At         time.Time `json:"at"`
	StatusCode int       `json:"status_code"`
	Error      string    `json:"error"`
	LatencyMS  int64     `json:"latency_ms"`
	// RequestHeaders are the headers the attempt sent, as LogHeaders keeps them: every
	// name, secret values redacted.
	RequestHeaders map[string]string `json:"request_headers,omitempty"`
}

// Delivery is the latest state of one delivery with its attempt log. The keys
// docs/contract.md#section-11 names for a list item (sink_id, request_id, error among them) are always
// present, "" when empty; the others are left out when empty.
type Delivery struct {
	ID         string    `json:"id"`
	Kind       string    `json:"kind"`
	SinkID     string    `json:"sink_id"`
	RequestID  string    `json:"request_id"`
	State      string    `json:"state"`
	Attempts   int       `json:"attempts"`
	StatusCode int       `json:"status_code"`
	Error      string    `json:"error"`
	LatencyMS  int64     `json:"latency_ms"`
	Records    int       `json:"records"`
	CreatedAt  time.Time `json:"created_at"`
	UpdatedAt  time.Time `json:"updated_at"`
	ReplayOf   string    `json:"replay_of,omitempty"`
	// ReplayedBy names the replay that superseded this delivery (Writer.Superseded).
	ReplayedBy string `json:"replayed_by,omitempty"`
	// SinkKind is the destination's kind (webhook, chat) of a sink delivery.
	SinkKind string `json:"sink_kind,omitempty"`
	// Seqs are the raw stream sequences of the records an agent call carried (for a
	// window call, its trigger's): a record is traced to its call by them. At most
	// MaxSeqs are kept.
	Seqs []uint64 `json:"seqs,omitempty"`
	// SourceSeq is the output stream sequence of the result a sink delivery carried.
	SourceSeq uint64 `json:"source_seq,omitempty"`
	// DeadLetterSeq is the dead-letter stream sequence of a dead-lettered delivery: a
	// replay sends what is stored there, whole, even when RequestBody was truncated.
	DeadLetterSeq uint64 `json:"dead_letter_seq,omitempty"`
	// Unmatched marks a sink delivery of a result whose request id was never issued to
	// the project (internal/requestid).
	Unmatched bool `json:"unmatched,omitempty"`
	// TraceID is the W3C trace id the agent call carried in traceparent.
	TraceID string `json:"trace_id,omitempty"`
	// NextAttemptAt is when the next try of a delivery waiting for a retry is due
	// (Writer.NextAttempt); zero, and left out, once that try is made or it has ended.
	NextAttemptAt    time.Time `json:"next_attempt_at,omitzero"`
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

// validToken is ^[A-Za-z0-9_-]{1,128}$ without a regexp: it runs for every event the
// writer takes, on the delivery's hot path.
func validToken(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

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
