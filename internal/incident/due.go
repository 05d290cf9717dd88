package incident

import (
	"bytes"
	"encoding/json"
	"errors"
	"time"
)

// DueState is what Due reads of an incident, and what a watcher of every f-key keeps:
// no timeline, chat threads, counted sequences or notice texts.
type DueState struct {
	ID                     string       `json:"id"`
	Status                 string       `json:"status"`
	OpenedAt               time.Time    `json:"opened_at"`
	LastEventAt            time.Time    `json:"last_event_at"`
	NewEvents              int64        `json:"new_events"`
	LastCallAt             time.Time    `json:"last_call_at,omitzero"`
	OpeningDone            bool         `json:"opening_done,omitempty"`
	ResolvedCallDone       bool         `json:"resolved_call_done,omitempty"`
	ReinvestigateRequested bool         `json:"reinvestigate_requested,omitempty"`
	MutedUntil             time.Time    `json:"muted_until,omitzero"`
	RefusedAt              time.Time    `json:"refused_at,omitzero"`
	Pending                *PendingCall `json:"pending,omitempty"`
	// OutboxSince is when the oldest notice in the outbox was decided (zero: none): a
	// watcher republishes (PendingNotices of the whole incident, Get) once it is a few
	// seconds old.
	OutboxSince time.Time `json:"outbox_since,omitzero"`
}

// DueState is the incident's due state.
func (i *Incident) DueState() DueState {
	d := DueState{ID: i.ID, Status: i.Status, OpenedAt: i.OpenedAt, LastEventAt: i.LastEventAt, NewEvents: i.NewEvents,
		LastCallAt: i.LastCallAt, OpeningDone: i.OpeningDone, ResolvedCallDone: i.ResolvedCallDone,
		ReinvestigateRequested: i.ReinvestigateRequested, MutedUntil: i.MutedUntil, RefusedAt: i.RefusedAt,
		OutboxSince: outboxSince(i.Outbox)}
	if i.Pending != nil {
		p := *i.Pending
		d.Pending = &p
	}
	return d
}

func outboxSince(ns []Notice) time.Time {
	var t time.Time
	for _, n := range ns {
		if t.IsZero() || n.At.Before(t) {
			t = n.At
		}
	}
	return t
}

// DueStateOf decodes an f-key's value (an Incident's JSON) into what Due reads, for a
// watcher of every project's incidents, which sees every write. It reads the value's
// fields up to the first of those it has no use for that are the bulk of an incident
// (chat threads, counted sequences, outbox, timeline), which Incident's JSON writes
// after all it reads, and does not scan the rest.
func DueStateOf(value []byte) (DueState, error) {
	dec := json.NewDecoder(bytes.NewReader(value))
	t, err := dec.Token()
	if err != nil {
		return DueState{}, err
	}
	if t != json.Delim('{') {
		return DueState{}, errNotIncident
	}
	var (
		d    DueState
		skip json.RawMessage
	)
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return DueState{}, err
		}
		key, _ := t.(string)
		var dst any
		switch key {
		case "chat", "applied", "counted", "opened_seq", "outbox", "opened_batch", "timeline", "timeline_dropped", "generation":
			return checked(d)
		case "id":
			dst = &d.ID
		case "status":
			dst = &d.Status
		case "opened_at":
			dst = &d.OpenedAt
		case "last_event_at":
			dst = &d.LastEventAt
		case "new_events":
			dst = &d.NewEvents
		case "last_call_at":
			dst = &d.LastCallAt
		case "opening_done":
			dst = &d.OpeningDone
		case "resolved_call_done":
			dst = &d.ResolvedCallDone
		case "reinvestigate_requested":
			dst = &d.ReinvestigateRequested
		case "muted_until":
			dst = &d.MutedUntil
		case "refused_at":
			dst = &d.RefusedAt
		case "pending":
			dst = &d.Pending
		case "outbox_since":
			dst = &d.OutboxSince
		default:
			dst = &skip
		}
		if err := dec.Decode(dst); err != nil {
			return DueState{}, err
		}
	}
	if _, err := dec.Token(); err != nil {
		return DueState{}, err
	}
	return checked(d)
}

var errNotIncident = errors.New("incident: not an incident")

func checked(d DueState) (DueState, error) {
	if d.ID == "" {
		return DueState{}, errNotIncident
	}
	return d, nil
}

// Due says what the ticker does with an incident now (DueOf of its DueState).
func Due(i Incident, set Settings, now time.Time, claimTimeout time.Duration) (reason string, resolveNow bool, ok bool) {
	return DueOf(i.DueState(), set, now, claimTimeout)
}

// DueOf says what the ticker does with an incident now. resolveNow: it is open or
// acknowledged and no event came for ResolveAfter (resolve it with ResolveIdle). ok: a
// call is to be made, for reason, in this order: a claim whose process stopped
// heartbeating (HeartbeatAt older than claimTimeout) is retried with its own reason; a
// fresh claim makes nothing due; then the opening call once GroupWait has passed, a
// requested reinvestigation (after the opening call, which investigates anyway), the
// resolved call of an incident whose opening call was made, and an update when new
// events came, GroupInterval after the last call, unless muted or resolved. A call the
// call budget refused is due again a minute after the refusal (each attempt is a claim, a
// write of the incident and a budget round trip; the budget's windows are a minute and a
// day).
func DueOf(i DueState, set Settings, now time.Time, claimTimeout time.Duration) (reason string, resolveNow bool, ok bool) {
	resolveNow = (i.Status == StatusOpen || i.Status == StatusAcknowledged) &&
		!i.LastEventAt.Add(set.ResolveAfter).After(now)
	if p := i.Pending; p != nil {
		if now.Sub(p.HeartbeatAt) > claimTimeout {
			return p.Reason, resolveNow, true
		}
		return "", resolveNow, false
	}
	if !i.RefusedAt.IsZero() && now.Before(i.RefusedAt.Add(refusedRetry)) {
		return "", resolveNow, false
	}
	resolved := i.Status == StatusResolved
	switch {
	case !i.OpeningDone && !now.Before(i.OpenedAt.Add(set.GroupWait)):
		return ReasonOpened, resolveNow, true
	case i.ReinvestigateRequested && i.OpeningDone:
		return ReasonReinvestigate, resolveNow, true
	case resolved && i.OpeningDone && !i.ResolvedCallDone:
		return ReasonResolved, resolveNow, true
	case i.OpeningDone && i.NewEvents > 0 && !now.Before(i.LastCallAt.Add(set.GroupInterval)) &&
		!now.Before(i.MutedUntil) && !resolved:
		return ReasonUpdated, resolveNow, true
	}
	return "", resolveNow, false
}
