package incident

import (
	"context"
	"time"

	"github.com/otelcol-svc/otelcol-svc/internal/streams"
)

// Published clears from the outbox of incident id's fingerprint the notices of id with
// Seq <= upToSeq, once they are on the output stream (Publish returned nil). id may be
// the current generation or a previous one whose unpublished notices the current one
// carries in its outbox: Seqs count per generation, so only id's are matched.
func (s *Store) Published(ctx context.Context, project, id string, upToSeq int) error {
	fph, _, ok := ParseID(id)
	if !ok || !streams.ValidProjectID(project) {
		return ErrNotFound
	}
	_, err := s.update(ctx, fKey(project, fph), func(cur *Incident, exists bool) (bool, error) {
		if !exists {
			return false, nil
		}
		kept := cur.Outbox[:0:0]
		for _, n := range cur.Outbox {
			if n.Incident.ID != id || n.Seq > upToSeq {
				kept = append(kept, n)
			}
		}
		if len(kept) == len(cur.Outbox) {
			return false, nil
		}
		if len(kept) == 0 {
			kept = nil
		}
		cur.Outbox = kept
		return true, nil
	})
	return err
}

// PendingNotices are the incident's notices still in its outbox that were decided at or
// before olderThan: those whose process did not publish them (it died, or the stream was
// away). A watcher publishes them again and then calls Published; MsgID makes a repeat
// of one already on the stream harmless.
func PendingNotices(i Incident, olderThan time.Time) []Notice {
	var out []Notice
	for _, n := range i.Outbox {
		if !n.At.After(olderThan) {
			out = append(out, n)
		}
	}
	return out
}

// MaxSeq is the highest Seq of the notices of incident id (0 for none): what Published
// takes once they are all published. An opening's notices may hold the previous
// generation's unpublished ones, whose Seqs count in another incident.
func MaxSeq(notices []Notice, id string) int {
	m := 0
	for _, n := range notices {
		if n.Incident.ID == id {
			m = max(m, n.Seq)
		}
	}
	return m
}
