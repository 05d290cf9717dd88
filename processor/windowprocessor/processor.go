package windowprocessor

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processorhelper"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/mirrorcache"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelinecfg"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelinedata"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelineeval"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
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
	if !ok || (err == nil && c.Mode != mirror.ModeWindow) {
		return ld, nil // not ours: no project, or legacy or incident mode (the incident processor after this one)
	}
	if err != nil {
		return ld, err
	}
	out, calls := pipelinedata.New()
	var storeErr error
	eval := pipelineeval.New(pipelineeval.Options{Windows: p.store, Cooldowns: p.store, MaxRecordBytes: p.cfg.MaxRecordBytes})
	pipelinedata.Each(ld, func(lr plog.LogRecord) {
		if storeErr != nil {
			return
		}
		storeErr = p.record(ctx, eval, project.ID, c, pipelinedata.Read(lr), calls)
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

// record runs one record through the pipeline's evaluation and counts what it did. Only
// window store failures are returned (retryable); a record that cannot be evaluated is
// skipped.
func (p *windowProcessor) record(ctx context.Context, eval *pipelineeval.Evaluator, project string, c *pipelinecfg.Compiled, it pipelinedata.Item, calls plog.LogRecordSlice) error {
	res, err := eval.Window(ctx, project, c, pipelineeval.Item{Seq: it.Seq, Signal: it.Signal, Body: it.Body, Time: time.Now()})
	switch {
	case res.TooLarge:
		// Neither a trigger nor in a window, and not dropped unseen: the agent
		// exporter dead-letters it, as stored, with the error.
		pipelinedata.Append(calls, pipelinedata.Item{Body: it.Body, Signal: it.Signal, Kind: pipelinedata.KindFailed,
			Seq: it.Seq, Error: pipelineeval.TooLargeReason(res.Err)})
		p.tel.WindowRecords.Add(ctx, 1, outcome("too_large"))
		p.logFailure(project, c.Version, "record dead-lettered: a transform made it larger than the record limit", res.Err)
		return nil
	case res.Skipped:
		p.skip(ctx, project, c.Version, res.Err)
		return nil
	}
	if res.Suppressed {
		p.tel.WindowSuppressed.Add(ctx, 1)
	}
	if call := res.Call; call != nil {
		if call.LeftOut > 0 {
			p.tel.WindowTruncated.Add(ctx, int64(call.LeftOut), truncation("left_out"))
		}
		if call.Markers > 0 {
			p.tel.WindowTruncated.Add(ctx, int64(call.Markers), truncation("cut"))
		}
		pipelinedata.Append(calls, pipelinedata.Item{Body: call.Body, Signal: it.Signal,
			Kind: pipelinedata.KindWindowCall, Seq: it.Seq, Suppressed: call.Suppressed, Group: res.Group})
		p.tel.WindowRecords.Add(ctx, 1, outcome("triggered"))
		p.tel.WindowSize.Record(ctx, int64(call.Window))
	}
	if res.Stored {
		p.tel.WindowRecords.Add(ctx, 1, outcome("stored"))
	}
	return err
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
