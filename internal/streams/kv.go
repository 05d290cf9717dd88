package streams

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// ErrKVUnchanged is what an UpdateKV function returns to leave the key as it is: nothing
// is written and UpdateKV returns the revision read (0 when the key is absent) and no
// error.
var ErrKVUnchanged = errors.New("streams: leave the key as it is")

// ErrKVContended is UpdateKV giving up: other writers won every one of its attempts.
var ErrKVContended = errors.New("streams: the key kept changing under the update")

// kvAttempts bounds UpdateKV's rounds by default. Each lost round means another writer
// succeeded meanwhile, so running out takes dozens of writers of the same key at once:
// retrying for ever would only hide a hot key behind requests that never end.
const kvAttempts = 64

// KVOption adjusts UpdateKV.
type KVOption func(*kvUpdate)

type kvUpdate struct {
	attempts int // 0: until ctx ends
	assumed  bool
	value    []byte
	rev      uint64
}

// KVAttempts bounds UpdateKV to n rounds (64 without it); n <= 0 retries until the
// context ends, for a count that must not be dropped however hot its key (a meter's,
// whose caller holds the request or the flush until it is written).
func KVAttempts(n int) KVOption {
	return func(u *kvUpdate) { u.attempts = max(n, 0) }
}

// KVAssume starts from value at revision rev (rev 0: the key absent) instead of reading
// the key: what this process wrote last, for a key mostly only it writes, so an update
// costs one round trip instead of two. A stale guess costs one lost compare-and-set, after
// which the key is read as usual.
func KVAssume(value []byte, rev uint64) KVOption {
	return func(u *kvUpdate) { u.assumed, u.value, u.rev = true, value, rev }
}

// UpdateKV is a read-modify-write of one key as a compare-and-set, the loop every counter
// and binding in a KV bucket shared by several processes needs. It reads key, calls fn with
// its value (exists false when the key is absent, deleted or expired) and writes what fn
// returns: Create when the key was absent, Update at the revision read otherwise, so a
// writer in between makes the write fail instead of being overwritten. On such a conflict
// it reads again and calls fn again (fn must be free of side effects beyond its result), at
// most 64 times (KVAttempts), after a short random pause: writers that read at the same
// moment would otherwise collide again in step, and the one that just won, reading first,
// would win every round. An error of fn is returned as it is, with nothing written;
// ErrKVUnchanged writes nothing and returns no error (on a KVAssume value, without reading
// the key). It returns the key's revision after the write.
func UpdateKV(ctx context.Context, kv jetstream.KeyValue, key string, fn func(old []byte, exists bool) ([]byte, error), opts ...KVOption) (uint64, error) {
	u := kvUpdate{attempts: kvAttempts}
	for _, o := range opts {
		o(&u)
	}
	// A conflict on an assumed value says only that the guess was stale: read at once.
	lostRead := false
	for attempt := 0; u.attempts == 0 || attempt < u.attempts; attempt++ {
		if lostRead {
			pause := time.NewTimer(rand.N(min(time.Duration(attempt)*time.Millisecond, 20*time.Millisecond)) + 1)
			select {
			case <-ctx.Done():
				pause.Stop()
				return 0, ctx.Err()
			case <-pause.C:
			}
		} else if err := ctx.Err(); err != nil {
			return 0, err
		}
		var (
			old    []byte
			rev    uint64
			exists bool
		)
		if u.assumed {
			u.assumed = false
			old, rev, exists = u.value, u.rev, u.rev > 0
		} else {
			e, err := kv.Get(ctx, key)
			switch {
			case errors.Is(err, jetstream.ErrKeyNotFound):
			case err != nil:
				return 0, fmt.Errorf("read %s: %w", key, err)
			default:
				old, rev, exists = e.Value(), e.Revision(), true
			}
			lostRead = true
		}
		v, err := fn(old, exists)
		if errors.Is(err, ErrKVUnchanged) {
			return rev, nil
		}
		if err != nil {
			return 0, err
		}
		if exists {
			rev, err = kv.Update(ctx, key, v, rev)
		} else {
			rev, err = kv.Create(ctx, key, v)
		}
		if err == nil {
			return rev, nil
		}
		if !IsKVConflict(err) {
			return 0, fmt.Errorf("write %s: %w", key, err)
		}
	}
	return 0, fmt.Errorf("%w: %s, %d attempts", ErrKVContended, key, u.attempts)
}
