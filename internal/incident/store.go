package incident

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
)

// ErrNotFound: no incident of that id in the project.
var ErrNotFound = errors.New("incident not found")

// ErrResolved: the action (acknowledge, mute) makes no sense on a resolved incident.
var ErrResolved = errors.New("incident is resolved")

// Store keeps incidents in the Bucket.
type Store struct {
	kv jetstream.KeyValue
	// maxOpen bounds a project's open incidents (tests lower it).
	maxOpen int
	// maxFingerprints bounds the fingerprints a project keeps (their f-keys).
	maxFingerprints int
	// listKeys bounds the incidents List reads (tests lower it).
	listKeys int
	// last is each f-key's value as this process last wrote or read it, with its
	// revision: a fingerprint's batches mostly come to one process, so Apply starts from
	// it and saves the read; the compare-and-set still decides (a stale one loses and the
	// key is read).
	last lastValues
}

// lastValues is a bounded map of key -> (value, revision).
type lastValues struct {
	mu    sync.Mutex
	m     map[string]lastValue
	bytes int
}

type lastValue struct {
	v   []byte
	rev uint64
}

// maxLastBytes bounds what lastValues holds; past it the map starts over (the next
// Apply of each key reads it again).
const maxLastBytes = 8 << 20

func (l *lastValues) get(key string) (lastValue, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	v, ok := l.m[key]
	return v, ok
}

func (l *lastValues) set(key string, v []byte, rev uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if old, ok := l.m[key]; ok {
		l.bytes -= len(key) + len(old.v)
	}
	if l.m == nil || l.bytes+len(key)+len(v) > maxLastBytes {
		l.m, l.bytes = map[string]lastValue{}, 0
	}
	l.m[key] = lastValue{v: v, rev: rev}
	l.bytes += len(key) + len(v)
}

func (l *lastValues) drop(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if old, ok := l.m[key]; ok {
		l.bytes -= len(key) + len(old.v)
		delete(l.m, key)
	}
}

// DefaultMaxBytes is the bucket's size when Open is given none: every project's incidents
// together. The bucket refuses writes past it (a KV bucket discards new values), so the
// per-project bounds keep it from being reached; it guards the servers' disks.
const DefaultMaxBytes int64 = 1 << 30

// DefaultMaxFingerprints is how many fingerprints a project keeps when Open is given no
// other number: past it, events of a new fingerprint join the project's overflow
// incident until a kept one's key expires (30 days after its last change).
const DefaultMaxFingerprints = 2000

// Option sets how Open makes the bucket and the store.
type Option func(*options)

type options struct {
	maxBytes        int64
	maxFingerprints int
}

// WithMaxBytes sets the bucket's size in bytes (a component's configuration); <= 0 is
// DefaultMaxBytes. A bucket of another size is changed to it.
func WithMaxBytes(n int64) Option { return func(o *options) { o.maxBytes = n } }

// WithMaxFingerprints sets how many fingerprints a project keeps; <= 0 is
// DefaultMaxFingerprints.
func WithMaxFingerprints(n int) Option { return func(o *options) { o.maxFingerprints = n } }

// Open binds to the bucket, creating it when missing (history 1, 30 days max age,
// DefaultMaxBytes unless WithMaxBytes says otherwise).
func Open(ctx context.Context, js jetstream.JetStream, replicas int, opts ...Option) (*Store, error) {
	o := options{}
	for _, opt := range opts {
		opt(&o)
	}
	if o.maxBytes <= 0 {
		o.maxBytes = DefaultMaxBytes
	}
	if o.maxFingerprints <= 0 {
		o.maxFingerprints = DefaultMaxFingerprints
	}
	kv, err := js.KeyValue(ctx, Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket: Bucket, Description: "otelcol-svc incidents: each fingerprint's current one, archived ones, calls",
			History: 1, TTL: bucketMaxAge, MaxValueSize: maxValue, MaxBytes: o.maxBytes, Storage: jetstream.FileStorage,
			Replicas: max(replicas, 1),
		})
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = js.KeyValue(ctx, Bucket)
		}
	}
	if err == nil {
		err = resize(ctx, js, kv, o.maxBytes)
	}
	if err != nil {
		return nil, fmt.Errorf("incident bucket %s: %w", Bucket, err)
	}
	return &Store{kv: kv, maxOpen: defaultMaxOpen, maxFingerprints: o.maxFingerprints, listKeys: maxListKeys}, nil
}

// resize gives a bucket made before (without a size, or with another) the size asked
// for; the rest of its configuration stays.
func resize(ctx context.Context, js jetstream.JetStream, kv jetstream.KeyValue, maxBytes int64) error {
	st, err := kv.Status(ctx)
	if err != nil {
		return err
	}
	bs, ok := st.(*jetstream.KeyValueBucketStatus)
	if !ok {
		return nil
	}
	cfg := bs.StreamInfo().Config
	if cfg.MaxBytes == maxBytes {
		return nil
	}
	cfg.MaxBytes = maxBytes
	_, err = js.UpdateStream(ctx, cfg)
	return err
}

// KV is the bucket.
func (s *Store) KV() jetstream.KeyValue { return s.kv }

func fKey(project, fph string) string { return project + ".f." + fph }
func rKey(project, id string) string  { return project + ".r." + id }
func cKey(project, req string) string { return project + ".c." + req }
func nKey(project string) string      { return project + ".n" }
func kKey(project string) string      { return project + ".k" }

// Join is one fingerprint's events of one batch, as the incident processor counts them.
type Join struct {
	Fingerprint string
	// Seqs are the stream sequences of these events. Given (or ResolveSeq), they decide
	// what counts: only the sequences the incident has not counted in the last ten
	// minutes (Events is then their number), so a batch delivered again, alone or mixed
	// with new records, counts nothing twice. BatchKey is not used then.
	Seqs []uint64
	// ResolveSeq is the stream sequence of the resolve_when record (0: not known); one
	// counted before resolves nothing again. Without it, with Seqs, a Resolve whose
	// events were all counted before is taken as delivered before.
	ResolveSeq uint64
	// Covered are the runs of consecutive stream sequences of the whole batch (Runs of
	// its sorted sequences, every fingerprint's): remembered as counted with Seqs, so
	// that consecutive batches make one range. Only sequences the batch held may be in
	// them: one left out and delivered later would not count.
	Covered [][2]uint64
	// BatchKey, for callers without sequences, is stable across redeliveries of the
	// batch (e.g. the first stream sequence of these events): a redelivered batch is
	// counted once while it is among the incident's last 64.
	BatchKey string
	Events   int64  // matching events of this fingerprint in the batch
	Title    string // from the first event, used when opening
	// Resolve: a resolve_when event of this fingerprint came in the batch, after the
	// events.
	Resolve bool
	At      time.Time
}

// JoinResult is what Apply did. Notices are to be published (Publish).
type JoinResult struct {
	Incident                           Incident
	Opened, Reopened, Resolved, Joined bool
	Notices                            []Notice
}

// errNeedSlot: the update would open an incident and no open slot is reserved for it.
var errNeedSlot = errors.New("incident: opening needs an open slot")

// errNeedKnown: the update would open a fingerprint's first incident and the project has
// not admitted the fingerprint among those it keeps.
var errNeedKnown = errors.New("incident: a new fingerprint needs a place among the project's")

// errNotCurrent: the f-key holds another generation than the id asked for.
var errNotCurrent = errors.New("incident: not the current generation")

// overflowHash is the fingerprint hash of the project's overflow incident.
var overflowHash = FingerprintHash(overflowPrint)

// Apply counts a batch's events of one fingerprint into its incident. With Events > 0
// it opens one (no incident yet, or the last one resolved longer than ReopenWithin ago:
// that one is archived and generation n+1 opens), reopens the resolved one (within
// ReopenWithin) or joins the open one. Resolve then resolves the open incident
// (ResolvedBy "resolve_when"); with no open incident it changes nothing. With Seqs
// only the sequences not counted in the last ten minutes count (a ResolveSeq counted
// before resolves nothing); without, a BatchKey already applied changes nothing. A
// fingerprint that would open the project's 501st open incident, or be its 2,001st
// kept fingerprint, joins its overflow incident instead. The notices are also in the
// incident's outbox (Published clears them).
func (s *Store) Apply(ctx context.Context, project string, set Settings, j Join) (JoinResult, error) {
	if !streams.ValidProjectID(project) {
		return JoinResult{}, fmt.Errorf("incident: invalid project id %q", project)
	}
	if len(j.Seqs) > 0 || j.ResolveSeq != 0 {
		j.Seqs = sortedSeqs(j.Seqs)
		j.Events = int64(len(j.Seqs))
	} else {
		j.Seqs = nil
	}
	if j.Events < 0 {
		j.Events = 0
	}
	if j.Events == 0 && !j.Resolve {
		return JoinResult{}, nil
	}
	if j.At.IsZero() {
		j.At = time.Now()
	}
	j.At = j.At.UTC()
	fph := FingerprintHash(j.Fingerprint)
	return s.apply(ctx, project, set, j, fph, fph == overflowHash)
}

func (s *Store) apply(ctx context.Context, project string, set Settings, j Join, fph string, exempt bool) (JoinResult, error) {
	key := fKey(project, fph)
	bySeq := j.Seqs != nil
	batch := ""
	if !bySeq {
		batch = cut(j.BatchKey, 128)
	}
	reserved, admitted := false, false
	for {
		var res JoinResult
		inc, err := s.updateGuessed(ctx, key, func(cur *Incident, exists, guessed bool) (bool, error) {
			res = JoinResult{}
			n, fresh, resolve := j.Events, j.Seqs, j.Resolve
			switch {
			case bySeq && exists:
				fresh = unseen(cur.Counted, j.Seqs)
				n = int64(len(fresh))
				if j.ResolveSeq != 0 {
					resolve = resolve && !seen(cur.Counted, j.ResolveSeq)
				} else if len(j.Seqs) > 0 && len(fresh) == 0 {
					resolve = false
				}
				// However long after: the opening's sequence names this generation's
				// opening batch.
				if _, in := slices.BinarySearch(j.Seqs, cur.OpenedSeq); in && cur.OpenedSeq != 0 {
					res.Notices = append(res.Notices, cur.openedAgain()...)
				}
			case exists && batch != "" && slices.Contains(cur.Applied, batch):
				if cur.OpenedBatch == batch {
					res.Notices = append(res.Notices, cur.openedAgain()...)
				}
				return false, nil
			}
			changed := false
			if n > 0 {
				switch {
				case exists && cur.Status != StatusResolved:
					cur.join(j.At, n)
					res.Joined, changed = true, true
				case exists && set.ReopenWithin > 0 && !j.At.After(cur.ResolvedAt.Add(set.ReopenWithin)):
					if !exempt && !reserved {
						return false, errNeedSlot
					}
					res.Notices = append(res.Notices, cur.reopen(j.At, n))
					res.Reopened, changed = true, true
				default:
					if !exists && !exempt && !admitted {
						return false, errNeedKnown
					}
					if !exempt && !reserved {
						return false, errNeedSlot
					}
					gen := 1
					var counted []SeqRange
					var unpublished []Notice
					if exists {
						if guessed {
							// Archives are written from what the key holds only.
							return false, errGuessed
						}
						// Archived before the f-key names the new generation, so the old
						// id stays readable (Get). A Put repeated by a lost round writes
						// the same incident again.
						gen = cur.Generation + 1
						counted, unpublished = cur.Counted, cur.Outbox
						if err := s.archive(ctx, project, cur); err != nil {
							return false, err
						}
					}
					oj := j
					oj.Events = n
					*cur = open(project, fph, gen, oj)
					// The sequences stay counted across generations: a batch of the old
					// one delivered again does not count into the new one.
					cur.Counted = counted
					if bySeq && len(fresh) > 0 {
						cur.OpenedSeq = fresh[0]
					}
					cur.OpenedBatch = batch
					// The old generation's notices not yet published go out with the
					// opening, and stay in the new outbox until published: no watcher
					// reads archives, and this process may die before publishing them.
					res.Notices = append(res.Notices, unpublished...)
					cur.Outbox = slices.Clone(unpublished)
					res.Notices = append(res.Notices, cur.notice(NoticeOpened, "opened", "", j.At,
						"Incident opened: "+cur.Title+" ("+events(cur.Events)+")"))
					res.Opened, changed = true, true
				}
			}
			if resolve && (cur.Status == StatusOpen || cur.Status == StatusAcknowledged) {
				res.Notices = append(res.Notices, cur.resolve(j.At, "resolve_when",
					"Resolved (resolve_when matched): "+cur.Title))
				res.Resolved, changed = true, true
			}
			if changed && bySeq {
				add := fresh
				if j.ResolveSeq != 0 {
					add = sortedSeqs(append(slices.Clone(fresh), j.ResolveSeq))
				}
				cur.Counted = countRuns(cur.Counted, add, j.Covered, j.At)
			}
			if changed && batch != "" {
				cur.Applied = append(cur.Applied, batch)
				if n := len(cur.Applied) - maxApplied; n > 0 {
					cur.Applied = slices.Clone(cur.Applied[n:])
				}
			}
			return changed, nil
		})
		if errors.Is(err, errNeedKnown) {
			ok, err := s.admit(ctx, project, fph, j.At)
			if err != nil {
				return JoinResult{}, err
			}
			if !ok {
				return s.apply(ctx, project, set, overflowJoin(j, fph, "Too many fingerprints: events of new fingerprints join this one"), overflowHash, true)
			}
			admitted = true
			continue
		}
		if errors.Is(err, errNeedSlot) {
			ok, err := s.reserve(ctx, project, fph, j.At, false)
			if err != nil {
				return JoinResult{}, err
			}
			if !ok {
				return s.apply(ctx, project, set, overflowJoin(j, fph, OverflowOpenTitle), overflowHash, true)
			}
			reserved = true
			continue
		}
		if err != nil {
			// A slot reserved stays: another process may be opening the same
			// fingerprint with it. If none is, the next prune frees it.
			return JoinResult{}, err
		}
		res.Incident = inc
		switch {
		case exempt:
		case res.Resolved || reserved && inc.Status == StatusResolved:
			s.releaseQuietly(ctx, project, fph)
		case res.Opened || res.Reopened:
			// A process that resolved this fingerprint meanwhile may have released
			// the slot after our reservation: the incident open now holds one.
			// On failure the set undercounts by one until this incident resolves.
			_, _ = s.reserve(ctx, project, fph, j.At, true)
		}
		return res, nil
	}
}

// openedAgain is the opened notice of this generation, as it was first given, for a
// redelivery of the batch that opened it, while it is still in the outbox: its process
// may have died before publishing it (the sink posts the chat root only on it). Once
// published it is not given again: a redelivery past the output stream's duplicate
// window would store it a second time (chat webhooks would post the opening again).
func (i *Incident) openedAgain() []Notice {
	for _, n := range i.Outbox {
		if n.Type == NoticeOpened && n.Incident.ID == i.ID {
			return []Notice{n}
		}
	}
	return nil
}

// archive writes the resolved incident to its r-key, unless a newer copy is there: a
// round that lost its compare-and-set may come late with an older one.
func (s *Store) archive(ctx context.Context, project string, inc *Incident) error {
	a := *inc
	a.archived()
	b, err := marshalBounded(&a)
	if err != nil {
		return err
	}
	_, err = streams.UpdateKV(ctx, s.kv, rKey(project, inc.ID), func(old []byte, exists bool) ([]byte, error) {
		var have Incident
		if exists && json.Unmarshal(old, &have) == nil && newer(have, *inc) {
			return nil, streams.ErrKVUnchanged
		}
		return b, nil
	})
	if err != nil {
		return fmt.Errorf("archive %s: %w", inc.ID, err)
	}
	// A fingerprint keeps its newest maxArchives archives. A purge lost leaves one
	// more until the bucket's max age.
	if fph, gen, ok := ParseID(inc.ID); ok && gen > maxArchives {
		_ = s.kv.Purge(ctx, rKey(project, ID(fph, gen-maxArchives)))
	}
	return nil
}

// archived cuts an incident to what its archive keeps: the last maxArchivedTimeline
// timeline entries (the dropped ones counted in TimelineDropped), and none of what only
// the current generation uses (counted sequences, batch keys, outbox: an archive gives
// no notices, and the next generation's outbox took the unpublished ones).
func (i *Incident) archived() {
	if n := len(i.Timeline) - maxArchivedTimeline; n > 0 {
		i.Timeline = slices.Clone(i.Timeline[n:])
		i.TimelineDropped += n
	}
	i.Counted, i.Outbox, i.Applied, i.OpenedSeq, i.OpenedBatch = nil, nil, nil, 0, ""
}

// newer: a is a later state of the same incident than b.
func newer(a, b Incident) bool {
	if c := a.UpdatedAt.Compare(b.UpdatedAt); c != 0 {
		return c > 0
	}
	return len(a.Timeline)+a.TimelineDropped > len(b.Timeline)+b.TimelineDropped
}

// overflowJoin is j redirected to the project's overflow incident, titled (when it
// opens) by why. Its batch key names the fingerprint: two fingerprints' batch keys may
// be equal. Sequences are the stream's, one record each: they stay as they are. The
// batch's covered runs do not go along: they hold other fingerprints' sequences, which
// may come to the overflow incident next (another fingerprint past the limit in the same
// batch) and would count as seen there.
func overflowJoin(j Join, fph, title string) Join {
	o := j
	o.Fingerprint = overflowPrint
	o.Title = title
	o.Resolve = false
	o.Covered = nil
	if j.BatchKey != "" {
		o.BatchKey = fph[:8] + ":" + j.BatchKey
	}
	return o
}

// open is generation gen of the fingerprint, opened by j.
func open(project, fph string, gen int, j Join) Incident {
	title := strings.TrimSpace(strings.Join(strings.Fields(j.Title), " "))
	if title == "" {
		title = strings.TrimSpace(j.Fingerprint)
	}
	if title == "" {
		title = "Incident"
	}
	i := Incident{
		ID: ID(fph, gen), Project: project, Fingerprint: cut(j.Fingerprint, maxFingerprint),
		Title: cutRunes(title, maxTitle), Status: StatusOpen,
		OpenedAt: j.At, UpdatedAt: j.At, LastEventAt: j.At,
		Events: j.Events, NewEvents: j.Events, NewSince: j.At, Generation: gen,
	}
	i.add(Entry{At: j.At, Type: "opened", Count: j.Events})
	return i
}

func (i *Incident) join(at time.Time, n int64) {
	i.Events += n
	i.NewEvents += n
	i.LastEventAt = later(i.LastEventAt, at)
	i.UpdatedAt = later(i.UpdatedAt, at)
	i.add(Entry{At: at, Type: "events", Count: n})
}

// reopen opens the resolved incident again: it is happening again, so whoever
// acknowledged it has not seen this, and its resolution is to be told anew.
func (i *Incident) reopen(at time.Time, n int64) Notice {
	i.Status = StatusOpen
	i.ResolvedAt, i.ResolvedBy, i.ResolvedCallDone = time.Time{}, "", false
	i.AcknowledgedBy, i.AcknowledgedAt = "", time.Time{}
	i.Events += n
	i.NewEvents += n
	i.LastEventAt = later(i.LastEventAt, at)
	i.UpdatedAt = later(i.UpdatedAt, at)
	i.add(Entry{At: at, Type: "reopened", Count: n})
	// incident.updated, not opened: the chat root of this id exists already.
	return i.notice(NoticeUpdated, "reopened", "", at, "Incident reopened: "+i.Title+" ("+events(i.Events)+")")
}

func (i *Incident) resolve(at time.Time, by, text string) Notice {
	i.Status = StatusResolved
	i.ResolvedAt, i.ResolvedBy = at, by
	i.UpdatedAt = later(i.UpdatedAt, at)
	i.add(Entry{At: at, Type: "resolved", By: by})
	return i.notice(NoticeResolved, "resolved", by, at, text)
}

// add appends e to the timeline: an "events" entry within a minute of the last one,
// also "events", is counted into it, and the oldest entries beyond maxTimeline go.
func (i *Incident) add(e Entry) {
	e.At = e.At.UTC()
	if n := len(i.Timeline); e.Type == "events" && n > 0 {
		last := &i.Timeline[n-1]
		if last.Type == "events" && !e.At.Before(last.At) && e.At.Sub(last.At) < mergeEventsIn {
			last.Count += e.Count
			return
		}
	}
	i.Timeline = append(i.Timeline, e)
	if n := len(i.Timeline) - maxTimeline; n > 0 {
		i.Timeline = slices.Clone(i.Timeline[n:])
		i.TimelineDropped += n
	}
}

// notice is a transition just entered into the timeline.
// It goes into the outbox in the same write as the change.
func (i *Incident) notice(typ, transition, by string, at time.Time, text string) Notice {
	n := Notice{Type: typ, Transition: transition, By: by, Incident: i.Summary(), Text: text, At: at,
		Seq: len(i.Timeline) + i.TimelineDropped}
	i.Outbox = append(i.Outbox, n)
	if k := len(i.Outbox) - maxOutbox; k > 0 {
		i.Outbox = slices.Clone(i.Outbox[k:])
	}
	return n
}

func events(n int64) string {
	if n == 1 {
		return "1 event"
	}
	return strconv.FormatInt(n, 10) + " events"
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// ResolveIdle resolves the fingerprint's incident when it is open or acknowledged and
// no event came for ResolveAfter (ResolvedBy "resolve_after"); else it changes nothing
// and returns no notices.
func (s *Store) ResolveIdle(ctx context.Context, project, fph string, set Settings, now time.Time) (Incident, []Notice, error) {
	if !validKeys(project, fph) {
		return Incident{}, nil, ErrNotFound
	}
	now = now.UTC()
	var notices []Notice
	inc, err := s.update(ctx, fKey(project, fph), func(cur *Incident, exists bool) (bool, error) {
		notices = nil
		if !exists || cur.Status == StatusResolved || cur.LastEventAt.Add(set.ResolveAfter).After(now) {
			return false, nil
		}
		notices = append(notices, cur.resolve(now, "resolve_after",
			"Resolved (no events for "+fmtDur(set.ResolveAfter)+"): "+cur.Title))
		return true, nil
	})
	if err != nil {
		return Incident{}, nil, err
	}
	if len(notices) > 0 && fph != overflowHash {
		s.releaseQuietly(ctx, project, fph)
	}
	return inc, notices, nil
}

// callKey is a c-key's value.
type callKey struct {
	IncidentID string `json:"incident_id"`
	Reason     string `json:"reason"`
}

// Claim takes the call Due says is to be made for reason, as a compare-and-set: of
// processes claiming at once one gets ok. A stale claim (its process stopped
// heartbeating) is taken over with its request id and reason (the retry is the same
// call), and a call the budget refused is retried under the refused call's request id
// (RefusedRequestID): the caller makes the call with the returned Pending's RequestID,
// not necessarily its own. The c-key is written before Claim returns (a refused call's
// retry writes it again only when its reason changed, or a day after it was written).
// ok is false when another process holds a fresh claim or no call is due for reason.
func (s *Store) Claim(ctx context.Context, project, fph string, reason, requestID, owner string, now time.Time, set Settings, claimTimeout time.Duration) (Incident, bool, error) {
	if !validKeys(project, fph) {
		return Incident{}, false, ErrNotFound
	}
	if !validToken(requestID) {
		return Incident{}, false, fmt.Errorf("incident: request id %q cannot be a key", requestID)
	}
	now = now.UTC()
	claimed, writeKey := false, true
	inc, err := s.update(ctx, fKey(project, fph), func(cur *Incident, exists bool) (bool, error) {
		claimed, writeKey = false, true
		if !exists {
			return false, nil
		}
		due, _, ok := Due(*cur, set, now, claimTimeout)
		if !ok || due != reason {
			return false, nil
		}
		if p := cur.Pending; p != nil {
			p.Owner, p.ClaimedAt, p.HeartbeatAt = cut(owner, maxEntryBy), now, now
		} else {
			id := requestID
			if cur.RefusedRequestID != "" {
				// The refused call again: its c-key is there, unless it holds another
				// reason or is getting old.
				id = cur.RefusedRequestID
				writeKey = cur.RefusedReason != reason || now.Sub(cur.RefusedKeyAt) >= refusedKeyEvery
				if writeKey {
					cur.RefusedReason, cur.RefusedKeyAt = reason, now
				}
			}
			cur.Pending = &PendingCall{RequestID: id, Reason: reason, ClaimedAt: now, HeartbeatAt: now,
				Owner: cut(owner, maxEntryBy), EventsSince: now, NewEventsAtClaim: cur.NewEvents}
			if reason == ReasonResolved {
				cur.Pending.ResolvedAt = cur.ResolvedAt
			}
		}
		claimed = true
		return true, nil
	})
	if err != nil || !claimed {
		return inc, false, err
	}
	if !writeKey {
		return inc, true, nil
	}
	b, _ := json.Marshal(callKey{IncidentID: inc.ID, Reason: inc.Pending.Reason})
	if _, err := s.kv.Put(ctx, cKey(project, inc.Pending.RequestID), b); err != nil {
		// The claim stands and goes stale; whoever takes it over writes the c-key.
		return inc, false, fmt.Errorf("incident: record call %s: %w", inc.Pending.RequestID, err)
	}
	return inc, true, nil
}

// Heartbeat keeps this process's claim fresh while the call runs. ErrNotFound: the
// claim is no longer held by requestID (completed, or taken over and completed).
func (s *Store) Heartbeat(ctx context.Context, project, fph, requestID string, now time.Time) error {
	if !validKeys(project, fph) {
		return ErrNotFound
	}
	held := false
	_, err := s.update(ctx, fKey(project, fph), func(cur *Incident, exists bool) (bool, error) {
		held = exists && cur.Pending != nil && cur.Pending.RequestID == requestID
		if !held {
			return false, nil
		}
		cur.Pending.HeartbeatAt = now.UTC()
		return true, nil
	})
	if err == nil && !held {
		err = fmt.Errorf("%w: no claim of call %s", ErrNotFound, requestID)
	}
	return err
}

// Call outcomes (Complete).
const (
	OutcomeDelivered    = "delivered"
	OutcomeDeadLettered = "dead_lettered"
	OutcomeRefused      = "refused"
)

// Complete ends the claimed call requestID with outcome "delivered", "dead_lettered"
// or "refused". A refused call (the call budget said no) is no call: nothing it was to
// tell counts as told, the timeline says the budget refused it (one entry per refused
// request id, counting the attempts), and Due gives it again a minute later, under the
// same request id (Claim). Otherwise the events the call carried are no
// longer new; those counted while it ran stay new for the next one. A
// delivered call gives an incident.updated notice (transition "call") so chat roots
// show the counts. A request id that holds no claim changes nothing.
func (s *Store) Complete(ctx context.Context, project, fph, requestID, outcome string, now time.Time) (Incident, []Notice, error) {
	if !validKeys(project, fph) {
		return Incident{}, nil, ErrNotFound
	}
	switch outcome {
	case OutcomeDelivered, OutcomeDeadLettered, OutcomeRefused:
	default:
		return Incident{}, nil, fmt.Errorf("incident: unknown call outcome %q", outcome)
	}
	now = now.UTC()
	var notices []Notice
	inc, err := s.update(ctx, fKey(project, fph), func(cur *Incident, exists bool) (bool, error) {
		notices = nil
		if !exists || cur.Pending == nil || cur.Pending.RequestID != requestID {
			return false, nil
		}
		p := *cur.Pending
		cur.Pending = nil
		if outcome == OutcomeRefused {
			// No call was made: what it was to tell is still to be told (the opening,
			// the resolution, the reinvestigation, its events), a while later, under
			// the same request id.
			cur.RefusedAt = now
			if cur.RefusedRequestID != p.RequestID {
				cur.RefusedRequestID, cur.RefusedReason, cur.RefusedKeyAt = p.RequestID, p.Reason, p.ClaimedAt
			}
			cur.UpdatedAt = later(cur.UpdatedAt, now)
			cur.refused(p, now)
			return true, nil
		}
		cur.RefusedAt, cur.RefusedRequestID, cur.RefusedReason, cur.RefusedKeyAt = time.Time{}, "", "", time.Time{}
		cur.Calls++
		cur.LastCallAt = now
		cur.NewEvents = max(0, cur.NewEvents-p.NewEventsAtClaim)
		cur.NewSince = p.EventsSince
		switch p.Reason {
		case ReasonOpened:
			// The opening call investigates anyway: a reinvestigation asked before it
			// is done by it.
			cur.OpeningDone, cur.ReinvestigateRequested = true, false
		case ReasonResolved:
			// Reopened while the call ran (and maybe resolved again): that resolution
			// is still to be told.
			if cur.Status == StatusResolved && (p.ResolvedAt.IsZero() || p.ResolvedAt.Equal(cur.ResolvedAt)) {
				cur.ResolvedCallDone = true
			}
		case ReasonReinvestigate:
			cur.ReinvestigateRequested = false
		}
		cur.UpdatedAt = later(cur.UpdatedAt, now)
		cur.add(Entry{At: now, Type: "call", Detail: p.Reason, RequestID: p.RequestID, Outcome: outcome,
			Count: p.NewEventsAtClaim})
		if outcome == OutcomeDelivered {
			notices = append(notices, cur.notice(NoticeUpdated, "call", "", now,
				"Agent called ("+p.Reason+"): "+cur.Title+" ("+events(cur.Events)+", "+calls(cur.Calls)+")"))
		}
		return true, nil
	})
	return inc, notices, err
}

// refused records a refusal of call p in the timeline: one entry per refused call,
// however often it is tried again (Count attempts, At the last), moved to the end.
func (i *Incident) refused(p PendingCall, now time.Time) {
	e := Entry{Type: "call", RequestID: p.RequestID, Outcome: OutcomeRefused, By: "call budget"}
	for k := len(i.Timeline) - 1; k >= 0; k-- {
		if old := i.Timeline[k]; old.Type == "call" && old.Outcome == OutcomeRefused && old.RequestID == p.RequestID {
			e = old
			i.Timeline = slices.Delete(i.Timeline, k, k+1)
			break
		}
	}
	e.At, e.Detail = now, p.Reason
	e.Count++
	i.add(e)
}

func calls(n int) string {
	if n == 1 {
		return "1 call"
	}
	return strconv.Itoa(n) + " calls"
}

// Act applies a person's action (by: "user:<email>", "slack:<name>") to incident id:
// acknowledge, resolve, mute (for MuteFor) or reinvestigate. ErrNotFound: no such
// incident; ErrResolved: acknowledge or mute (or reinvestigate of an archived
// generation) of a resolved incident. Repeating an action that holds already changes
// nothing and gives no notice.
func (s *Store) Act(ctx context.Context, project, id, action, by string, now time.Time) (Incident, []Notice, error) {
	switch action {
	case ActionAcknowledge, ActionResolve, ActionMute, ActionReinvestigate:
	default:
		return Incident{}, nil, fmt.Errorf("incident: unknown action %q", action)
	}
	now = now.UTC()
	by = cut(by, maxEntryBy)
	var notices []Notice
	resolved := false
	inc, archived, err := s.updateByID(ctx, project, id, func(cur *Incident, archived bool) (bool, error) {
		notices, resolved = nil, false
		if archived && action != ActionResolve {
			return false, ErrResolved
		}
		switch action {
		case ActionAcknowledge:
			if cur.Status == StatusResolved {
				return false, ErrResolved
			}
			if cur.Status == StatusAcknowledged {
				return false, nil
			}
			cur.Status, cur.AcknowledgedBy, cur.AcknowledgedAt = StatusAcknowledged, by, now
			cur.UpdatedAt = later(cur.UpdatedAt, now)
			cur.add(Entry{At: now, Type: "acknowledged", By: by})
			notices = append(notices, cur.notice(NoticeUpdated, "acknowledged", by, now, "Acknowledged by "+by+": "+cur.Title))
		case ActionResolve:
			if cur.Status == StatusResolved {
				return false, nil
			}
			notices = append(notices, cur.resolve(now, by, "Resolved by "+by+": "+cur.Title))
			resolved = true
		case ActionMute:
			if cur.Status == StatusResolved {
				return false, ErrResolved
			}
			cur.MutedUntil, cur.MutedBy = now.Add(MuteFor), by
			cur.UpdatedAt = later(cur.UpdatedAt, now)
			cur.add(Entry{At: now, Type: "muted", By: by})
			notices = append(notices, cur.notice(NoticeUpdated, "muted", by, now,
				"Muted for "+fmtDur(MuteFor)+" by "+by+": "+cur.Title))
		case ActionReinvestigate:
			if cur.ReinvestigateRequested {
				return false, nil
			}
			cur.ReinvestigateRequested = true
			cur.UpdatedAt = later(cur.UpdatedAt, now)
			cur.add(Entry{At: now, Type: "reinvestigate", By: by})
			notices = append(notices, cur.notice(NoticeUpdated, "reinvestigate", by, now,
				"Investigation requested again by "+by+": "+cur.Title))
		}
		return true, nil
	})
	if err != nil {
		return Incident{}, nil, err
	}
	if resolved && !archived {
		if fph, _, _ := ParseID(id); fph != overflowHash {
			s.releaseQuietly(ctx, project, fph)
		}
	}
	return inc, notices, nil
}

// AttachResult attaches the agent's result for requestID to the incident the call was
// about (timeline "result", LastResult). false: requestID was not an incident call. A
// result attached again (a redelivery) changes nothing.
func (s *Store) AttachResult(ctx context.Context, project, requestID, text string, now time.Time) (Incident, bool, error) {
	ck, ok, err := s.call(ctx, project, requestID)
	if err != nil || !ok {
		return Incident{}, false, err
	}
	now = now.UTC()
	short := cutRunes(strings.TrimSpace(text), maxLastResult)
	inc, _, err := s.updateByID(ctx, project, ck.IncidentID, func(cur *Incident, _ bool) (bool, error) {
		for _, e := range cur.Timeline {
			if e.Type == "result" && e.RequestID == requestID && e.Detail == short {
				return false, nil
			}
		}
		cur.LastResult, cur.LastResultAt = short, now
		cur.UpdatedAt = later(cur.UpdatedAt, now)
		cur.add(Entry{At: now, Type: "result", RequestID: requestID, Detail: short})
		return true, nil
	})
	if errors.Is(err, ErrNotFound) {
		return Incident{}, false, nil // expired with its incident
	}
	if err != nil {
		return Incident{}, false, err
	}
	return inc, true, nil
}

// SetChatThread records where destination sinkID posted the incident's root message;
// the first one recorded stays (two sink processes posting at once keep one thread).
func (s *Store) SetChatThread(ctx context.Context, project, id, sinkID string, t ChatThread) error {
	if sinkID == "" {
		return errors.New("incident: chat thread without a destination id")
	}
	t.Channel, t.TS = cut(t.Channel, 128), cut(t.TS, 64)
	_, _, err := s.updateByID(ctx, project, id, func(cur *Incident, _ bool) (bool, error) {
		if _, ok := cur.Chat[sinkID]; ok || len(cur.Chat) >= maxChatThreads {
			return false, nil
		}
		if cur.Chat == nil {
			cur.Chat = map[string]ChatThread{}
		}
		cur.Chat[cut(sinkID, 128)] = t
		return true, nil
	})
	return err
}

// AddTimeline appends e to the incident's timeline (e.g. a chat message posted). Its
// texts are cut to bounds; a zero At is now.
func (s *Store) AddTimeline(ctx context.Context, project, id string, e Entry) error {
	if e.At.IsZero() {
		e.At = time.Now()
	}
	e.Type, e.By, e.Detail = cut(e.Type, 32), cut(e.By, maxEntryBy), cutRunes(e.Detail, maxEntryText)
	e.RequestID, e.SinkID, e.Outcome = cut(e.RequestID, 128), cut(e.SinkID, 128), cut(e.Outcome, 32)
	_, _, err := s.updateByID(ctx, project, id, func(cur *Incident, _ bool) (bool, error) {
		cur.add(e)
		return true, nil
	})
	return err
}

// Get reads incident id: the fingerprint's current one, else an archived one.
func (s *Store) Get(ctx context.Context, project, id string) (Incident, error) {
	fph, _, ok := ParseID(id)
	if !ok || !streams.ValidProjectID(project) {
		return Incident{}, ErrNotFound
	}
	for _, key := range []string{fKey(project, fph), rKey(project, id)} {
		e, err := s.kv.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return Incident{}, fmt.Errorf("incident: read %s: %w", key, err)
		}
		var inc Incident
		if json.Unmarshal(e.Value(), &inc) == nil && inc.ID == id {
			return inc, nil
		}
	}
	return Incident{}, ErrNotFound
}

// ByRequest finds the incident of a call by its request id, and the call's reason.
// false: requestID was not an incident call of the project (or it expired).
func (s *Store) ByRequest(ctx context.Context, project, requestID string) (Incident, string, bool, error) {
	ck, ok, err := s.call(ctx, project, requestID)
	if err != nil || !ok {
		return Incident{}, "", false, err
	}
	inc, err := s.Get(ctx, project, ck.IncidentID)
	if errors.Is(err, ErrNotFound) {
		return Incident{}, "", false, nil
	}
	if err != nil {
		return Incident{}, "", false, err
	}
	return inc, ck.Reason, true, nil
}

// IsCall reports whether requestID names a call of one of project's incidents: one
// read of its c-key, for a caller that only needs to know (most results answer no
// incident call) before doing more.
func (s *Store) IsCall(ctx context.Context, project, requestID string) (bool, error) {
	_, ok, err := s.call(ctx, project, requestID)
	return ok, err
}

func (s *Store) call(ctx context.Context, project, requestID string) (callKey, bool, error) {
	if !streams.ValidProjectID(project) || !validToken(requestID) {
		return callKey{}, false, nil // agents post any request id; none of these is a call
	}
	e, err := s.kv.Get(ctx, cKey(project, requestID))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return callKey{}, false, nil
	}
	if err != nil {
		return callKey{}, false, fmt.Errorf("incident: read call %s: %w", requestID, err)
	}
	var ck callKey
	if json.Unmarshal(e.Value(), &ck) != nil || ck.IncidentID == "" {
		return callKey{}, false, nil
	}
	return ck, true, nil
}

// List lists the project's incidents, current and archived: open and acknowledged
// first (latest update first), then resolved (latest resolution first); status "" is
// all, else exactly that status. At most limit (50 when <= 0). The items are list
// items: their Timeline, Applied, Counted and Outbox are left out (Get one for its
// Detail). It reads at most the 1,000 incidents changed last (the key listing is in the
// order of last change): a project of thousands of fingerprints and archives is a
// bounded read, whose oldest incidents are found by id (Get) only.
func (s *Store) List(ctx context.Context, project, status string, limit int) ([]Incident, error) {
	if !streams.ValidProjectID(project) {
		return nil, nil
	}
	if limit <= 0 {
		limit = 50
	}
	l, err := s.kv.ListKeysFiltered(ctx, fKey(project, "*"), rKey(project, "*"))
	if err != nil {
		return nil, fmt.Errorf("incident: list %s: %w", project, err)
	}
	keys := make([]string, 0, 64)
	for k := range l.Keys() {
		keys = append(keys, k)
		if len(keys) >= 2*s.listKeys {
			keys = append(keys[:0], keys[len(keys)-s.listKeys:]...)
		}
	}
	if len(keys) > s.listKeys {
		keys = keys[len(keys)-s.listKeys:]
	}
	var (
		mu    sync.Mutex
		out   []Incident
		first error
		wg    sync.WaitGroup
		slots = make(chan struct{}, 16)
	)
	for _, key := range keys {
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-slots; wg.Done() }()
			e, err := s.kv.Get(ctx, key)
			if errors.Is(err, jetstream.ErrKeyNotFound) {
				return // deleted or expired since the listing
			}
			if err != nil {
				mu.Lock()
				first = cmp.Or(first, err)
				mu.Unlock()
				return
			}
			var inc Incident
			if json.Unmarshal(e.Value(), &inc) != nil || inc.ID == "" || status != "" && inc.Status != status {
				return
			}
			inc.Timeline, inc.Applied, inc.Counted, inc.Outbox = nil, nil, nil, nil
			mu.Lock()
			out = append(out, inc)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if first != nil {
		return nil, fmt.Errorf("incident: list %s: %w", project, first)
	}
	return top(out, limit), nil
}

// top sorts list items, keeps the latest of an incident found twice (an archive
// written by a round whose compare-and-set then failed for good), and the first n.
func top(l []Incident, n int) []Incident {
	seen := make(map[string]int, len(l))
	kept := l[:0]
	for _, i := range l {
		if k, ok := seen[i.ID]; ok {
			if newer(i, kept[k]) {
				kept[k] = i
			}
			continue
		}
		seen[i.ID] = len(kept)
		kept = append(kept, i)
	}
	l = kept
	isOpen := func(i Incident) bool { return i.Status != StatusResolved }
	slices.SortFunc(l, func(a, b Incident) int {
		if isOpen(a) != isOpen(b) {
			if isOpen(a) {
				return -1
			}
			return 1
		}
		ta, tb := a.UpdatedAt, b.UpdatedAt
		if !isOpen(a) {
			ta, tb = a.ResolvedAt, b.ResolvedAt
		}
		if c := tb.Compare(ta); c != 0 {
			return c
		}
		if c := b.UpdatedAt.Compare(a.UpdatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	if len(l) > n {
		l = l[:n]
	}
	return l
}

// Watch watches the current incident of every fingerprint of every project (the
// f-keys): first their values, then every change, for the ticker's index.
func (s *Store) Watch(ctx context.Context) (jetstream.KeyWatcher, error) {
	return s.kv.Watch(ctx, "*.f.*")
}

// update is a compare-and-set of the incident at key: fn changes cur and says whether
// it did (false writes nothing). It returns the incident as written, or as read when
// unchanged (zero when absent).
func (s *Store) update(ctx context.Context, key string, fn func(cur *Incident, exists bool) (bool, error)) (Incident, error) {
	return s.updateFrom(ctx, key, nil, func(cur *Incident, exists, _ bool) (bool, error) { return fn(cur, exists) })
}

// errGuessed: fn would not write the value guessed from lastValues; what it decided
// needs the key as it is.
var errGuessed = errors.New("incident: decided on a guessed value")

// updateGuessed is update starting from the key's last value this process knows (fn
// is told so by guessed): a write at its revision succeeds only if no one wrote since,
// so the guess costs nothing when right and one lost compare-and-set when stale. What
// fn decides without writing (nothing changed, an error: a slot or a place to reserve)
// on a guess is decided again on the key as read, as is anything fn returns errGuessed
// for, so only a write rests on the guess.
func (s *Store) updateGuessed(ctx context.Context, key string, fn func(cur *Incident, exists, guessed bool) (bool, error)) (Incident, error) {
	if lv, ok := s.last.get(key); ok {
		inc, err := s.updateFrom(ctx, key, &lv, fn)
		if !errors.Is(err, errGuessed) {
			return inc, err
		}
		s.last.drop(key)
	}
	return s.updateFrom(ctx, key, nil, fn)
}

func (s *Store) updateFrom(ctx context.Context, key string, guess *lastValue, fn func(cur *Incident, exists, guessed bool) (bool, error)) (Incident, error) {
	var (
		out   Incident
		seen  []byte // the value fn was last given, as read
		wrote []byte
	)
	var opts []streams.KVOption
	guessed := guess != nil
	if guessed {
		opts = append(opts, streams.KVAssume(guess.v, guess.rev))
	}
	rev, err := streams.UpdateKV(ctx, s.kv, key, func(old []byte, exists bool) ([]byte, error) {
		g := guessed
		guessed = false // a lost compare-and-set reads the key
		seen, wrote = old, nil
		if !exists {
			seen = nil
		}
		var cur Incident
		if exists && json.Unmarshal(old, &cur) != nil {
			exists, cur = false, Incident{} // a damaged entry is replaced
		}
		changed, err := fn(&cur, exists, g)
		out = cur
		if g && (err != nil || !changed) {
			return nil, errGuessed
		}
		if err != nil {
			return nil, err
		}
		if !changed {
			if !exists {
				out = Incident{}
			}
			return nil, streams.ErrKVUnchanged
		}
		b, err := marshalBounded(&cur)
		out, wrote = cur, b
		return b, err
	}, opts...)
	switch {
	case err != nil:
	case wrote != nil:
		s.last.set(key, wrote, rev)
	case seen != nil && rev > 0:
		s.last.set(key, seen, rev)
	}
	return out, err
}

// updateByID updates incident id where it is: its fingerprint's f-key while it is the
// current generation, else its archive (archived true).
func (s *Store) updateByID(ctx context.Context, project, id string, fn func(cur *Incident, archived bool) (bool, error)) (Incident, bool, error) {
	fph, _, ok := ParseID(id)
	if !ok || !streams.ValidProjectID(project) {
		return Incident{}, false, ErrNotFound
	}
	inc, err := s.update(ctx, fKey(project, fph), func(cur *Incident, exists bool) (bool, error) {
		if !exists || cur.ID != id {
			return false, errNotCurrent
		}
		return fn(cur, false)
	})
	if !errors.Is(err, errNotCurrent) {
		return inc, false, err
	}
	inc, err = s.update(ctx, rKey(project, id), func(cur *Incident, exists bool) (bool, error) {
		if !exists || cur.ID != id {
			return false, ErrNotFound
		}
		changed, err := fn(cur, true)
		if changed {
			cur.archived() // results and chat entries added later stay within its bound
		}
		return changed, err
	})
	return inc, true, err
}

// marshalBounded encodes the incident within the bucket's value size: its parts are
// bounded, and should they still add up past it, the oldest timeline entries go.
func marshalBounded(i *Incident) ([]byte, error) {
	i.OutboxSince = outboxSince(i.Outbox)
	for {
		b, err := json.Marshal(i)
		if err != nil || len(b) <= maxValue-1024 || len(i.Timeline) == 0 {
			return b, err
		}
		n := max(1, len(i.Timeline)/4)
		i.Timeline = slices.Clone(i.Timeline[n:])
		i.TimelineDropped += n
	}
}

func validKeys(project, fph string) bool {
	return streams.ValidProjectID(project) && len(fph) == fphLen && lowerHex(fph)
}

// validToken: s can be a key's last token (request ids come from agents).
func validToken(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}
