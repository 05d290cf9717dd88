package usage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/otelcol-svc/otelcol-svc/internal/streams"
)

// Why a request's records were refused: the keys of the usage API's refused_by_reason,
// one per kind of limit the receiver answers a refusal for (contract §2's codes).
const (
	// ReasonQuota: the account's month is used up (429 quota_exceeded).
	ReasonQuota = "quota"
	// ReasonRate: the project's ingest rate limit (429 rate_limited).
	ReasonRate = "rate"
	// ReasonTooLarge: a body, record or request larger than a limit allows
	// (413 payload_too_large), including a request over the rate limit's burst.
	ReasonTooLarge = "too_large"
	// ReasonLimits: another per-account limit, such as the account's share of the bytes a
	// receiver reads at once (503 unavailable, max_inflight_bytes_per_account).
	ReasonLimits = "limits"
)

// RefusingWindow: an account whose last quota refusal is more recent than this is
// "refusing now" (refusing_since) even with records left, as a batch sender whose requests
// do not fit in what is left is refused while single events would still pass.
const RefusingWindow = 5 * time.Minute

// maxPendingRefusals bounds the (account, month, project) counts waiting for a flush; a
// storm over more projects than this within a flush loses the excess (reported).
const maxPendingRefusals = 10_000

// refusalKey is r.<account>.<YYYY-MM>.<project>: one project's refusals of a month.
func refusalKey(account, month, project string) string {
	return "r." + token(account) + "." + month + "." + token(project)
}

// refusalValue is the JSON of a refusal key. Quota* are about the account's quota
// refusals from this project: when the first and last were, and under which limit (a new
// limit from accounts set-limit starts a new "refusing since").
type refusalValue struct {
	ByReason   map[string]int64 `json:"by_reason"`
	QuotaFirst time.Time        `json:"quota_first,omitzero"`
	QuotaLast  time.Time        `json:"quota_last,omitzero"`
	QuotaLimit int64            `json:"quota_limit,omitempty"`
}

// merge adds b (newer) into v.
func (v *refusalValue) merge(b refusalValue) {
	if v.ByReason == nil {
		v.ByReason = map[string]int64{}
	}
	for r, n := range b.ByReason {
		v.ByReason[r] += n
	}
	if b.QuotaFirst.IsZero() {
		return
	}
	if v.QuotaFirst.IsZero() || v.QuotaLimit != b.QuotaLimit {
		v.QuotaFirst, v.QuotaLast, v.QuotaLimit = b.QuotaFirst, b.QuotaLast, b.QuotaLimit
		return
	}
	if b.QuotaFirst.Before(v.QuotaFirst) {
		v.QuotaFirst = b.QuotaFirst
	}
	if b.QuotaLast.After(v.QuotaLast) {
		v.QuotaLast = b.QuotaLast
	}
}

type refusalID struct{ account, month, project string }

// RefusalCounter counts refused records per account, month, project and reason in the
// usage bucket, beside the accepted counts. A refusal must stay cheap, above all in a
// storm of them (a client retrying past its quota), so Add only adds in memory and the
// counts go to KV once per flush (each second): one compare-and-set per project that was
// refused in that second, whatever the number of requests. Several processes (every
// receiver, and in each the meter and the receiver's own checks) add to the same keys;
// the compare-and-set makes their sums exact.
type RefusalCounter struct {
	clock func() time.Time

	mu      sync.Mutex
	kv      jetstream.KeyValue // nil until bound: counts wait in memory
	pending map[refusalID]*refusalValue
	lost    int64
}

// NewRefusalCounter counts in memory until Open binds it to the bucket. clock may be nil.
func NewRefusalCounter(clock func() time.Time) *RefusalCounter {
	if clock == nil {
		clock = time.Now
	}
	return &RefusalCounter{clock: clock, pending: map[refusalID]*refusalValue{}}
}

// Open binds the counter to the usage bucket, creating it when missing with replicas;
// replicas 0 only binds (jetstream.ErrBucketNotFound until a meter created it), for a
// process that does not know the deployment's replicas and must not create the bucket
// with the wrong number.
func (c *RefusalCounter) Open(ctx context.Context, js jetstream.JetStream, replicas int) error {
	var kv jetstream.KeyValue
	var err error
	if replicas <= 0 {
		kv, err = js.KeyValue(ctx, BucketUsage)
	} else {
		kv, err = openUsageBucket(ctx, js, replicas)
	}
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.kv = kv
	c.mu.Unlock()
	return nil
}

// Add counts n refused records of project for reason. limit is the account's limit for
// a quota refusal (ignored otherwise). Without an account nothing is counted: the usage
// answers are per account, and such a project is not metered either.
func (c *RefusalCounter) Add(account, project, reason string, n, limit int64) {
	if c == nil || account == "" || n <= 0 {
		return
	}
	now := c.clock().UTC()
	id := refusalID{account: account, month: Month(now), project: project}
	c.mu.Lock()
	defer c.mu.Unlock()
	v := c.pending[id]
	if v == nil {
		if len(c.pending) >= maxPendingRefusals {
			c.lost += n
			return
		}
		v = &refusalValue{ByReason: map[string]int64{}}
		c.pending[id] = v
	}
	v.ByReason[reason] += n
	if reason == ReasonQuota {
		if v.QuotaFirst.IsZero() || v.QuotaLimit != limit {
			v.QuotaFirst, v.QuotaLimit = now, limit
		}
		v.QuotaLast = now
	}
}

// Flush writes the counts added since the last flush, one compare-and-set per key. What
// cannot be written stays for the next flush.
func (c *RefusalCounter) Flush(ctx context.Context) error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	kv, lost := c.kv, c.lost
	if kv != nil {
		c.lost = 0
	}
	c.mu.Unlock()
	if kv == nil {
		return nil
	}
	var errs []error
	if lost > 0 {
		errs = append(errs, fmt.Errorf("usage: %d refused records were not counted: more than %d projects were refused within one flush", lost, maxPendingRefusals))
	}
	errs = append(errs, streams.FlushPending(&c.mu, &c.pending, func(id refusalID, b *refusalValue) error {
		return addRefusals(ctx, kv, refusalKey(id.account, id.month, id.project), *b)
	}, func(failed, newer *refusalValue) *refusalValue {
		// failed is older, so it goes under the newer counts.
		failed.merge(*newer)
		return failed
	}))
	return errors.Join(errs...)
}

// Run flushes every interval until ctx ends, then once more within a few seconds, and
// reports flush errors to onError (may be nil).
func (c *RefusalCounter) Run(ctx context.Context, interval time.Duration, onError func(error)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	report := func(err error) {
		if err != nil && onError != nil {
			onError(err)
		}
	}
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			report(c.Flush(fctx))
			cancel()
			return
		case <-t.C:
			report(c.Flush(ctx))
		}
	}
}

func addRefusals(ctx context.Context, kv jetstream.KeyValue, key string, b refusalValue) error {
	_, err := streams.UpdateKV(ctx, kv, key, func(old []byte, _ bool) ([]byte, error) {
		var v refusalValue
		// A damaged value restarts from the batch rather than block every flush.
		_ = json.Unmarshal(old, &v)
		v.merge(b)
		return json.Marshal(v)
	}, streams.KVAttempts(0))
	if err != nil {
		return fmt.Errorf("usage: %w", err)
	}
	return nil
}
