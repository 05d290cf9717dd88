package incident

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
)

// Bucket is the JetStream KV bucket holding every project's incidents.
const Bucket = "svc-incidents"

// Statuses of an incident.
const (
	StatusOpen         = "open"
	StatusAcknowledged = "acknowledged"
	StatusResolved     = "resolved"
)

// Reasons of an agent call about an incident.
const (
	ReasonOpened        = "opened"
	ReasonUpdated       = "updated"
	ReasonResolved      = "resolved"
	ReasonReinvestigate = "reinvestigate"
)

// Actions a person takes on an incident (console, Slack buttons, MCP).
const (
	ActionAcknowledge   = "acknowledge"
	ActionResolve       = "resolve"
	ActionMute          = "mute"
	ActionReinvestigate = "reinvestigate"
)

// Notice types on the project's output stream.
const (
	NoticeOpened   = "incident.opened"
	NoticeUpdated  = "incident.updated"
	NoticeResolved = "incident.resolved"
)

// MaxEventsPerCall bounds the new events one agent call carries.
const MaxEventsPerCall = 100

// MuteFor is how long a mute holds the update calls back.
const MuteFor = time.Hour

// Bounds of what a tenant's events put into an incident: it is one KV value.
const (
	maxTitle       = 200
	maxFingerprint = 256
	maxLastResult  = 500
	maxTimeline    = 200
	maxApplied     = 64
	maxOutbox      = 32
	maxArchives    = 3
	// maxArchivedTimeline: an archived incident keeps its last timeline entries only
	// (its Counted, Outbox and Applied go: only its current generation counts and
	// publishes). What a fingerprint holds is then mostly its current incident.
	maxArchivedTimeline = 20
	maxListKeys         = 1000
	refusedRetry        = time.Minute
	refusedKeyEvery     = 24 * time.Hour
	maxEntryText        = 500
	maxEntryBy          = 200
	maxChatThreads      = 32
	defaultMaxOpen      = MaxOpen
	mergeEventsIn       = time.Minute
	overflowPrint       = OverflowFingerprint
	idPrefix            = "inc_"
	fphLen              = 32
	maxGeneration       = 1 << 30
	maxValue            = 256 << 10
	bucketMaxAge        = 30 * 24 * time.Hour
	pruneEvery          = time.Minute
	reservationHold     = time.Minute
)

// Bounds of the pipeline's incident durations (docs/contract.md#section-6).
const (
	maxGroupWait     = time.Hour
	minGroupInterval = time.Second
	maxGroupInterval = 24 * time.Hour
	minResolveAfter  = time.Second
	maxResolveAfter  = 7 * 24 * time.Hour
	maxReopenWithin  = 7 * 24 * time.Hour
)

// Settings are a pipeline's incident timings.
type Settings struct {
	GroupWait, GroupInterval, ResolveAfter, ReopenWithin time.Duration
}

// SettingsOf parses a pipeline's incident durations, each "" taking its default. An
// error names the field, as the API's invalid_pipeline answer does.
func SettingsOf(p mirror.Pipeline) (Settings, error) {
	var errs []error
	parse := func(field, v string, def, lo, hi time.Duration) time.Duration {
		if v == "" {
			return def
		}
		d, err := time.ParseDuration(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %q is not a duration like \"30s\" or \"5m\"", field, v))
			return def
		}
		if d < lo || d > hi {
			errs = append(errs, fmt.Errorf("%s: %s is outside %s..%s", field, v, fmtDur(lo), fmtDur(hi)))
			return def
		}
		return d
	}
	s := Settings{
		GroupWait:     parse("group_wait", p.GroupWait, mirror.DefaultGroupWait, 0, maxGroupWait),
		GroupInterval: parse("group_interval", p.GroupInterval, mirror.DefaultGroupInterval, minGroupInterval, maxGroupInterval),
		ResolveAfter:  parse("resolve_after", p.ResolveAfter, mirror.DefaultResolveAfter, minResolveAfter, maxResolveAfter),
		ReopenWithin:  parse("reopen_within", p.ReopenWithin, mirror.DefaultReopenWithin, 0, maxReopenWithin),
	}
	return s, errors.Join(errs...)
}

// fmtDur writes a duration as a value the field accepts ("30m", "168h"), not "30m0s":
// Go durations have no days, so a bound said as "7d" could not be typed back.
func fmtDur(d time.Duration) string {
	switch {
	case d == 0:
		return "0"
	case d%time.Hour == 0:
		return strconv.FormatInt(int64(d/time.Hour), 10) + "h"
	case d%time.Minute == 0:
		return strconv.FormatInt(int64(d/time.Minute), 10) + "m"
	case d%time.Second == 0:
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	}
	return d.String()
}

// The open-incident limit as users see it: a project has at most MaxOpen incidents open,
// and the events of any further fingerprint join the incident of OverflowFingerprint,
// titled OverflowOpenTitle. Exported for the dry run, which plays the same rules.
const (
	MaxOpen             = 500
	OverflowFingerprint = "(too many open incidents)"
	OverflowOpenTitle   = "Too many open incidents: events of new fingerprints join this one until some resolve"
)

// Incident is a fingerprint's incident as the bucket stores it.
type Incident struct {
	ID          string    `json:"id"`
	Project     string    `json:"project"`
	Fingerprint string    `json:"fingerprint"`
	Title       string    `json:"title"`
	Status      string    `json:"status"`
	OpenedAt    time.Time `json:"opened_at"`
	UpdatedAt   time.Time `json:"updated_at"`
	LastEventAt time.Time `json:"last_event_at"`
	ResolvedAt  time.Time `json:"resolved_at,omitzero"` // zero while not resolved
	ResolvedBy  string    `json:"resolved_by,omitempty"`
	Events      int64     `json:"events"`
	NewEvents   int64     `json:"new_events"`
	// NewSince is when NewEvents started counting: the next call's events are those
	// from then on.
	NewSince               time.Time    `json:"new_since"`
	Calls                  int          `json:"calls"`
	LastCallAt             time.Time    `json:"last_call_at,omitzero"`
	OpeningDone            bool         `json:"opening_done,omitempty"`
	ResolvedCallDone       bool         `json:"resolved_call_done,omitempty"`
	ReinvestigateRequested bool         `json:"reinvestigate_requested,omitempty"`
	AcknowledgedBy         string       `json:"acknowledged_by,omitempty"`
	AcknowledgedAt         time.Time    `json:"acknowledged_at,omitzero"`
	MutedUntil             time.Time    `json:"muted_until,omitzero"`
	MutedBy                string       `json:"muted_by,omitempty"`
	Pending                *PendingCall `json:"pending,omitempty"`
	LastResult             string       `json:"last_result,omitempty"`
	LastResultAt           time.Time    `json:"last_result_at,omitzero"`
	// RefusedAt is when the call budget last refused a call: the call is tried again
	// refusedRetry later. Zero once a call is made.
	RefusedAt time.Time `json:"refused_at,omitzero"`
	// RefusedRequestID is the request id of the call the budget refused, until a call is
	// made: Claim gives it again to the retry (Pending.RequestID), so a budget spent for
	// hours writes no new c-key per attempt. RefusedReason is the reason its c-key
	// holds, and RefusedKeyAt when it was last written (it is written again when the
	// reason changes, and daily, so that it outlives the bucket's max age).
	RefusedRequestID string    `json:"refused_request_id,omitempty"`
	RefusedReason    string    `json:"refused_reason,omitempty"`
	RefusedKeyAt     time.Time `json:"refused_key_at,omitzero"`
	// OutboxSince is when the oldest notice in Outbox was decided (zero: none), kept
	// with every write. It and every field DueStateOf reads come before Chat: the JSON
	// keeps the struct's order, and DueStateOf stops reading there.
	OutboxSince time.Time             `json:"outbox_since,omitzero"`
	Chat        map[string]ChatThread `json:"chat,omitempty"`
	// Applied are the last batch keys counted, for callers that give no sequences.
	Applied []string `json:"applied,omitempty"`
	// Counted are the stream sequences counted in the last ten minutes, as merged
	// ranges (at most 256): a batch delivered again, alone or with new records, counts
	// only the sequences not among them. They pass to the fingerprint's next generation.
	Counted []SeqRange `json:"counted,omitempty"`
	// OpenedSeq is the first sequence that opened this generation: a batch holding it
	// again gives the opened notice again (as OpenedBatch does for batch keys).
	OpenedSeq uint64 `json:"opened_seq,omitempty"`
	// Outbox holds the notices of the latest changes (at most 32), written in the same
	// compare-and-set as the change: whoever made it publishes them and then clears them
	// (Published); a watcher publishes again what stayed (PendingNotices).
	Outbox []Notice `json:"outbox,omitempty"`
	// OpenedBatch is the batch key that opened this generation: its redelivery (the
	// process died before publishing) gives the opened notice again, under the same
	// MsgID, since the sink posts the chat root only on it.
	OpenedBatch     string  `json:"opened_batch,omitempty"`
	Timeline        []Entry `json:"timeline,omitempty"`
	TimelineDropped int     `json:"timeline_dropped,omitempty"`
	Generation      int     `json:"generation"`
}

// PendingCall is a call claimed and in progress.
type PendingCall struct {
	RequestID   string    `json:"request_id"`
	Reason      string    `json:"reason"`
	ClaimedAt   time.Time `json:"claimed_at"`
	HeartbeatAt time.Time `json:"heartbeat_at"`
	Owner       string    `json:"owner"`
	// EventsSince is when the claim was made: the call carries the events from the
	// incident's NewSince up to it, and the next call those from it on.
	EventsSince time.Time `json:"events_since"`
	// NewEventsAtClaim is NewEvents when claimed: the events counted during the call
	// stay new after it.
	NewEventsAtClaim int64 `json:"new_events_at_claim,omitempty"`
	// ResolvedAt is the incident's resolution the resolved call tells: a reopening (and
	// a resolution again) while it runs leaves the new one to be told.
	ResolvedAt time.Time `json:"resolved_at,omitzero"`
}

// ChatThread is where a slack_app destination posted the incident's root message.
type ChatThread struct {
	Channel  string    `json:"channel"`
	TS       string    `json:"ts"`
	PostedAt time.Time `json:"posted_at"`
}

// Entry is one line of an incident's timeline.
type Entry struct {
	At        time.Time `json:"at"`
	Type      string    `json:"type"` // opened, events, call, result, chat, acknowledged, muted, resolved, reopened, reinvestigate
	By        string    `json:"by,omitempty"`
	Detail    string    `json:"detail,omitempty"`
	RequestID string    `json:"request_id,omitempty"`
	SinkID    string    `json:"sink_id,omitempty"`
	Count     int64     `json:"count,omitempty"`
	Outcome   string    `json:"outcome,omitempty"` // call: delivered|dead_lettered|refused
}

// Counts are an incident's numbers in its public JSON.
type Counts struct {
	Events    int64 `json:"events"`
	NewEvents int64 `json:"new_events"`
	Calls     int   `json:"calls"`
}

// Summary is an incident as the API lists it.
type Summary struct {
	ID             string     `json:"id"`
	Fingerprint    string     `json:"fingerprint"`
	Title          string     `json:"title"`
	Status         string     `json:"status"`
	OpenedAt       time.Time  `json:"opened_at"`
	UpdatedAt      time.Time  `json:"updated_at"`
	ResolvedAt     *time.Time `json:"resolved_at,omitempty"`
	Events         int64      `json:"events"`
	Calls          int        `json:"calls"`
	AcknowledgedBy string     `json:"acknowledged_by"`
	MutedUntil     *time.Time `json:"muted_until,omitempty"`
	LastResult     string     `json:"last_result"`
	Counts         Counts     `json:"counts"`
}

// Detail is an incident as the API shows one: its summary and its timeline.
type Detail struct {
	Summary
	Timeline        []Entry `json:"timeline"`
	TimelineDropped int     `json:"timeline_dropped"`
}

// Summary is the incident's list item.
func (i *Incident) Summary() Summary {
	s := Summary{
		ID: i.ID, Fingerprint: i.Fingerprint, Title: i.Title, Status: i.Status,
		OpenedAt: i.OpenedAt, UpdatedAt: i.UpdatedAt, Events: i.Events, Calls: i.Calls,
		AcknowledgedBy: i.AcknowledgedBy, LastResult: i.LastResult,
		Counts: Counts{Events: i.Events, NewEvents: i.NewEvents, Calls: i.Calls},
	}
	if i.Status == StatusResolved && !i.ResolvedAt.IsZero() {
		t := i.ResolvedAt
		s.ResolvedAt = &t
	}
	if i.MutedUntil.After(time.Now()) {
		t := i.MutedUntil
		s.MutedUntil = &t
	}
	return s
}

// Detail is the incident's summary with its timeline.
func (i *Incident) Detail() Detail {
	tl := i.Timeline
	if tl == nil {
		tl = []Entry{}
	}
	return Detail{Summary: i.Summary(), Timeline: tl, TimelineDropped: i.TimelineDropped}
}

// FingerprintHash is the fingerprint's token in keys and incident ids: the first 16
// bytes of its SHA-256, in hex.
func FingerprintHash(fp string) string {
	h := sha256.Sum256([]byte(fp))
	return hex.EncodeToString(h[:16])
}

// ID is the id of a fingerprint's generation gen.
func ID(fph string, gen int) string { return idPrefix + fph + "_" + strconv.Itoa(gen) }

// ParseID splits an incident id ("inc_<fph>_<generation>") into the fingerprint hash and
// generation. Ids come from URLs and Slack payloads: anything else is rejected.
func ParseID(id string) (fph string, gen int, ok bool) {
	rest, found := strings.CutPrefix(id, idPrefix)
	if !found || len(rest) < fphLen+2 || rest[fphLen] != '_' {
		return "", 0, false
	}
	fph, num := rest[:fphLen], rest[fphLen+1:]
	if !lowerHex(fph) || len(num) > 10 || num[0] == '0' {
		return "", 0, false
	}
	for i := 0; i < len(num); i++ {
		if num[i] < '0' || num[i] > '9' {
			return "", 0, false
		}
	}
	n, err := strconv.Atoi(num)
	if err != nil || n < 1 || n > maxGeneration {
		return "", 0, false
	}
	return fph, n, true
}

func lowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// cut shortens s to at most n bytes on a rune boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "")
}

// cutRunes shortens s to at most n characters.
func cutRunes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := 0
	for p := range s {
		if i == n {
			return s[:p]
		}
		i++
	}
	return s
}
