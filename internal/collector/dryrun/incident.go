package dryrun

import (
	"encoding/json"
	"math"
	"strings"
	"time"

	"github.com/otelcol-svc/otelcol-svc/internal/agentbody"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelineeval"
	"github.com/otelcol-svc/otelcol-svc/internal/incident"
)

// Incident mode's trial plays the incidents' lifecycle over the records' stored times,
// in memory, as the incident processor and its ticker play it over the incident store
// (internal/incident): the same Due decides each call, the same body builder makes it.
// What the store does in a compare-and-set (open, join, reopen, resolve) is done here on
// plain values, by the rules internal/incident documents.

// noClaimTimeout: a trial's calls complete at once, so no claim ever goes stale.
const noClaimTimeout = time.Duration(math.MaxInt64)

// simIncident is one fingerprint's current incident in a trial.
type simIncident struct {
	inc incident.Incident
	// events are the newest new events since the last call (at most
	// incident.MaxEventsPerCall), oldest first, as the next call carries them.
	events [][]byte
	bytes  int
}

// incidentSim is a trial's incident store and ticker.
type incidentSim struct {
	set  incident.Settings
	byFP map[string]*simIncident
	// order is the fingerprints in the order their incidents first opened: calls due at
	// the same moment are made in it, so an answer is the same every time.
	order []string
	open  int // open or acknowledged, the overflow incident aside
}

func newIncidentSim(set incident.Settings) *incidentSim {
	return &incidentSim{set: set, byFP: map[string]*simIncident{}}
}

// incident evaluates one record in incident mode: first what the ticker would have done
// by the record's time, then what the record does (opens or joins, resolves, is context).
func (e *Evaluator) incident(r Record) {
	e.tick(r.Time)
	res, _ := e.eval.Incident(e.ctx, "", e.c, item(r)) // stores nothing: nothing to fail
	if res.Skipped {
		e.fail(r.Seq, res.Step, res.Err)
		return
	}
	for _, f := range []struct {
		step string
		err  error
	}{
		{pipelineeval.StepTrigger, res.TriggerErr}, {pipelineeval.StepResolveWhen, res.ResolveErr},
		{pipelineeval.StepContextFilter, res.FilterErr}, {pipelineeval.StepFingerprint, res.FingerprintErr},
	} {
		if f.err != nil {
			e.fail(r.Seq, f.step, f.err)
		}
	}
	if res.InContext && !e.lim.Count {
		// Kept by fingerprint, for the windows of its incident's calls.
		_ = e.windows.Add(e.ctx, "", res.Fingerprint, r.Seq, res.Body, r.Time, e.c.WindowDuration)
	}
	switch {
	case res.Resolves:
		// A resolving record never opens an incident, even when the trigger matches it
		// too (a trigger of every record, an alert's "resolved" beside its "firing"):
		// it resolves its fingerprint's open incident, if any, and is no event.
		if s := e.sim.byFP[res.Fingerprint]; s != nil && s.inc.Status != incident.StatusResolved {
			e.resolve(s, r.Time, "resolve_when")
		}
	case res.Matched:
		e.ans.Matched++
		e.ans.MatchedSeqs = append(e.ans.MatchedSeqs, r.Seq)
		e.matchedRecord(r, res.Body)
		e.join(res.Fingerprint, res.Title, res.Body, r.Time)
	}
}

// join counts an event into its fingerprint's incident: it joins the open one, reopens
// one resolved within reopen_within, or opens a new one (a new generation after one
// resolved longer ago), the project's 501st open one joining the overflow incident.
func (e *Evaluator) join(fp, title string, body []byte, at time.Time) {
	sim := e.sim
	s := sim.byFP[fp]
	switch {
	case s != nil && s.inc.Status != incident.StatusResolved:
	case fp != incident.OverflowFingerprint && sim.open >= incident.MaxOpen:
		e.join(incident.OverflowFingerprint, incident.OverflowOpenTitle, body, at)
		return
	case s != nil && sim.set.ReopenWithin > 0 && !at.After(s.inc.ResolvedAt.Add(sim.set.ReopenWithin)):
		// The same incident again: its resolution is to be told anew.
		s.inc.Status = incident.StatusOpen
		s.inc.ResolvedAt, s.inc.ResolvedBy, s.inc.ResolvedCallDone = time.Time{}, "", false
		if fp != incident.OverflowFingerprint {
			sim.open++
		}
	default:
		gen := 1
		if s == nil {
			s = &simIncident{}
			sim.byFP[fp] = s
			sim.order = append(sim.order, fp)
		} else {
			gen = s.inc.Generation + 1
			e.held -= s.bytes
			*s = simIncident{}
		}
		s.inc = incident.Incident{ID: incident.ID(incident.FingerprintHash(fp), gen), Fingerprint: fp, Title: incidentTitle(title, fp), Status: incident.StatusOpen,
			OpenedAt: at, UpdatedAt: at, LastEventAt: at, NewSince: at, Generation: gen}
		e.incidents++
		if fp != incident.OverflowFingerprint {
			sim.open++
		}
	}
	s.inc.Events++
	s.inc.NewEvents++
	s.inc.LastEventAt = later(s.inc.LastEventAt, at)
	s.inc.UpdatedAt = later(s.inc.UpdatedAt, at)
	if e.lim.Count {
		return // no call is built: its events need not be kept
	}
	// The newest events, as the processor reads them back for a call.
	if len(s.events) == incident.MaxEventsPerCall {
		s.bytes -= len(s.events[0])
		e.held -= len(s.events[0])
		s.events = append(s.events[:0], s.events[1:]...)
	}
	s.events = append(s.events, body)
	s.bytes += len(body)
	e.held += len(body)
}

func (e *Evaluator) resolve(s *simIncident, at time.Time, by string) {
	s.inc.Status = incident.StatusResolved
	s.inc.ResolvedAt, s.inc.ResolvedBy = at, by
	s.inc.UpdatedAt = later(s.inc.UpdatedAt, at)
	if s.inc.Fingerprint != incident.OverflowFingerprint {
		e.sim.open--
	}
}

// tick plays the ticker up to now: each incident's idle resolution and calls, in the
// order they fall due. now is the zero time for the end of the records: the ticker then
// runs until nothing is left to do, as if no other record came.
func (e *Evaluator) tick(now time.Time) {
	// stuck: incidents Due found nothing to do for when dueAt said, left alone for this
	// tick rather than asked again forever.
	var stuck map[*simIncident]bool
	for {
		var next *simIncident
		var at time.Time
		for _, fp := range e.sim.order {
			s := e.sim.byFP[fp]
			if t, ok := e.dueAt(s); ok && !stuck[s] && (next == nil || t.Before(at)) {
				next, at = s, t
			}
		}
		if next == nil || (!now.IsZero() && at.After(now)) {
			return
		}
		acted := false
		if _, resolveNow, _ := incident.Due(next.inc, e.sim.set, at, noClaimTimeout); resolveNow {
			e.resolve(next, at, "resolve_after")
			acted = true
		}
		if reason, _, ok := incident.Due(next.inc, e.sim.set, at, noClaimTimeout); ok {
			e.incidentCall(next, reason, at)
			acted = true
		}
		if !acted {
			if stuck == nil {
				stuck = map[*simIncident]bool{}
			}
			stuck[next] = true
		}
	}
}

// dueAt is when the ticker next has something to do with an incident: its opening
// call, its idle resolution, its resolved call, or an update call.
func (e *Evaluator) dueAt(s *simIncident) (time.Time, bool) {
	i, set := &s.inc, e.sim.set
	var at time.Time
	found := false
	consider := func(t time.Time) {
		if !found || t.Before(at) {
			at, found = t, true
		}
	}
	resolved := i.Status == incident.StatusResolved
	if !i.OpeningDone {
		consider(i.OpenedAt.Add(set.GroupWait))
	}
	if !resolved {
		consider(i.LastEventAt.Add(set.ResolveAfter))
	}
	if resolved && i.OpeningDone && !i.ResolvedCallDone {
		consider(i.ResolvedAt)
	}
	if i.OpeningDone && i.NewEvents > 0 && !resolved {
		consider(i.LastCallAt.Add(set.GroupInterval))
	}
	return at, found
}

// incidentCall makes an incident's call at a moment: its body is built as the
// incident processor builds it (its incident as claimed, the new events since the last
// call, the context of its fingerprint within window_duration cut to the window budget),
// and the call completes at once.
func (e *Evaluator) incidentCall(s *simIncident, reason string, at time.Time) {
	if reason != incident.ReasonReinvestigate {
		e.call(func() []byte {
			summary, _ := json.Marshal(s.inc.Summary())
			leftOut := int(s.inc.NewEvents) - len(s.events)
			window, _, _ := e.windows.Window(e.ctx, "", s.inc.Fingerprint, at.Add(-e.c.WindowDuration), e.c.WindowMaxEvents)
			kept, _ := agentbody.FitWindow(window, e.c.WindowMaxBytes)
			return agentbody.IncidentCall(summary, reason, s.events, max(leftOut, 0), kept)
		})
	}
	i := &s.inc
	i.Calls++
	i.LastCallAt = at
	i.NewEvents, i.NewSince = 0, at
	switch reason {
	case incident.ReasonOpened:
		i.OpeningDone = true
	case incident.ReasonResolved:
		i.ResolvedCallDone = true
	case incident.ReasonReinvestigate:
		i.ReinvestigateRequested = false // never asked in a trial: no person acts in one
	}
	e.held -= s.bytes
	clear(s.events)
	s.events, s.bytes = s.events[:0], 0
}

// maxTitle is the incident store's bound of a title, in characters.
const maxTitle = 200

// incidentTitle is the title the incident store gives an incident opened with title:
// on one line, else its fingerprint, else "Incident", at most maxTitle characters.
func incidentTitle(title, fp string) string {
	t := strings.Join(strings.Fields(title), " ")
	if t == "" {
		t = strings.TrimSpace(fp)
	}
	if t == "" {
		t = "Incident"
	}
	if r := []rune(t); len(r) > maxTitle {
		t = string(r[:maxTitle])
	}
	return t
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
