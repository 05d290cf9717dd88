package usage

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/otelcol-svc/otelcol-svc/internal/streams"
)

// Agent results do not count against an account's month (docs/contract.md#section-10), so
// without a limit of their own they are storage anyone with an API key can fill. They
// are bounded by what the service asked for instead:
//
//   - a request id the service issued to the project (internal/requestid) may carry
//     at most ResultLimits.PerRequestID distinct results. Ids are issued only for agent
//     calls, and calls come from metered events, so matched results grow with what the
//     account paid for. The same result posted again (an agent retrying after a lost
//     202) is not charged twice: the allowance counts distinct payloads.
//   - results under any other id (made up, another project's, or posted while the
//     receiver could not tell) share a per-project allowance per clock hour,
//     ResultLimits.UnmatchedPerHour.
//
// Counts live in the KV bucket ResultsBucket, shared by every receiver (exact across
// processes: each charge is a compare-and-set). A request id's count lives as long as
// results do on the output stream (the bucket's TTL is the stream's max age), so the
// stream never holds more than the allowance per id; results kept for ever still give the
// bucket a TTL, ResultsTTLUnlimited, so that its keys do not grow without bound.

// ResultsBucket holds what each project's agent results used of their allowances.
const ResultsBucket = "svc-results"

// Which allowance refused a result (ResultLimitError.Limit).
const (
	LimitPerRequestID = "per_request_id"
	LimitUnmatched    = "unmatched_per_hour"
)

// ResultLimits are the allowances; 0 means no limit.
type ResultLimits struct {
	PerRequestID     int
	UnmatchedPerHour int
}

// ResultLimitError refuses a result: the allowance it would pass, and when the same
// result could pass (0: never, for this request id).
type ResultLimitError struct {
	Limit      string
	Max        int
	RetryAfter time.Duration
	msg        string
}

func (e *ResultLimitError) Error() string { return e.msg }

// ResultLimiter charges agent results to their allowances.
type ResultLimiter struct {
	kv     jetstream.KeyValue
	limits ResultLimits
	now    func() time.Time
}

// ResultsTTLUnlimited is how long ResultsBucket keeps a count when results themselves are
// kept without an age limit. Without one, every request id ever answered would stay a key
// for good. Past it a request id may take its allowance again, once per period: results
// then grow by at most PerRequestID per issued id and 8 days, and results.max_bytes still
// holds the stream whatever the ids.
const ResultsTTLUnlimited = 8 * 24 * time.Hour

// ResultsTTL is ResultsBucket's TTL for results kept keep (the output stream's max age,
// 0 = forever): as long as results, so that a request id never holds more than its
// allowance on the stream, or ResultsTTLUnlimited.
func ResultsTTL(keep time.Duration) time.Duration {
	if keep <= 0 {
		return ResultsTTLUnlimited
	}
	return keep
}

// OpenResultLimiter opens (or creates) ResultsBucket, bringing its TTL to ResultsTTL(keep);
// keep is how long results stay on the output stream (its max age; 0 = forever).
func OpenResultLimiter(ctx context.Context, js jetstream.JetStream, limits ResultLimits, keep time.Duration, replicas int) (*ResultLimiter, error) {
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: ResultsBucket, Description: "otelcol-svc agent results per request id and unmatched results per hour",
		History: 1, TTL: ResultsTTL(keep), Storage: jetstream.FileStorage, Replicas: max(replicas, 1),
	})
	if err != nil {
		return nil, fmt.Errorf("usage: open bucket %s: %w", ResultsBucket, err)
	}
	return &ResultLimiter{kv: kv, limits: limits, now: time.Now}, nil
}

// Admit charges one result of project, posted under requestID, before it is stored.
// matched says the service issued requestID to project. release gives an unmatched
// result's charge back when storing it failed (a matched one needs none: its retry
// carries the same payload, which is not charged again). An error other than a
// *ResultLimitError is NATS failing: storing would fail too.
func (l *ResultLimiter) Admit(ctx context.Context, project, requestID string, matched bool, payload []byte) (release func(), err error) {
	if matched {
		return func() {}, l.admitMatched(ctx, project, requestID, payload)
	}
	return l.admitUnmatched(ctx, project)
}

func (l *ResultLimiter) admitMatched(ctx context.Context, project, requestID string, payload []byte) error {
	if l.limits.PerRequestID <= 0 {
		return nil
	}
	// Keys take a restricted alphabet; a digest also keeps long ids from making long keys.
	id := sha256.Sum256([]byte(requestID))
	key := "id." + project + "." + hex.EncodeToString(id[:12])
	sum := sha256.Sum256(payload)
	h := []byte(hex.EncodeToString(sum[:8]))
	_, err := streams.UpdateKV(ctx, l.kv, key, func(old []byte, exists bool) ([]byte, error) {
		var have [][]byte
		if exists {
			have = bytes.Split(old, []byte(","))
		}
		for _, x := range have {
			if bytes.Equal(x, h) {
				return nil, streams.ErrKVUnchanged // the same result again: charged once
			}
		}
		if len(have) >= l.limits.PerRequestID {
			return nil, &ResultLimitError{Limit: LimitPerRequestID, Max: l.limits.PerRequestID, msg: fmt.Sprintf(
				"request id %s already has %d results, the most one agent call may answer (results per_request_id, %d); nothing was stored",
				requestID, len(have), l.limits.PerRequestID)}
		}
		if !exists {
			return h, nil
		}
		return append(append(bytes.Clone(old), ','), h...), nil
	})
	return l.kvError(err)
}

// kvError names the bucket in NATS's failures and passes refusals as they are.
func (l *ResultLimiter) kvError(err error) error {
	var refused *ResultLimitError
	if err == nil || errors.As(err, &refused) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("usage: %s: %w", ResultsBucket, err)
}

func (l *ResultLimiter) admitUnmatched(ctx context.Context, project string) (func(), error) {
	if l.limits.UnmatchedPerHour <= 0 {
		return func() {}, nil
	}
	now := l.now().UTC()
	key := "unmatched." + project + "." + now.Format("2006010215")
	err := l.add(ctx, key, 1, func(n int64) error {
		if n < int64(l.limits.UnmatchedPerHour) {
			return nil
		}
		next := now.Truncate(time.Hour).Add(time.Hour)
		return &ResultLimitError{Limit: LimitUnmatched, Max: l.limits.UnmatchedPerHour, RetryAfter: next.Sub(now), msg: fmt.Sprintf(
			"the project already stored %d results this hour under request ids the service did not issue to it, its limit (results unmatched_per_hour, %d); post results under the X-Request-Id the agent was called with, or retry after %s; nothing was stored",
			n, l.limits.UnmatchedPerHour, next.Format("15:04 UTC"))}
	})
	if err != nil {
		return nil, err
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = l.add(ctx, key, -1, func(int64) error { return nil })
	}, nil
}

// add adds d to the counter at key once check accepts its current value.
func (l *ResultLimiter) add(ctx context.Context, key string, d int64, check func(int64) error) error {
	_, err := streams.UpdateKV(ctx, l.kv, key, func(old []byte, exists bool) ([]byte, error) {
		var n int64
		if exists {
			var err error
			if n, err = strconv.ParseInt(string(old), 10, 64); err != nil {
				return nil, fmt.Errorf("%s holds %q: %w", key, old, err)
			}
		}
		if err := check(n); err != nil {
			return nil, err
		}
		return []byte(strconv.FormatInt(max(n+d, 0), 10)), nil
	})
	return l.kvError(err)
}
