package incident

import (
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
	OutboxSince time.Time `json:"-"`
}

// DueState is the incident's due state.
func (i *Incident) DueState() DueState {
	d := DueState{ID: i.ID, Status: i.Status, OpenedAt: i.OpenedAt, LastEventAt: i.LastEventAt, NewEvents: i.NewEvents,
		LastCallAt: i.LastCallAt, OpeningDone: i.OpeningDone, ResolvedCallDone: i.ResolvedCallDone,
		ReinvestigateRequested: i.ReinvestigateRequested, MutedUntil: i.MutedUntil, RefusedAt: i.RefusedAt}
	if i.Pending != nil {
		p := *i.Pending
		d.Pending = &p
	}
	for _, n := range i.Outbox {
		if d.OutboxSince.IsZero() || n.At.Before(d.OutboxSince) {
			d.OutboxSince = n.At
		}
	}
	return d
}

// dueValue is the part of an f-key's JSON DueStateOf decodes: the outbox's notices
// decode to their time alone.
type dueValue struct {
	DueState
	Outbox []struct {
		At time.Time `json:"at"`
	} `json:"outbox,omitempty"`
}

// DueStateOf decodes an f-key's value (an Incident's JSON) into what Due reads, skipping
// the rest (timeline, chat threads, counted sequences, notice texts) without keeping it:
// for a watcher of every project's incidents, which sees every write.
func DueStateOf(value []byte) (DueState, error) {
	var v dueValue
	if err := json.Unmarshal(value, &v); err != nil {
		return DueState{}, err
	}
	if v.ID == "" {
		return DueState{}, errors.New("incident: not an incident")
	}
	for _, n := range v.Outbox {
		if v.OutboxSince.IsZero() || n.At.Before(v.OutboxSince) {
			v.OutboxSince = n.At
		}
	}
	return v.DueState, nil
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
// call budget refused is due again a minute (at most GroupInterval) after the refusal.
func DueOf(i DueState, set Settings, now time.Time, claimTimeout time.Duration) (reason string, resolveNow bool, ok bool) {
	resolveNow = (i.Status == StatusOpen || i.Status == StatusAcknowledged) &&
		!i.LastEventAt.Add(set.ResolveAfter).After(now)
	if p := i.Pending; p != nil {
		if now.Sub(p.HeartbeatAt) > claimTimeout {
			return p.Reason, resolveNow, true
		}
		return "", resolveNow, false
	}
	if !i.RefusedAt.IsZero() && now.Before(i.RefusedAt.Add(min(set.GroupInterval, refusedRetry))) {
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
