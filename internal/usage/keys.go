package usage

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Bucket names.
const (
	// BucketUsage holds the month counts, the per-day counts and the notices.
	BucketUsage = "svc-usage"
	// BucketLimits holds per-account limit overrides, one decimal value per account,
	// written by the control plane and watched by every meter. It is a bucket of its own
	// so that the watch does not carry the (frequent) count updates.
	BucketLimits = "svc-limits"
)

// usageTTL drops keys nobody wrote for over a year: old day counts would otherwise grow
// the bucket forever; a month key is written all through its month, so it outlives it.
const usageTTL = 400 * 24 * time.Hour

// Key layout in BucketUsage (tokens are encoded by token()):
//
//	m.<account>.<YYYY-MM>                 monthValue (JSON)
//	d.<account>.<YYYY-MM>.<DD>.<project>  decimal count of that day's committed records
//	n.<account>.<YYYY-MM>.<limit>.<80|100> Notice (JSON), created once: a new limit
//	                                      (accounts set-limit) earns its own notices
func monthKey(account, month string) string { return "m." + token(account) + "." + month }

func dayKey(account, month, day, project string) string {
	return "d." + token(account) + "." + month + "." + day + "." + token(project)
}

func noticeKey(account, month string, limit int64, pct int) string {
	return "n." + token(account) + "." + month + "." + strconv.FormatInt(limit, 10) + "." + strconv.Itoa(pct)
}

var plainToken = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// token makes an id safe as one KV key token. Our ids are already plain (prefix + hex);
// anything else is base64url-encoded behind '=', which plain tokens never contain, so
// two different ids never share a token.
func token(id string) string {
	if plainToken.MatchString(id) {
		return id
	}
	return "=" + base64.RawURLEncoding.EncodeToString([]byte(id))
}

func untoken(t string) string {
	if strings.HasPrefix(t, "=") {
		if b, err := base64.RawURLEncoding.DecodeString(t[1:]); err == nil {
			return string(b)
		}
	}
	return t
}

// Month is a calendar month in UTC, written "2006-01".
func Month(t time.Time) string { return t.UTC().Format("2006-01") }

// MonthStart is 00:00 UTC on the 1st of t's month.
func MonthStart(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
}

// ResetAt is when the count of t's month resets: 00:00 UTC on the 1st of the next month.
func ResetAt(t time.Time) time.Time { return MonthStart(t).AddDate(0, 1, 0) }

// RetryAfter is the whole seconds from now until the month's reset, at least 1, for the
// Retry-After header of a refused request.
func RetryAfter(now time.Time) int {
	d := ResetAt(now).Sub(now)
	s := int((d + time.Second - 1) / time.Second)
	return max(s, 1)
}

// openBucket binds to a bucket, creating it when missing (whichever process starts first
// creates it; a concurrent creator's bucket is used as is).
func openBucket(ctx context.Context, js jetstream.JetStream, name, desc string, ttl time.Duration, replicas int) (jetstream.KeyValue, error) {
	kv, err := js.KeyValue(ctx, name)
	if err == nil {
		return kv, nil
	}
	if !errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, fmt.Errorf("open bucket %s: %w", name, err)
	}
	kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: name, Description: desc, History: 1, TTL: ttl,
		Storage: jetstream.FileStorage, Replicas: max(replicas, 1),
	})
	if errors.Is(err, jetstream.ErrBucketExists) {
		return js.KeyValue(ctx, name)
	}
	if err != nil {
		return nil, fmt.Errorf("create bucket %s: %w", name, err)
	}
	return kv, nil
}

func openUsageBucket(ctx context.Context, js jetstream.JetStream, replicas int) (jetstream.KeyValue, error) {
	return openBucket(ctx, js, BucketUsage, "otelcol-svc usage counts (month, day, notices)", usageTTL, replicas)
}

func openLimitsBucket(ctx context.Context, js jetstream.JetStream, replicas int) (jetstream.KeyValue, error) {
	return openBucket(ctx, js, BucketLimits, "otelcol-svc per-account event limits", 0, replicas)
}

// group renders n with thousands separators, as the messages users read do.
func group(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
