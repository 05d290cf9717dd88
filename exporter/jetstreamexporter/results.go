package jetstreamexporter

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.uber.org/zap"

	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelinedata"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/principal"
	"github.com/otelcol-svc/otelcol-svc/internal/pipelinectx"
	"github.com/otelcol-svc/otelcol-svc/internal/requestid"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
	"github.com/otelcol-svc/otelcol-svc/internal/usage"
)

// ResultsConfig bounds what agent results each project stores. Results do not count
// against the account's month (docs/contract.md#section-10), so without these an API key could
// fill the service's storage through /internal/agent-output. 0 turns a bound off.
type ResultsConfig struct {
	// MaxBytes is each project's output stream budget (held like stream.max_bytes, by
	// the exporter rather than reserved in nats-server's store).
	MaxBytes int64 `mapstructure:"max_bytes"`
	// PerRequestID is the most distinct results one issued request id takes.
	PerRequestID int `mapstructure:"per_request_id"`
	// UnmatchedPerHour is the most results per project and clock hour (UTC) under ids
	// the service did not issue to the project.
	UnmatchedPerHour int `mapstructure:"unmatched_per_hour"`
}

// Defaults: a result is a summary or a decision (kilobytes), so 64 MiB holds tens of
// thousands; an agent answers a call once, and a few more allow progress messages.
const (
	defaultResultsMaxBytes     = 64 << 20
	defaultResultsPerRequestID = 3
	defaultUnmatchedPerHour    = 100
)

func defaultResultsConfig() ResultsConfig {
	return ResultsConfig{MaxBytes: defaultResultsMaxBytes, PerRequestID: defaultResultsPerRequestID, UnmatchedPerHour: defaultUnmatchedPerHour}
}

// Validate checks the results block.
func (c ResultsConfig) Validate() error {
	var errs []error
	if c.MaxBytes < 0 {
		errs = append(errs, errors.New("max_bytes must be 0 (no limit) or more"))
	}
	if c.PerRequestID < 0 {
		errs = append(errs, errors.New("per_request_id must be 0 (no limit) or more"))
	}
	if c.UnmatchedPerHour < 0 {
		errs = append(errs, errors.New("unmatched_per_hour must be 0 (no limit) or more"))
	}
	return errors.Join(errs...)
}

// resultGate opens, on the first result, what charging results needs: the allowance
// counts (usage.ResultLimiter) and the deployment's request-id key, to tell for itself
// whether an id was issued to the project rather than trust a receiver that may not have
// loaded the key yet.
type resultGate struct {
	mu  sync.Mutex
	lim *usage.ResultLimiter
	ids *requestid.Issuer
}

func (e *jsExporter) resultGate(ctx context.Context) (*usage.ResultLimiter, *requestid.Issuer, error) {
	if e.storage == nil { // not started
		return nil, nil, errNotConnected
	}
	e.storage.results.mu.Lock()
	defer e.storage.results.mu.Unlock()
	if e.storage.results.lim != nil && e.storage.results.ids != nil {
		return e.storage.results.lim, e.storage.results.ids, nil
	}
	if e.js == nil {
		return nil, nil, errNotConnected
	}
	ctx, cancel := context.WithTimeout(ctx, e.cfg.PublishTimeout)
	defer cancel()
	if e.storage.results.lim == nil {
		lim, err := usage.OpenResultLimiter(ctx, e.js, usage.ResultLimits{PerRequestID: e.cfg.Results.PerRequestID, UnmatchedPerHour: e.cfg.Results.UnmatchedPerHour},
			e.cfg.Stream.MaxAge, e.cfg.Stream.Replicas)
		if err != nil {
			return nil, nil, fmt.Errorf("storage (NATS JetStream) could not count the result (%v); retry later", err)
		}
		e.storage.results.lim = lim
	}
	// Without the key every result is charged as unmatched (the hourly allowance still
	// bounds them); the next result tries the key again.
	ids, err := requestid.Load(ctx, e.js)
	if err != nil {
		e.logger.Debug("request-id key not loaded: agent results are charged as unmatched until it is", zap.Error(err))
	}
	e.storage.results.ids = ids
	return e.storage.results.lim, ids, nil
}

// limitResults wraps the logs push function: an agent result is charged to its
// project's allowances, and its output stream held to results.max_bytes, before it is
// stored; a charge is given back when storing fails.
func (e *jsExporter) limitResults(push func(context.Context, plog.Logs) error) func(context.Context, plog.Logs) error {
	return func(ctx context.Context, ld plog.Logs) error {
		info := pipelinectx.IngestFrom(ctx)
		p, ok := principal.FromContext(ctx)
		if !info.Output || !ok || !streams.ValidProjectID(p.ProjectID) {
			return push(ctx, ld) // which refuses what is not a project's
		}
		if err := e.storage.admitResults(streams.OutputStream(p.ProjectID), e.cfg.Results.MaxBytes, e.cfg.Stream.MaxAge); err != nil {
			return err
		}
		var releases []func()
		giveBack := func() {
			for _, r := range releases {
				r()
			}
		}
		if e.cfg.Results.PerRequestID > 0 || e.cfg.Results.UnmatchedPerHour > 0 {
			lim, ids, err := e.resultGate(ctx)
			if err != nil {
				return err
			}
			matched := ids != nil && ids.Issued(p.ProjectID, info.RequestID)
			for lr := range pipelinedata.All(ld) {
				release, err := lim.Admit(ctx, p.ProjectID, info.RequestID, matched, lr.Body().Bytes().AsRaw())
				if err != nil {
					giveBack()
					return resultRefusal(err)
				}
				releases = append(releases, release)
			}
		}
		err := push(ctx, ld)
		if err != nil {
			giveBack()
		}
		return err
	}
}

func resultRefusal(err error) error {
	var le *usage.ResultLimitError
	if errors.As(err, &le) {
		return &pipelinectx.Throttled{Status: http.StatusTooManyRequests, Code: apierror.ResultsLimitExceeded, RetryAfter: le.RetryAfter, Err: le}
	}
	return fmt.Errorf("storage (NATS JetStream) could not count the result (%v); retry later", err)
}
