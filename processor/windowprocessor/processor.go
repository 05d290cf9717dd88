package windowprocessor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processorhelper"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/otelcol-svc/otelcol-svc/internal/agentbody"
	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/mirrorcache"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/ottlevent"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelinecfg"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelinedata"
	"github.com/otelcol-svc/otelcol-svc/internal/deliverylog"
	"github.com/otelcol-svc/otelcol-svc/internal/windowstore"
	"github.com/otelcol-svc/otelcol-svc/processor/windowprocessor/internal/metadata"
)

type windowProcessor struct {
	cfg    *Config
	logger *zap.Logger
	// pipelines is this instance's compiled-pipeline cache, following the mirror.
	pipelines *pipelinecfg.Cache
	store     windowstore.Store

	tel *metadata.TelemetryBuilder
	// warned: a tenant's failing transform is its own mistake, not the operator's, so
	// it is counted per record (outcome error or too_large) and logged at debug, with
	// one WARN per project and configuration version.
	warned pipelinecfg.Once
}

func newProcessor(cfg *Config, set processor.Settings) (*windowProcessor, error) {
	tel, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	return &windowProcessor{cfg: cfg, logger: set.Logger, tel: tel}, nil
}

func (p *windowProcessor) start(ctx context.Context, host component.Host) error {
	cache, err := mirrorcache.FromHost(host, p.cfg.Mirror)
	if err != nil {
		return err
	}
	p.pipelines = pipelinecfg.NewCache(cache)
	if p.cfg.RedisURL == "" {
		p.store = windowstore.NewMemory(p.cfg.SweepInterval, windowstore.WithMaxProjectBytes(p.cfg.MemoryMaxProjectBytes),
			windowstore.WithMaxBytes(p.cfg.MemoryMaxBytes), windowstore.WithLogger(p.logger))
		p.logger.Info("window store: in memory (set REDIS_URL to share windows between pipeline processes)")
		return nil
	}
	r, err := windowstore.NewRedis(p.cfg.RedisURL)
	if err != nil {
		return err
	}
	// Redis being down at start is not fatal: batches are retried until it is back.
	if err := r.Ping(ctx); err != nil {
		p.logger.Warn("Redis window store not reachable yet", zap.Error(err))
	}
	p.store = r
	return nil
}

func (p *windowProcessor) shutdown(context.Context) error {
	p.pipelines.Close()
	if p.store != nil {
		return p.store.Close()
	}
	return nil
}

func outcome(o string) metric.MeasurementOption {
	return metric.WithAttributes(attribute.String("outcome", o))
}

func truncation(t string) metric.MeasurementOption {
	return metric.WithAttributes(attribute.String("truncation", t))
}

func (p *windowProcessor) processLogs(ctx context.Context, ld plog.Logs) (plog.Logs, error) {
	project, c, ok, err := p.pipelines.ForRequest(ctx)
	if !ok || (err == nil && !c.Window) {
		return ld, nil // not ours: no project, or legacy mode
	}
	if err != nil {
		return ld, err
	}
	out, calls := pipelinedata.New()
	var storeErr error
	pipelinedata.Each(ld, func(lr plog.LogRecord) {
		if storeErr != nil {
			return
		}
		storeErr = p.record(ctx, project.ID, c, pipelinedata.Read(lr), calls)
	})
	if storeErr != nil {
		// The window store is away: the whole batch is delivered again later. Adds are
		// idempotent (by stream sequence), so nothing is stored twice.
		return ld, storeErr
	}
	if calls.Len() == 0 {
		return out, processorhelper.ErrSkipProcessingData
	}
	return out, nil
}

// record runs one record through transforms, trigger and context filter. Only window
// store failures are returned (retryable); a record that cannot be evaluated is skipped.
func (p *windowProcessor) record(ctx context.Context, project string, c *pipelinecfg.Compiled, it pipelinedata.Item, calls plog.LogRecordSlice) error {
	rec, err := ottlevent.DecodeRecord(it.Body, it.Signal)
	if err != nil {
		p.skip(ctx, project, c.Version, err)
		return nil
	}
	rec.SetMaxBytes(p.cfg.MaxRecordBytes)
	body := it.Body
	if c.Transforms != nil {
		if err := c.Transforms.Apply(ctx, rec); err != nil {
			if errors.Is(err, ottlevent.ErrRecordTooLarge) {
				// Neither a trigger nor in a window, and not dropped unseen: the agent
				// exporter dead-letters it, as stored, with the error.
				pipelinedata.Append(calls, pipelinedata.Item{Body: it.Body, Signal: it.Signal, Kind: pipelinedata.KindFailed,
					Seq: it.Seq, Error: apierror.RecordTooLargeAfterTransforms + ": " + err.Error()})
				p.tel.WindowRecords.Add(ctx, 1, outcome("too_large"))
				p.logFailure(project, c.Version, "record dead-lettered: a transform made it larger than the record limit", err)
				return nil
			}
			p.skip(ctx, project, c.Version, err)
			return nil
		}
		if rec.Changed() {
			body = rec.AppendJSON(nil)
		}
	}
	group := ""
	if c.GroupKey != nil {
		if group, err = c.GroupKey.String(ctx, rec); err != nil {
			group = "" // a record without the group field goes to the empty group
		}
	}
	now := time.Now()
	if match, err := c.Trigger.Match(ctx, rec); err == nil && match {
		if err := p.trigger(ctx, project, c, it, rec, body, group, now, calls); err != nil {
			return err
		}
	}
	if pass, err := c.ContextFilter.Match(ctx, rec); err == nil && pass {
		if err := p.store.Add(ctx, project, group, it.Seq, body, now, c.WindowDuration); err != nil {
			return fmt.Errorf("window store: %w", err)
		}
		p.tel.WindowRecords.Add(ctx, 1, outcome("stored"))
	}
	return nil
}

// trigger emits the call of a trigger, unless its dedup key is cooling down: then the
// trigger is held back, counted for the key's next call, and marked suppressed in the
// ledger. The window is cut to the project's budget.
func (p *windowProcessor) trigger(ctx context.Context, project string, c *pipelinecfg.Compiled, it pipelinedata.Item,
	rec *ottlevent.Record, body []byte, group string, now time.Time, calls plog.LogRecordSlice) error {
	var suppressed int64
	if c.Cooldown > 0 {
		key := group
		if c.DedupKey != nil {
			var err error
			if key, err = c.DedupKey.String(ctx, rec); err != nil {
				key = "" // as the group key: a record without the field shares the empty key
			}
		}
		pass, n, err := p.store.Pass(ctx, project, key, it.Seq, c.Cooldown)
		if err != nil {
			return err
		}
		if !pass {
			deliverylog.OutcomeFrom(ctx).Suppressed([]uint64{it.Seq})
			p.tel.WindowSuppressed.Add(ctx, 1)
			return nil
		}
		suppressed = n
		windowstore.PassesFrom(ctx).Took(p.store, project, key, it.Seq)
	}
	window, total, err := p.store.Window(ctx, project, group, now.Add(-c.WindowDuration), c.WindowMaxEvents)
	if err != nil {
		return err
	}
	kept, markers := agentbody.FitWindow(window, c.WindowMaxBytes)
	leftOut := total - len(kept)
	if leftOut > 0 {
		p.tel.WindowTruncated.Add(ctx, int64(leftOut), truncation("left_out"))
	}
	if markers > 0 {
		p.tel.WindowTruncated.Add(ctx, int64(markers), truncation("cut"))
	}
	pipelinedata.Append(calls, pipelinedata.Item{Body: agentbody.WindowCall(body, kept, leftOut, suppressed), Signal: it.Signal,
		Kind: pipelinedata.KindWindowCall, Seq: it.Seq, Suppressed: suppressed, Group: group})
	p.tel.WindowRecords.Add(ctx, 1, outcome("triggered"))
	p.tel.WindowSize.Record(ctx, int64(len(kept)))
	return nil
}

func (p *windowProcessor) skip(ctx context.Context, project string, version int64, err error) {
	p.tel.WindowRecords.Add(ctx, 1, outcome("error"))
	p.logFailure(project, version, "record skipped: a transform or expression failed on it", err)
}

// logFailure logs a failure of a project's own expressions: at WARN the first time for
// the project's configuration version, saying that the rest are only counted, and at
// debug after that.
func (p *windowProcessor) logFailure(project string, version int64, msg string, err error) {
	fields := []zap.Field{zap.String("project_id", project), zap.Int64("config_version", version), zap.Error(err)}
	if p.warned.First(project, version) {
		p.logger.Warn(msg+" (further failures of this pipeline version are counted in otelcol_window_records and logged at debug)", fields...)
		return
	}
	p.logger.Debug(msg, fields...)
}
