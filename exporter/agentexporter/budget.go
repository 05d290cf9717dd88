package agentexporter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/pipelinectx"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
)

// BudgetBucket holds each project's agent calls in the current minute and UTC day, for
// max_calls_per_minute and max_calls_per_day.
//
// Why a JetStream KV entry per project and one compare-and-set per call: every pipeline
// process is connected to JetStream already (Redis is optional), and a compare-and-set
// on one entry holding both windows counts a call in both or in neither, so the limits
// are exact however many processes race. internal/usage's leases would save round
// trips, but an agent call costs an HTTP request and usually seconds of an LLM; two KV
// round trips (one when this process wrote the entry last) are noise beside it, and
// without leases nothing is stranded in another process.
const BudgetBucket = "svc-call-budget"

// budgetTTL lets the entry of a project that stopped calling go: past a day nothing in it
// still counts.
const budgetTTL = 25 * time.Hour

// Windows are fixed and calendar-based, in UTC: a minute is 16:04:00 to 16:04:59, a day
// midnight to midnight. A burst across a minute boundary can so make up to twice the
// per-minute limit within 60 seconds (the limit's value, fixed windows are what a user
// can reason about and what the ledger's counts match).
const (
	minuteLayout = "2006-01-02T15:04"
	dayLayout    = "2006-01-02"
)

// budgetEntry is a project's calls in its latest minute and day.
type budgetEntry struct {
	Minute string `json:"minute"`
	M      int    `json:"m"`
	Day    string `json:"day"`
	D      int    `json:"d"`
}

// verdict is what the budget says about one call.
type verdict int

const (
	withinBudget verdict = iota
	overPerMinute
	overPerDay
)

// callBudget counts calls against the projects' limits.
type callBudget struct {
	js       jetstream.JetStream
	replicas int
	now      func() time.Time

	mu sync.Mutex
	kv jetstream.KeyValue

	// last is the entry this process wrote last, per project, with its revision: the
	// usual case (one process calling a project's agent) then costs one round trip.
	cmu  sync.Mutex
	last map[string]cachedEntry
}

type cachedEntry struct {
	e   budgetEntry
	rev uint64
}

func newCallBudget(js jetstream.JetStream, replicas int, now func() time.Time) *callBudget {
	if now == nil {
		now = time.Now
	}
	return &callBudget{js: js, replicas: max(replicas, 1), now: now, last: map[string]cachedEntry{}}
}

// bucket binds to the bucket on first need (NATS may be away at Start), creating it when
// missing.
func (b *callBudget) bucket(ctx context.Context) (jetstream.KeyValue, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.kv != nil {
		return b.kv, nil
	}
	kv, err := b.js.KeyValue(ctx, BudgetBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = b.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket: BudgetBucket, Description: "otelcol-svc agent calls per project in the current minute and UTC day",
			History: 1, TTL: budgetTTL, Storage: jetstream.FileStorage, Replicas: b.replicas,
		})
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = b.js.KeyValue(ctx, BudgetBucket)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("call budget bucket %s: %w", BudgetBucket, err)
	}
	b.kv = kv
	return kv, nil
}

// take counts one call of project if it fits both limits (0: no limit) and says which
// limit it does not fit otherwise; it also returns the window the verdict is about. An
// error means nothing was counted and nothing can be said (NATS away).
func (b *callBudget) take(ctx context.Context, project string, perMinute, perDay int) (verdict, string, error) {
	kv, err := b.bucket(ctx)
	if err != nil {
		return withinBudget, "", err
	}
	b.cmu.Lock()
	c, haveCache := b.last[project]
	b.cmu.Unlock()
	var opts []streams.KVOption
	if haveCache {
		// What this process counted last: one round trip instead of two when no other
		// process counted a call of the project since.
		cached, err := json.Marshal(c.e)
		if err != nil {
			return withinBudget, "", err
		}
		opts = append(opts, streams.KVAssume(cached, c.rev))
	}
	v, window := withinBudget, ""
	var counted budgetEntry
	rev, err := streams.UpdateKV(ctx, kv, project, func(old []byte, exists bool) ([]byte, error) {
		var e budgetEntry
		if exists && json.Unmarshal(old, &e) != nil {
			// Unreadable (written by a future version?): start the windows again rather
			// than stop the project's calls for good.
			e = budgetEntry{}
		}
		e = advance(e, b.now())
		switch {
		case perDay > 0 && e.D >= perDay:
			v, window = overPerDay, e.Day
			return nil, streams.ErrKVUnchanged
		case perMinute > 0 && e.M >= perMinute:
			v, window = overPerMinute, e.Minute
			return nil, streams.ErrKVUnchanged
		}
		e.M++
		e.D++
		v, window, counted = withinBudget, e.Minute, e
		return json.Marshal(e)
	}, streams.KVAttempts(100))
	if err != nil {
		return withinBudget, "", fmt.Errorf("call budget of project %s: %w", project, err)
	}
	if v == withinBudget {
		b.cmu.Lock()
		b.last[project] = cachedEntry{e: counted, rev: rev}
		b.cmu.Unlock()
	}
	return v, window, nil
}

// advance moves e to now's windows. A window is only ever moved forward: a process
// whose clock lags keeps counting in the newer window another process opened, instead
// of resetting it.
func advance(e budgetEntry, now time.Time) budgetEntry {
	now = now.UTC()
	if m := now.Format(minuteLayout); m > e.Minute {
		e.Minute, e.M = m, 0
	}
	if d := now.Format(dayLayout); d > e.Day {
		e.Day, e.D = d, 0
	}
	return e
}

// budgetAllows counts c against its project's call budget and says whether it may be
// made. A call that does not fit is settled here: its records are marked suppressed for
// the ledger, it is counted on agent_calls_suppressed, and the owner is told once per
// project and window. An error means the budget could not be read: the call is neither
// made nor settled (its records are redelivered), so a NATS hiccup never lets calls
// past a limit.
func (e *agentExporter) budgetAllows(ctx context.Context, proj mirror.Project, c call) (bool, error) {
	perMinute, perDay := proj.Pipeline.MaxCallsPerMinute, proj.Pipeline.MaxCallsPerDay
	if perMinute <= 0 && perDay <= 0 {
		return true, nil // no budget: no round trip
	}
	// An incident call taken over from another process was charged when it was first
	// made (takeover.go).
	retaken := c.incident && c.requestID != ""
	if retaken {
		charged, err := e.budget.marked(ctx, proj.ID, markCharged, c.requestID)
		if err != nil {
			return false, fmt.Errorf("call budget of project %s: %w; the records will be redelivered", proj.ID, err)
		}
		if charged {
			return true, nil
		}
	}
	v, window, err := e.budget.take(ctx, proj.ID, perMinute, perDay)
	if err != nil {
		return false, fmt.Errorf("%w; the records will be redelivered", err)
	}
	if v == withinBudget {
		if retaken {
			e.budget.mark(ctx, proj.ID, markCharged, c.requestID)
		}
		return true, nil
	}
	// The call's triggers took their keys' cooldowns for it; not made, it gives them
	// back, so the keys' next calls are made once the budget allows and say how many
	// were held back, this one included.
	if err := pipelinectx.GiveBack(ctx, c.seqs); err != nil {
		return false, fmt.Errorf("call to the agent of project %s not made (call budget spent), and its cooldowns could not be given back: %w; the records will be redelivered", proj.ID, err)
	}
	pipelinectx.OutcomeFrom(ctx).Suppressed(c.seqs)
	setting, limit, budget := "max_calls_per_minute", perMinute, "per_minute"
	if v == overPerDay {
		setting, limit, budget = "max_calls_per_day", perDay, "per_day"
	}
	e.tel.AgentCallsSuppressed.Add(ctx, 1, metric.WithAttributeSet(attribute.NewSet(attribute.String("budget", budget))))
	if prev, _ := e.warnedBudget.Swap(proj.ID, setting+" "+window); prev != setting+" "+window {
		e.logger.Warn("agent call budget spent: calls are not made until the window ends; their records count as suppressed in the ledger",
			zap.String("project", proj.ID), zap.String("limit", setting), zap.Int("calls", limit),
			zap.String("window_utc", window))
	}
	return false, nil
}
