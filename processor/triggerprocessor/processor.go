package triggerprocessor

import (
	"context"
	"fmt"
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
	"github.com/otelcol-svc/otelcol-svc/processor/triggerprocessor/internal/metadata"
)

type triggerProcessor struct {
	logger *zap.Logger
	// mirror is the configmirror extension whose configuration mirror it reads.
	mirror component.ID
	// redisURL selects the shared cooldown store; empty: memory.
	redisURL string
	// maxRecordBytes bounds a record while it is transformed.
	maxRecordBytes int
	// pipelines is this instance's compiled-pipeline cache, following the mirror.
	pipelines *pipelinecfg.Cache
	cooldowns windowstore.Cooldowns
	tel       *metadata.TelemetryBuilder
	// warned: a tenant's failing transform is its own mistake, not the operator's, so
	// it is counted per record (outcome error or too_large) and logged at debug, with
	// one WARN per project and configuration version.
	warned pipelinecfg.Once
}

// sweepInterval is how often the in-memory cooldowns drop the keys they no longer need.
const sweepInterval = 30 * time.Second

func newProcessor(set processor.Settings) (*triggerProcessor, error) {
	tel, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	return &triggerProcessor{logger: set.Logger, tel: tel}, nil
}

func (p *triggerProcessor) start(ctx context.Context, host component.Host) error {
	cache, err := mirrorcache.FromHost(host, p.mirror)
	if err != nil {
		return err
	}
	if p.redisURL == "" {
		p.cooldowns = windowstore.NewMemory(sweepInterval)
	} else {
		r, err := windowstore.NewRedis(p.redisURL)
		if err != nil {
			return err
		}
		// Redis being down at start is not fatal: batches under a cooldown are retried
		// until it is back, and projects without one never ask it.
		if err := r.Ping(ctx); err != nil {
			p.logger.Warn("Redis cooldown store not reachable yet", zap.Error(err))
		}
		p.cooldowns = r
	}
	p.pipelines = pipelinecfg.NewCache(cache)
	return nil
}

func (p *triggerProcessor) shutdown(context.Context) error {
	p.pipelines.Close()
	if p.cooldowns != nil {
		return p.cooldowns.Close()
	}
	return nil
}

var (
	outcomeMatched = metric.WithAttributes(attribute.String("outcome", "matched"))
	outcomeDropped = metric.WithAttributes(attribute.String("outcome", "dropped"))
	outcomeError   = metric.WithAttributes(attribute.String("outcome", "error"))
	// outcomeTooLarge: a transform grew the record past the record limit.
	outcomeTooLarge = metric.WithAttributes(attribute.String("outcome", "too_large"))
)

func (p *triggerProcessor) processLogs(ctx context.Context, ld plog.Logs) (plog.Logs, error) {
	project, c, ok, err := p.pipelines.ForRequest(ctx)
	if !ok || (err == nil && c.Mode != mirror.ModeLegacy) {
		return ld, nil // not ours: no project, or window or incident mode (the processors after this one)
	}
	if err != nil {
		return ld, err // the batch is delivered again; an invalid config pauses the project
	}
	var matched, dropped, failed, tooLarge, suppressed int64
	var storeErr error
	eval := pipelineeval.New(pipelineeval.Options{Cooldowns: p.cooldowns, MaxRecordBytes: p.maxRecordBytes})
	pipelinedata.RemoveIf(ld, func(lr plog.LogRecord) bool {
		if storeErr != nil {
			return false // the batch is retried whole
		}
		it := pipelinedata.Read(lr)
		res, err := eval.Legacy(ctx, project.ID, c, pipelineeval.Item{Seq: it.Seq, Signal: it.Signal, Body: it.Body})
		if err != nil {
			storeErr = err
			return false
		}
		switch res.Outcome {
		case pipelineeval.TooLarge:
			// Neither sent nor dropped unseen: the agent exporter dead-letters it with the
			// error, as it was stored, and the console shows why.
			tooLarge++
			pipelinedata.SetFailed(lr, pipelineeval.TooLargeReason(res.Err))
			p.logFailure(project.ID, c.Version, "record dead-lettered: a transform made it larger than the record limit", res.Err)
			return false
		case pipelineeval.Failed:
			failed++
			p.logger.Debug("record skipped", zap.String("project_id", project.ID), zap.Error(res.Err))
			return true
		case pipelineeval.Suppressed:
			suppressed++
			return true
		case pipelineeval.Matched:
			matched++
			if res.Changed {
				pipelinedata.SetBody(lr, res.Body)
			}
			pipelinedata.SetSuppressed(lr, res.SuppressedBefore)
			return false
		default:
			dropped++
			return true
		}
	})
	if storeErr != nil {
		return ld, fmt.Errorf("cooldown store: %w", storeErr)
	}
	p.tel.TriggerRecords.Add(ctx, matched, outcomeMatched)
	p.tel.TriggerRecords.Add(ctx, dropped, outcomeDropped)
	if suppressed > 0 {
		p.tel.TriggerSuppressed.Add(ctx, suppressed)
	}
	if tooLarge > 0 {
		p.tel.TriggerRecords.Add(ctx, tooLarge, outcomeTooLarge)
	}
	if failed > 0 {
		p.tel.TriggerRecords.Add(ctx, failed, outcomeError)
		p.logFailure(project.ID, c.Version, "records dropped: the trigger or a transform failed on them", nil, zap.Int64("records", failed))
	}
	if ld.LogRecordCount() == 0 {
		return ld, processorhelper.ErrSkipProcessingData
	}
	return ld, nil
}

// logFailure logs a failure of a project's own expressions: at WARN the first time for
// the project's configuration version, saying that the rest are only counted, and at
// debug after that.
func (p *triggerProcessor) logFailure(project string, version int64, msg string, err error, fields ...zap.Field) {
	fields = append(fields, zap.String("project_id", project), zap.Int64("config_version", version))
	if err != nil {
		fields = append(fields, zap.Error(err))
	}
	if p.warned.First(project, version) {
		p.logger.Warn(msg+" (further failures of this pipeline version are counted in otelcol_trigger_records and logged at debug)", fields...)
		return
	}
	p.logger.Debug(msg, fields...)
}
