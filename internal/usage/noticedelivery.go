package usage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Durable notice delivery.
//
// A notice's KV entry (noticeKey) carries its delivery state: "claimed" (with the real
// time of the claim) while some meter is sending it, "sent" once OnNotice succeeded. The
// create of the entry decides which meter sends first; every meter watches the notice
// keys, and a notice still claimed NoticeTimeout after its claim (its sender died, lost
// NATS, or OnNotice failed) is taken over by whichever meter wins a compare-and-set on
// the entry's revision, which then sends it again and marks it sent.
//
// Why claim-then-mark rather than "publish first, mark after" by every meter: meters
// cross a threshold at different times (hours apart for an account with little traffic),
// and the output stream only drops a repeated msg-id within its duplicate window (two
// minutes by default), so something must still decide who sends; the create is that
// decider, and keeping the state on the same key makes the takeover one compare-and-set
// however many processes race for it.
//
// What holds: no notice is lost while any receiver runs during its month or the next.
// A sender that dies between publishing and marking "sent" gets its notice published
// again by the taker-over; within the stream's duplicate window the msg-id makes that a
// no-op, so within the window each sink gets the notice once. A takeover later than the
// window after the first publish (every receiver down, or NATS away, for longer) can send
// it to a sink twice: beyond the window delivery is at least once, never lost. OnNotice
// gets NoticeTimeout/2, so a live sender is never taken over while still publishing.

// Delivery states of a notice entry. Entries written before states existed have none and
// count as sent (their writer told the sinks at once).
const (
	noticeClaimed = "claimed"
	noticeSent    = "sent"
)

// maxNoticeRetry caps the wait between takeovers of a notice that keeps failing (a
// project's output stream that cannot be written), so it is retried but not hammered.
const maxNoticeRetry = time.Hour

// noticeEntry is a notice key's value: the Notice (what Reader reports) and its delivery.
type noticeEntry struct {
	Notice
	State string `json:"state,omitempty"`
	// ClaimedAt is when the current sender took it, unix ms by its real clock.
	ClaimedAt int64 `json:"claimed_at,omitempty"`
	// Attempts counts claims; each failed one doubles the wait before the next.
	Attempts int `json:"attempts,omitempty"`
}

// due is when a claimed entry may be taken over.
func (e noticeEntry) due(timeout time.Duration) time.Time {
	wait := timeout
	for i := 1; i < e.Attempts && wait < maxNoticeRetry; i++ {
		wait *= 2
	}
	return time.UnixMilli(e.ClaimedAt).Add(min(wait, maxNoticeRetry))
}

// pendingNotice is a claimed entry as this meter's watch last saw it.
type pendingNotice struct {
	entry noticeEntry
	rev   uint64
	// tried: this meter took it over at that revision; wait for the watch to bring the
	// entry's next revision instead of trying again.
	tried bool
}

// noticeWatch is a meter's view of the claimed, not yet sent notices of every account.
type noticeWatch struct {
	mu      sync.Mutex
	pending map[string]*pendingNotice
}

// claimNotice creates n's entry as claimed by this meter and, when the create wins, sends
// it. A create that finds the entry leaves it to its claimer (or to a takeover).
func (m *Meter) claimNotice(n Notice) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	key := noticeKey(n.Account, n.Month, n.Limit, n.Percent)
	e := noticeEntry{Notice: n, State: noticeClaimed, ClaimedAt: time.Now().UnixMilli(), Attempts: 1}
	b, _ := json.Marshal(e)
	rev, err := m.kv.Create(ctx, key, b)
	switch {
	case errors.Is(err, jetstream.ErrKeyExists):
	case err != nil:
		// Unknown whether it was written: if it was, a takeover sends it.
		m.report(fmt.Errorf("usage: notice %d%% for %s: %w", n.Percent, n.Account, err))
	default:
		m.sendNotice(key, e, rev)
	}
}

// sendNotice calls OnNotice for the entry claimed at rev and marks it sent. On failure it
// stays claimed, and a meter takes it over once it is due.
func (m *Meter) sendNotice(key string, e noticeEntry, rev uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), m.cfg.NoticeTimeout/2)
	defer cancel()
	if m.cfg.OnNotice != nil {
		if err := m.cfg.OnNotice(ctx, e.Notice); err != nil {
			m.report(fmt.Errorf("usage: notice %d%% for %s not sent (retried in %s): %w",
				e.Percent, e.Account, time.Until(e.due(m.cfg.NoticeTimeout)).Round(time.Second), err))
			return
		}
	}
	e.State = noticeSent
	b, _ := json.Marshal(e)
	mctx, mcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer mcancel()
	_, err := m.kv.Update(mctx, key, b, rev)
	if err != nil && !errors.Is(err, jetstream.ErrKeyRevisionMismatch) && !errors.Is(err, jetstream.ErrKeyExists) {
		// Sent but still claimed: a takeover sends it again, which the msg-id drops within
		// the duplicate window. A revision mismatch means a takeover already happened.
		m.report(fmt.Errorf("usage: notice %d%% for %s sent, not marked: %w", e.Percent, e.Account, err))
	}
}

// watchNotices keeps m.noticeWatch current with every notice entry of the bucket.
func (m *Meter) watchNotices(ctx context.Context) error {
	m.nw = &noticeWatch{pending: map[string]*pendingNotice{}}
	w, err := m.kv.Watch(ctx, "n.>")
	if err != nil {
		return err
	}
	m.bg.Add(1)
	go func() {
		defer m.bg.Done()
		defer w.Stop() //nolint:errcheck
		for {
			select {
			case <-ctx.Done():
				return
			case kve, ok := <-w.Updates():
				if !ok {
					return
				}
				if kve != nil {
					m.nw.apply(kve)
				}
			}
		}
	}()
	return nil
}

func (nw *noticeWatch) apply(kve jetstream.KeyValueEntry) {
	var e noticeEntry
	nw.mu.Lock()
	defer nw.mu.Unlock()
	if kve.Operation() != jetstream.KeyValuePut || json.Unmarshal(kve.Value(), &e) != nil || e.State != noticeClaimed {
		delete(nw.pending, kve.Key())
		return
	}
	nw.pending[kve.Key()] = &pendingNotice{entry: e, rev: kve.Revision()}
}

// retryNotices takes over every claimed notice that is due, of this month or the last
// (older ones no longer matter to anyone): the compare-and-set on the revision lets one
// meter win when several try.
func (m *Meter) retryNotices(ctx context.Context) {
	now := time.Now()
	cal := m.cfg.Clock()
	months := map[string]bool{Month(cal): true, Month(MonthStart(cal).AddDate(0, -1, 0)): true}
	type due struct {
		key   string
		entry noticeEntry
		rev   uint64
	}
	var dues []due
	m.nw.mu.Lock()
	for key, p := range m.nw.pending {
		if !months[p.entry.Month] {
			delete(m.nw.pending, key)
			continue
		}
		if p.tried || now.Before(p.entry.due(m.cfg.NoticeTimeout)) {
			continue
		}
		p.tried = true
		dues = append(dues, due{key, p.entry, p.rev})
	}
	m.nw.mu.Unlock()
	for _, d := range dues {
		e := d.entry
		e.ClaimedAt, e.Attempts = now.UnixMilli(), e.Attempts+1
		b, _ := json.Marshal(e)
		uctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		rev, err := m.kv.Update(uctx, d.key, b, d.rev)
		cancel()
		if err != nil {
			if !errors.Is(err, jetstream.ErrKeyRevisionMismatch) && !errors.Is(err, jetstream.ErrKeyExists) {
				m.report(fmt.Errorf("usage: take over notice %d%% for %s: %w", e.Percent, e.Account, err))
				m.nw.mu.Lock()
				if p := m.nw.pending[d.key]; p != nil && p.rev == d.rev {
					p.tried = false // not written: try again on a later tick
				}
				m.nw.mu.Unlock()
			}
			continue
		}
		m.notices.Add(1)
		go func() {
			defer m.notices.Done()
			m.sendNotice(d.key, e, rev)
		}()
	}
}
