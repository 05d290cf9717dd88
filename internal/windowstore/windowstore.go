// Package windowstore keeps the sliding context windows of window mode: per project and
// group, the records that passed the context filter, for window_duration. Redis holds them
// when several pipeline processes share the work; memory holds them in the embedded
// default (lost on restart, which only shortens the context of the next triggers).
package windowstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"time"
)

// MaxPerGroup bounds a group's window, so one noisy group cannot exhaust memory; the
// oldest entries go first. It is the largest window_max_events a pipeline may set: what
// a call leaves out of a window up to this size is counted (window_truncated).
const MaxPerGroup = 50_000

// Store is a window store, and the cooldowns of the same deployment.
type Store interface {
	// Add stores rec in the group's window at time t, to be kept for ttl. seq identifies
	// the record (its stream sequence), so a redelivered record is stored once.
	Add(ctx context.Context, project, group string, seq uint64, rec []byte, t time.Time, ttl time.Duration) error
	// AddBatch is Add for many records of one project at time t, each kept for ttl: one
	// lock in memory, one round trip to Redis (for a batch of common size), where one
	// Add per record would pay that each time. The store keeps no reference to a Rec
	// after the call (the memory store copies what it keeps), so Rec may be a slice of
	// a larger buffer that the caller reuses.
	AddBatch(ctx context.Context, project string, t time.Time, ttl time.Duration, entries []Entry) error
	// Window returns the newest max records of the group stored at or after since,
	// oldest first, and how many the group holds since then in all (total >= len(recs)),
	// so a call can say how many it left out without reading them.
	Window(ctx context.Context, project, group string, since time.Time, max int) (recs [][]byte, total int, err error)
	// WindowBefore is Window of the records stored at or after since and before until:
	// an incident call's events end where the next call's begin, so none goes twice.
	WindowBefore(ctx context.Context, project, group string, since, until time.Time, max int) (recs [][]byte, total int, err error)
	Cooldowns
}

// Entry is one record of AddBatch: what Add takes apart from the project and times.
type Entry struct {
	Group string
	Seq   uint64
	Rec   []byte
}

// Cooldowns decide triggers under a cooldown per dedup key.
type Cooldowns interface {
	// Pass decides the trigger of stream sequence seq for key. When no call for key was
	// made within cooldown it passes, becomes the key's call for the next cooldown, and
	// takes suppressed: how many triggers of key were held back since the previous call
	// (the count starts again from 0). Otherwise it is held back and counted. A trigger
	// that passed and is delivered again (its batch retried) passes again with the same
	// count, so a retry never turns the call into a suppression.
	Pass(ctx context.Context, project, key string, seq uint64, cooldown time.Duration) (pass bool, suppressed int64, err error)
	// Release gives back the cooldown trigger seq took for key, when its call was not
	// made after all (the project's call budget refused it): the key is no longer
	// cooling, and the count the trigger took, plus the trigger itself, is held back
	// for the key's next call. It does nothing when seq does not hold the key's
	// cooldown (released already, or expired and taken by another trigger), so
	// releasing twice counts once.
	Release(ctx context.Context, project, key string, seq uint64) error
	// Cooling reports whether key is within a cooldown, without counting anything.
	Cooling(ctx context.Context, project, key string) (bool, error)
	Close() error
}

// SuppressedTTL is how long held-back counts are kept past their cooldown for the next
// call of the key to take: a key whose triggers stop for longer forgets them.
const SuppressedTTL = 24 * time.Hour

// cooldownKeys are the Redis keys (memory uses the first) of a dedup key: hashed, since
// dedup keys come from user data, and tagged with the project, so one project's keys
// live on one Redis Cluster shard and never meet another project's.
func cooldownKeys(project, key string) (slot, suppressed string) {
	sum := sha256.Sum256([]byte(key))
	h := hex.EncodeToString(sum[:16])
	return "svc:cd:{" + project + "}:" + h, "svc:cds:{" + project + "}:" + h
}

// groupKey bounds the size of a group's key: group values come from user data.
func groupKey(project, group string) string {
	if len(group) > 128 {
		sum := sha256.Sum256([]byte(group))
		group = "sha256:" + hex.EncodeToString(sum[:])
	}
	// The braces are a Redis Cluster hash tag: one project's windows live on one shard.
	return "svc:win:{" + project + "}:" + group
}
