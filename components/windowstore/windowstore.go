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

// MaxPerGroup bounds a group's window, so one noisy group cannot exhaust memory or send
// an unbounded call body; the oldest entries go first.
const MaxPerGroup = 1000

// Store is a window store.
type Store interface {
	// Add stores rec in the group's window at time t, to be kept for ttl. seq identifies
	// the record (its stream sequence), so a redelivered record is stored once.
	Add(ctx context.Context, project, group string, seq uint64, rec []byte, t time.Time, ttl time.Duration) error
	// Window returns the group's records stored at or after since, oldest first.
	Window(ctx context.Context, project, group string, since time.Time) ([][]byte, error)
	Close() error
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
