package incident

import "time"

// Due says what the ticker does with an incident now. resolveNow: it is open or
// acknowledged and no event came for ResolveAfter (resolve it with ResolveIdle). ok: a
// call is to be made, for reason, in this order: a claim whose process stopped
// heartbeating (HeartbeatAt older than claimTimeout) is retried with its own reason; a
// fresh claim makes nothing due; then the opening call once GroupWait has passed, a
// requested reinvestigation (after the opening call, which investigates anyway), the resolved call of an incident whose opening call was
// made, and an update when new events came, GroupInterval after the last call, unless
// muted or resolved. A call the call budget refused is due again a minute (at most
// GroupInterval) after the refusal.
func Due(i Incident, set Settings, now time.Time, claimTimeout time.Duration) (reason string, resolveNow bool, ok bool) {
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
