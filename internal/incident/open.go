package incident

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/otelcol-svc/otelcol-svc/internal/streams"
)

// openSet is a project's n-key: the fingerprints holding an open slot, each with when
// it was reserved. Only opening reads it (joining an open incident never does); opening
// reserves before the f-key says open, resolving releases after. A process that dies in
// between leaves a member whose incident is not open: when the set is full it is
// checked against the f-keys (at most once per pruneEvery, so a tenant at the limit
// costs a few hundred reads a minute, not per batch), sparing members reserved in the
// last reservationHold, whose opening may be under way.
type openSet struct {
	Open     map[string]int64 `json:"open"` // fph -> unix seconds reserved
	PrunedAt int64            `json:"pruned_at,omitempty"`
}

func decodeSet(b []byte, exists bool) openSet {
	var s openSet
	if exists {
		_ = json.Unmarshal(b, &s) // a damaged set starts empty; pruning is self-correcting
	}
	if s.Open == nil {
		s.Open = map[string]int64{}
	}
	return s
}

// reserve takes an open slot for fph; false: the project has maxOpen open incidents.
// force takes it regardless, for an incident that is open already.
func (s *Store) reserve(ctx context.Context, project, fph string, now time.Time, force bool) (bool, error) {
	for round := 0; ; round++ {
		var (
			got     bool
			members map[string]int64
		)
		_, err := streams.UpdateKV(ctx, s.kv, nKey(project), func(old []byte, exists bool) ([]byte, error) {
			got, members = false, nil
			set := decodeSet(old, exists)
			if at, ok := set.Open[fph]; ok {
				got = true
				// Refreshed, so a prune does not take the slot of an opening under way.
				if now.Unix()-at < int64(reservationHold/time.Second)/2 {
					return nil, streams.ErrKVUnchanged
				}
			} else if force || len(set.Open) < s.maxOpen {
				got = true
			}
			if got {
				set.Open[fph] = now.Unix()
				return json.Marshal(set)
			}
			if round == 0 && now.Unix()-set.PrunedAt >= int64(pruneEvery/time.Second) {
				members = maps.Clone(set.Open)
			}
			return nil, streams.ErrKVUnchanged
		})
		if err != nil || got || members == nil {
			return got, err
		}
		if err := s.prune(ctx, project, members, now); err != nil {
			return false, err
		}
	}
}

// prune drops the members of the set whose incident is not open.
func (s *Store) prune(ctx context.Context, project string, members map[string]int64, now time.Time) error {
	stale := map[string]int64{}
	for fph, at := range members {
		if now.Unix()-at < int64(reservationHold/time.Second) {
			continue
		}
		e, err := s.kv.Get(ctx, fKey(project, fph))
		if err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
			return err
		}
		var inc Incident
		if err != nil || json.Unmarshal(e.Value(), &inc) != nil || inc.Status == StatusResolved {
			stale[fph] = at
		}
	}
	_, err := streams.UpdateKV(ctx, s.kv, nKey(project), func(old []byte, exists bool) ([]byte, error) {
		set := decodeSet(old, exists)
		for fph, at := range stale {
			if set.Open[fph] == at {
				delete(set.Open, fph)
			}
		}
		set.PrunedAt = now.Unix()
		return json.Marshal(set)
	})
	return err
}

// releaseQuietly gives fph's slot back after its incident resolved. A failure leaves a
// member that the next prune removes.
func (s *Store) releaseQuietly(ctx context.Context, project, fph string) {
	_, _ = streams.UpdateKV(context.WithoutCancel(ctx), s.kv, nKey(project), func(old []byte, exists bool) ([]byte, error) {
		set := decodeSet(old, exists)
		if _, ok := set.Open[fph]; !ok {
			return nil, streams.ErrKVUnchanged
		}
		delete(set.Open, fph)
		return json.Marshal(set)
	})
}
