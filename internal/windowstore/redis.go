package windowstore

import (
	"context"
	"encoding/binary"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis keeps each window as a sorted set scored by the time a record was stored. Members
// are the record's stream sequence (8 bytes, big-endian, so ties keep stream order)
// followed by its bytes; a redelivered record is the same member and is stored once.
type Redis struct {
	c *redis.Client
}

// NewRedis connects to the Redis at url (redis://[user:pass@]host:port/db, or rediss://).
func NewRedis(url string) (*Redis, error) {
	opts, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("redis url: %w", err)
	}
	return &Redis{c: redis.NewClient(opts)}, nil
}

// Ping checks the connection.
func (r *Redis) Ping(ctx context.Context) error { return r.c.Ping(ctx).Err() }

// Add implements Store: add, trim by time and by count, and refresh the key's expiry in
// one round trip.
func (r *Redis) Add(ctx context.Context, project, group string, seq uint64, rec []byte, t time.Time, ttl time.Duration) error {
	k := groupKey(project, group)
	member := make([]byte, 8+len(rec))
	binary.BigEndian.PutUint64(member, seq)
	copy(member[8:], rec)
	_, err := r.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.ZAdd(ctx, k, redis.Z{Score: float64(t.UnixMilli()), Member: member})
		p.ZRemRangeByScore(ctx, k, "-inf", "("+strconv.FormatInt(t.Add(-ttl).UnixMilli(), 10))
		p.ZRemRangeByRank(ctx, k, 0, -MaxPerGroup-1)
		p.PExpire(ctx, k, ttl+time.Second)
		return nil
	})
	if err != nil {
		return fmt.Errorf("window store: %w", err)
	}
	return nil
}

// redisBatchBytes bounds what one round trip of AddBatch carries, so a batch of large
// records neither builds one huge request nor holds Redis in one long transaction.
const redisBatchBytes = 4 << 20

// AddBatch implements Store: per group, one ZADD of its records and the same trims and
// expiry as Add, all in one transaction per redisBatchBytes of records.
func (r *Redis) AddBatch(ctx context.Context, project string, t time.Time, ttl time.Duration, entries []Entry) error {
	score := float64(t.UnixMilli())
	oldest := "(" + strconv.FormatInt(t.Add(-ttl).UnixMilli(), 10)
	for len(entries) > 0 {
		n, size := 0, 0
		for n < len(entries) && (n == 0 || size+len(entries[n].Rec) <= redisBatchBytes) {
			size += 8 + len(entries[n].Rec)
			n++
		}
		chunk := entries[:n]
		entries = entries[n:]
		// Groups in the order they first appear, each with its members.
		var keys []string
		members := map[string][]redis.Z{}
		for _, e := range chunk {
			k := groupKey(project, e.Group)
			if _, ok := members[k]; !ok {
				keys = append(keys, k)
			}
			m := make([]byte, 8+len(e.Rec))
			binary.BigEndian.PutUint64(m, e.Seq)
			copy(m[8:], e.Rec)
			members[k] = append(members[k], redis.Z{Score: score, Member: m})
		}
		_, err := r.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
			for _, k := range keys {
				p.ZAdd(ctx, k, members[k]...)
				p.ZRemRangeByScore(ctx, k, "-inf", oldest)
				p.ZRemRangeByRank(ctx, k, 0, -MaxPerGroup-1)
				p.PExpire(ctx, k, ttl+time.Second)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("window store: %w", err)
		}
	}
	return nil
}

// Window implements Store: the count and the newest max records in one transaction.
func (r *Redis) Window(ctx context.Context, project, group string, since time.Time, max int) ([][]byte, int, error) {
	return r.WindowBefore(ctx, project, group, since, time.Time{}, max)
}

// WindowBefore implements Store; a zero until is no bound. Scores are milliseconds: the
// bound is exclusive, as the next call's since is inclusive.
func (r *Redis) WindowBefore(ctx context.Context, project, group string, since, until time.Time, max int) ([][]byte, int, error) {
	k := groupKey(project, group)
	min := strconv.FormatInt(since.UnixMilli(), 10)
	upper := "+inf"
	if !until.IsZero() {
		upper = "(" + strconv.FormatInt(until.UnixMilli(), 10)
	}
	var count *redis.IntCmd
	var rng *redis.StringSliceCmd
	_, err := r.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		count = p.ZCount(ctx, k, min, upper)
		rng = p.ZRevRangeByScore(ctx, k, &redis.ZRangeBy{Min: min, Max: upper, Count: int64(max)})
		return nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("window store: %w", err)
	}
	members := rng.Val()
	out := make([][]byte, 0, len(members))
	for i := len(members) - 1; i >= 0; i-- { // newest first from Redis; oldest first out
		if m := members[i]; len(m) >= 8 {
			out = append(out, []byte(m[8:]))
		}
	}
	return out, int(count.Val()), nil
}

// passScript is Pass in one step, so two pipeline processes never both take a key's
// cooldown, and a held-back count is taken by exactly one call. The slot's value is the
// passing trigger's sequence and the count it took, so its redelivery passes again.
// KEYS: slot, suppressed; ARGV: seq, cooldown ms, suppressed ttl ms.
var passScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if cur then
  local sep = string.find(cur, ':', 1, true)
  if sep and string.sub(cur, 1, sep - 1) == ARGV[1] then
    return {1, tonumber(string.sub(cur, sep + 1))}
  end
  redis.call('INCR', KEYS[2])
  redis.call('PEXPIRE', KEYS[2], ARGV[3])
  return {0, 0}
end
local n = tonumber(redis.call('GETDEL', KEYS[2]) or '0')
redis.call('SET', KEYS[1], ARGV[1] .. ':' .. n, 'PX', ARGV[2])
return {1, n}
`)

// Pass implements Cooldowns.
func (r *Redis) Pass(ctx context.Context, project, key string, seq uint64, cooldown time.Duration) (bool, int64, error) {
	slot, sup := cooldownKeys(project, key)
	res, err := passScript.Run(ctx, r.c, []string{slot, sup},
		strconv.FormatUint(seq, 10), cooldown.Milliseconds(), (cooldown + SuppressedTTL).Milliseconds()).Int64Slice()
	if err != nil {
		return false, 0, fmt.Errorf("cooldown store: %w", err)
	}
	if len(res) != 2 {
		return false, 0, fmt.Errorf("cooldown store: unexpected answer %v", res)
	}
	return res[0] == 1, res[1], nil
}

// releaseScript is Release in one step: only the trigger holding the slot gives it back,
// so a release raced by another process's Pass, or repeated, never counts twice.
// KEYS: slot, suppressed; ARGV: seq, suppressed ttl ms.
var releaseScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if not cur then
  return 0
end
local sep = string.find(cur, ':', 1, true)
if not sep or string.sub(cur, 1, sep - 1) ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1])
redis.call('INCRBY', KEYS[2], (tonumber(string.sub(cur, sep + 1)) or 0) + 1)
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return 1
`)

// Release implements Cooldowns.
func (r *Redis) Release(ctx context.Context, project, key string, seq uint64) error {
	slot, sup := cooldownKeys(project, key)
	if err := releaseScript.Run(ctx, r.c, []string{slot, sup}, strconv.FormatUint(seq, 10), SuppressedTTL.Milliseconds()).Err(); err != nil {
		return fmt.Errorf("cooldown store: %w", err)
	}
	return nil
}

// Cooling implements Cooldowns.
func (r *Redis) Cooling(ctx context.Context, project, key string) (bool, error) {
	slot, _ := cooldownKeys(project, key)
	n, err := r.c.Exists(ctx, slot).Result()
	if err != nil {
		return false, fmt.Errorf("cooldown store: %w", err)
	}
	return n == 1, nil
}

// Close closes the connection pool.
func (r *Redis) Close() error { return r.c.Close() }
