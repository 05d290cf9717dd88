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

// Window implements Store.
func (r *Redis) Window(ctx context.Context, project, group string, since time.Time) ([][]byte, error) {
	members, err := r.c.ZRangeByScore(ctx, groupKey(project, group), &redis.ZRangeBy{
		Min: strconv.FormatInt(since.UnixMilli(), 10), Max: "+inf",
	}).Result()
	if err != nil {
		return nil, fmt.Errorf("window store: %w", err)
	}
	out := make([][]byte, 0, len(members))
	for _, m := range members {
		if len(m) >= 8 {
			out = append(out, []byte(m[8:]))
		}
	}
	return out, nil
}

// Close closes the connection pool.
func (r *Redis) Close() error { return r.c.Close() }
