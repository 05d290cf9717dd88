package jetstreamexporter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/dustin/go-humanize"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/mirrorcache"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/principal"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/pipelinectx"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
	"github.com/otelcol-svc/otelcol-svc/internal/usage"
)

// errMeterNotReady: the meter's buckets could not be opened yet (NATS away since Start).
// Storing would fail as well, so it is the same retryable answer.
var errMeterNotReady = errors.New("storage (NATS JetStream) is unreachable, so the records cannot be counted against the account's quota; retry later")

// metering is the usage block at work: the account's monthly quota (usage.Meter, shared
// by every receiver process through JetStream KV), the project's ingest rate
// (usage.RateLimiter, per process) and the notices to the account's sinks.
type metering struct {
	cfg    UsageConfig
	logger *zap.Logger
	e      *jsExporter

	cache   *mirrorcache.Cache
	limiter *usage.RateLimiter
	meter   atomic.Pointer[usage.Meter]

	unsubscribe func()
	cancel      context.CancelFunc
	opened      chan struct{} // closed when the opening goroutine has ended
	// unmetered remembers the projects already logged as not metered (no account).
	unmetered sync.Map
}

func newMetering(cfg UsageConfig, e *jsExporter) *metering {
	return &metering{
		cfg: cfg, logger: e.logger, e: e,
		limiter: usage.NewRateLimiter(usage.Rate{PerSecond: cfg.RateLimit.PerSecond, Burst: cfg.RateLimit.Burst}, nil),
	}
}

// start reads project rates from the mirror and opens the meter in the background: the
// exporter starts while NATS is away (the meter's buckets need it), and until the meter
// is open every raw request is answered as if storage were unreachable.
func (m *metering) start(host component.Host, js jetstream.JetStream) error {
	if host == nil {
		return errors.New("usage metering needs the configmirror extension named by usage.mirror")
	}
	cache, err := mirrorcache.FromHost(host, m.cfg.Mirror)
	if err != nil {
		return fmt.Errorf("usage: %w", err)
	}
	m.cache = cache
	m.unsubscribe = cache.Subscribe(func(ch mirrorcache.Change) {
		if ch.Bucket == mirror.BucketProjects {
			m.applyRate(ch.Key)
		}
	})
	for _, p := range cache.Projects() {
		m.applyRate(p.ID)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	m.opened = make(chan struct{})
	open := func() (struct{}, error) {
		octx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		meter, err := usage.Open(octx, js, usage.Config{
			DefaultLimit: m.cfg.FreeTierEvents,
			Replicas:     m.e.cfg.Stream.Replicas,
			OnNotice:     m.notify,
			OnError:      func(err error) { m.logger.Warn("usage metering", zap.Error(err)) },
		})
		if err != nil {
			return struct{}{}, err
		}
		m.meter.Store(meter)
		return struct{}{}, nil
	}
	if m.e.nc.IsConnected() {
		// NATS is there: open now, so that the first requests after the start are not
		// answered 503 for want of a meter.
		if _, err := open(); err == nil {
			close(m.opened)
			return nil
		}
	}
	go func() {
		defer close(m.opened)
		_, _ = backoff.Retry(ctx, open,
			backoff.WithBackOff(&backoff.ExponentialBackOff{InitialInterval: 200 * time.Millisecond, Multiplier: 2, MaxInterval: 5 * time.Second}),
			backoff.WithMaxElapsedTime(0),
			backoff.WithNotify(func(err error, in time.Duration) {
				m.logger.Warn("cannot open the usage meter's buckets yet; raw records are refused (503) until it is open", zap.Error(err), zap.Duration("retry_in", in))
			}),
		)
	}()
	return nil
}

// shutdown settles this process's leases and flushes the day counts, so that a restart
// loses no count and strands no quota. Before the NATS connection drains.
func (m *metering) shutdown(ctx context.Context) {
	if m.cancel == nil {
		return
	}
	m.cancel()
	<-m.opened
	if m.unsubscribe != nil {
		m.unsubscribe()
	}
	if meter := m.meter.Load(); meter != nil {
		// Bounded: with NATS away the leases cannot be settled, and a shutdown must not
		// hang on it (an unsettled lease is folded in by another meter later).
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if err := meter.Close(ctx); err != nil {
			m.logger.Warn("usage meter did not close cleanly", zap.Error(err))
		}
	}
}

// applyRate gives a project its own rate from the mirror, or back the default.
func (m *metering) applyRate(projectID string) {
	p, ok := m.cache.Project(projectID)
	if !ok || p.IngestRate == nil {
		m.limiter.ClearProject(projectID)
		return
	}
	m.limiter.SetProject(projectID, usage.Rate{PerSecond: p.IngestRate.PerSecond, Burst: p.IngestRate.Burst})
}

// account is who pays for the project's records: the key's account, else the project's
// in the mirror. Empty for entries written by a control plane older than metering (it
// republishes everything with accounts when it starts).
func (m *metering) account(p principal.Principal) string {
	if p.AccountID != "" {
		return p.AccountID
	}
	if proj, ok := m.cache.Project(p.ProjectID); ok {
		return proj.AccountID
	}
	return ""
}

// reserve admits a request's n raw records, or refuses them all: over the project's rate,
// over the account's month, or metering not possible now. The caller commits or refunds
// the reservation after publishing.
func (m *metering) reserve(ctx context.Context, p principal.Principal, n int, quota *pipelinectx.Quota) (usage.Reservation, error) {
	if d := m.limiter.Allow(p.ProjectID, n); !d.OK {
		m.e.refused(ctx, reasonRate, n)
		if d.TooLarge {
			m.countRefused(p, usage.ReasonTooLarge, n)
			return usage.Reservation{}, &pipelinectx.Throttled{
				Status: http.StatusRequestEntityTooLarge, Code: apierror.PayloadTooLarge,
				Err: fmt.Errorf("this request's %d records are more than the project's ingest rate limit lets through at once (its burst); send smaller requests; nothing was stored", n),
			}
		}
		m.countRefused(p, usage.ReasonRate, n)
		return usage.Reservation{}, &pipelinectx.Throttled{
			Status: http.StatusTooManyRequests, Code: apierror.RateLimited, RetryAfter: d.RetryAfter,
			Err: fmt.Errorf("the project is over its ingest rate limit; retry after %s; nothing was stored", apierror.RetryAfterSeconds(d.RetryAfter)+"s"),
		}
	}
	account := m.account(p)
	if account == "" {
		if _, seen := m.unmetered.Load(p.ProjectID); seen {
			return usage.Reservation{}, nil
		}
		if _, seen := m.unmetered.LoadOrStore(p.ProjectID, true); !seen {
			m.logger.Warn("the project's key and mirror entry name no account, so its records are not metered; the control plane writes accounts (restart it to republish the mirror)", zap.String("project_id", p.ProjectID))
		}
		return usage.Reservation{}, nil
	}
	meter := m.meter.Load()
	if meter == nil {
		return usage.Reservation{}, errMeterNotReady
	}
	res, err := meter.Reserve(ctx, account, p.ProjectID, int64(n))
	var qe *usage.QuotaError
	switch {
	case errors.As(err, &qe):
		m.e.refused(ctx, reasonQuota, n)
		return usage.Reservation{}, &pipelinectx.Throttled{
			Status: http.StatusTooManyRequests, Code: apierror.QuotaExceeded,
			RetryAfter: time.Duration(qe.RetryAfter()) * time.Second,
			Err:        fmt.Errorf("%w; nothing was stored", qe),
		}
	case err != nil:
		m.logger.Warn("cannot count records against the account's quota", zap.String("project_id", p.ProjectID), zap.Error(err))
		return usage.Reservation{}, errMeterNotReady
	}
	if quota != nil {
		if limit := meter.Limit(account); limit > 0 && res.Remaining >= 0 {
			*quota = pipelinectx.Quota{Limit: limit, Remaining: res.Remaining, Reset: usage.ResetAt(time.Now())}
		}
	}
	return res, nil
}

// countRefused counts a refusal decided here (not the quota's: the meter counts those)
// in the account's usage (refused_by_reason). Nothing before the meter is open, or
// without metering (m nil).
func (m *metering) countRefused(p principal.Principal, reason string, n int) {
	if m == nil {
		return
	}
	if meter := m.meter.Load(); meter != nil {
		meter.Refused(m.account(p), p.ProjectID, reason, int64(n))
	}
}

// keptCount is how many of a request's records stay counted once publishing is over:
// those JetStream added, so not a retried request's duplicates, which the attempt that
// stored them counted. A failed request without message ids counts none: the
// client retries it and the retry stores (and counts) every record again. With a key the
// retry skips what this attempt stored, so that part stays counted here.
func keptCount(info pipelinectx.Ingest, added int, err error) int {
	if err != nil && !info.HasMsgIDs() {
		return 0
	}
	return added
}

// settle commits a reservation's kept records and refunds the rest.
func (e *jsExporter) settle(ctx context.Context, projectID string, res usage.Reservation, n, kept int) {
	if kept >= n {
		res.Commit()
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.cfg.PublishTimeout)
	defer cancel()
	if err := res.CommitStored(rctx, int64(kept)); err != nil {
		e.logger.Warn("could not give back to the account's quota the records of a request that were not stored (failed, or duplicates of a retried request)", zap.String("project_id", projectID), zap.Error(err))
	}
}

// noticeBody is what an account's sinks receive at 80% and 100% of its month: a result
// like an agent's, whose "text" the chat sinks show and the webhook sinks get as JSON.
type noticeBody struct {
	Type    string    `json:"type"` // "usage_notice"
	Text    string    `json:"text"`
	Project string    `json:"project_id"`
	Month   string    `json:"month"`
	Percent int       `json:"percent"`
	Limit   int64     `json:"limit"`
	Used    int64     `json:"used"`
	ResetAt time.Time `json:"reset_at"`
}

// notify tells each of the account's projects that has an enabled sink, by publishing the
// notice on the project's output stream, where the sink role delivers it like an agent's
// result. It bypasses metering: notices are not usage. The meter calls it once per
// account, month and threshold across all receivers, and again (from any receiver) when
// it failed or its receiver died before it returned; the message id makes such a repeat
// a no-op within the stream's duplicate window, so a project already told is not told
// twice (usage/noticedelivery.go says what holds beyond the window). An error means some
// project was not told: the meter tries again later.
func (m *metering) notify(ctx context.Context, n usage.Notice) error {
	var errs []error
	for _, p := range m.cache.Projects() {
		if p.AccountID != n.Account || !hasEnabledSink(p) {
			continue
		}
		if !streams.ValidProjectID(p.ID) {
			// No retry can fix it.
			m.logger.Warn("a usage notice cannot be sent to a project whose id cannot name a stream", zap.String("project_id", p.ID))
			continue
		}
		name := p.Name
		if name == "" {
			name = p.ID
		}
		body, _ := json.Marshal(noticeBody{
			Type: "usage_notice", Text: noticeText(name, n), Project: p.ID, Month: n.Month,
			Percent: n.Percent, Limit: n.Limit, Used: n.Used, ResetAt: n.ResetAt,
		})
		if err := m.e.publishNotice(ctx, p.ID, noticeID(n, p.ID), body); err != nil {
			m.logger.Warn("could not send a usage notice to the project's sinks; it is sent again later", zap.String("project_id", p.ID), zap.Int("percent", n.Percent), zap.Error(err))
			errs = append(errs, fmt.Errorf("project %s: %w", p.ID, err))
		}
	}
	return errors.Join(errs...)
}

// noticeText is a usage notice in the service's own words, as every destination shows it
// (chat destinations without their text template, which is written for the agent's
// results: ":rotating_light: [{severity}] {text}" made "[] checkout-prod: 100% of…").
// The limit is the account's, shared by its projects, so the sentence says whose.
func noticeText(project string, n usage.Notice) string {
	reset := n.ResetAt.UTC().Format("2 January 2006 15:04 UTC")
	limit := humanize.Comma(n.Limit)
	if n.Percent >= 100 {
		return fmt.Sprintf("otelcol-svc: the account of project %s has used 100%% of this month's %s events; "+
			"new events are refused (429 quota_exceeded) until %s. Ask for a higher limit, or send fewer events until then.",
			project, limit, reset)
	}
	return fmt.Sprintf("otelcol-svc: the account of project %s has used %d%% of this month's %s events (%s); "+
		"at 100%% new events are refused until %s.", project, n.Percent, limit, humanize.Comma(n.Used), reset)
}

// noticeID is the notice's request and msg id on a project's output stream: the same for
// every attempt, so that JetStream drops a repeat. The limit is part of it: a new limit
// (accounts set-limit) earns its own notices, which must not be dropped as repeats.
func noticeID(n usage.Notice, projectID string) string {
	return "notice-" + n.Account + "-" + n.Month + "-" + strconv.FormatInt(n.Limit, 10) + "-" + strconv.Itoa(n.Percent) + "-" + projectID
}

func hasEnabledSink(p mirror.Project) bool {
	for _, s := range p.Sinks {
		if s.Enabled {
			return true
		}
	}
	return false
}

// publishNotice stores one notice on the project's output stream, as the receiver stores
// an agent's result (its request id is the notice id).
func (e *jsExporter) publishNotice(ctx context.Context, projectID, id string, body []byte) error {
	if !streams.ValidProjectID(projectID) {
		return fmt.Errorf("project id %q cannot name a stream", projectID)
	}
	if _, err := e.ensureStream(ctx, streams.OutputConfig(projectID, e.cfg.Stream)); err != nil {
		return err
	}
	// A notice, not an agent's result: the sink role sends its text as it is.
	if _, err := e.js.PublishMsg(ctx, streams.NoticeMsg(projectID, id, body)); err != nil {
		return err
	}
	e.waker.wake(streams.WakeOutput, projectID)
	return nil
}

// Why a request's records were refused by metering (the throttled-records metric's
// reason attribute), as measurement options built once.
var (
	reasonQuota = metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", "quota")))
	reasonRate  = metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", "rate")))
)

// refused counts records refused by the quota or the rate limit.
func (e *jsExporter) refused(ctx context.Context, reason metric.AddOption, n int) {
	if e.tel != nil && e.tel.JetstreamExporterRecordsThrottled != nil {
		e.tel.JetstreamExporterRecordsThrottled.Add(ctx, int64(n), reason)
	}
}
