package incident

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"strings"
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

// knownSet is a project's k-key: the fingerprints it keeps (has an f-key for), each
// with when it was admitted. Only a fingerprint's first opening reads it; past
// maxFingerprints a new one joins the overflow incident. Members whose f-key expired are
// dropped when the set is full (at most once per pruneEvery), sparing those admitted in
// the last reservationHold, whose opening may be under way.
type knownSet struct {
	Known    map[string]int64 `json:"known"` // fph -> unix seconds admitted
	PrunedAt int64            `json:"pruned_at,omitempty"`
}

func decodeKnown(b []byte, exists bool) knownSet {
	var s knownSet
	if exists {
		_ = json.Unmarshal(b, &s) // a damaged set starts empty; it bounds, it does not count
	}
	if s.Known == nil {
		s.Known = map[string]int64{}
	}
	return s
}

// admit takes a place among the project's kept fingerprints for fph; false: the project
// keeps maxFingerprints already.
func (s *Store) admit(ctx context.Context, project, fph string, now time.Time) (bool, error) {
	for round := 0; ; round++ {
		var got, prune bool
		_, err := streams.UpdateKV(ctx, s.kv, kKey(project), func(old []byte, exists bool) ([]byte, error) {
			got, prune = false, false
			set := decodeKnown(old, exists)
			if _, ok := set.Known[fph]; ok {
				got = true
				return nil, streams.ErrKVUnchanged
			}
			if len(set.Known) < s.maxFingerprints {
				got = true
				set.Known[fph] = now.Unix()
				return json.Marshal(set)
			}
			prune = round == 0 && now.Unix()-set.PrunedAt >= int64(pruneEvery/time.Second)
			return nil, streams.ErrKVUnchanged
		})
		if err != nil || got || !prune {
			return got, err
		}
		if err := s.pruneKnown(ctx, project, now); err != nil {
			return false, err
		}
	}
}

// pruneKnown drops the members whose f-key is gone: one listing of the project's f-keys.
func (s *Store) pruneKnown(ctx context.Context, project string, now time.Time) error {
	l, err := s.kv.ListKeysFiltered(ctx, fKey(project, "*"))
	if err != nil {
		return err
	}
	present := map[string]bool{}
	prefix := fKey(project, "")
	for k := range l.Keys() {
		present[strings.TrimPrefix(k, prefix)] = true
	}
	_, err = streams.UpdateKV(ctx, s.kv, kKey(project), func(old []byte, exists bool) ([]byte, error) {
		set := decodeKnown(old, exists)
		for fph, at := range set.Known {
			if !present[fph] && now.Unix()-at >= int64(reservationHold/time.Second) {
				delete(set.Known, fph)
			}
		}
		set.PrunedAt = now.Unix()
		return json.Marshal(set)
	})
	return err
}
