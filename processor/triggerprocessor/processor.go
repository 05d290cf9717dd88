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
	"github.com/otelcol-svc/otelcol-svc/internal/collector/ottlevent"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelinecfg"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelinedata"
	"github.com/otelcol-svc/otelcol-svc/internal/deliverylog"
	"github.com/otelcol-svc/otelcol-svc/internal/windowstore"
	"github.com/otelcol-svc/otelcol-svc/processor/triggerprocessor/internal/metadata"
)

type triggerProcessor struct {
	logger *zap.Logger
	// mirror is the projectauth extension whose configuration mirror it reads.
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
	if !ok || (err == nil && c.Window) {
		return ld, nil // not ours: no project, or window mode
	}
	if err != nil {
		return ld, err // the batch is delivered again; an invalid config pauses the project
	}
	var matched, dropped, failed, tooLarge, suppressed int64
	var storeErr error
	outcome := deliverylog.OutcomeFrom(ctx)
	pipelinedata.RemoveIf(ld, func(lr plog.LogRecord) bool {
		if storeErr != nil {
			return false // the batch is retried whole
		}
		keep, rec, err := p.record(ctx, c, lr)
		switch {
		case isTooLarge(err):
			// Neither sent nor dropped unseen: the agent exporter dead-letters it with the
			// error, as it was stored, and the console shows why.
			tooLarge++
			pipelinedata.SetFailed(lr, TooLargeReason(err))
			p.logFailure(project.ID, c.Version, "record dead-lettered: a transform made it larger than the record limit", err)
			return false
		case err != nil:
			failed++
			p.logger.Debug("record skipped", zap.String("project_id", project.ID), zap.Error(err))
		case keep && c.Cooldown > 0:
			var pass bool
			if pass, storeErr = p.cooldown(ctx, project.ID, c, lr, rec); storeErr != nil {
				return false
			}
			if !pass {
				suppressed++
				outcome.Suppressed([]uint64{pipelinedata.Read(lr).Seq})
				return true
			}
			matched++
		case keep:
			matched++
		default:
			dropped++
		}
		return !keep
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

// cooldown decides a matched record under the project's cooldown: it passes when its
// dedup key (one key per project by default) had no call within the cooldown, and then
// carries how many records of the key were held back before it (svc.suppressed).
func (p *triggerProcessor) cooldown(ctx context.Context, project string, c *pipelinecfg.Compiled, lr plog.LogRecord, rec *ottlevent.Record) (bool, error) {
	it := pipelinedata.Read(lr)
	key := ""
	if c.DedupKey != nil {
		if rec == nil {
			// Decoded in part, or not at all: the key may read any field.
			rec, _ = ottlevent.DecodeRecord(it.Body, it.Signal)
		}
		if rec != nil {
			if k, err := c.DedupKey.String(ctx, rec); err == nil {
				key = k // a record without the key's field shares the empty key
			}
		}
	}
	pass, n, err := p.cooldowns.Pass(ctx, project, key, it.Seq, c.Cooldown)
	if err != nil || !pass {
		return false, err
	}
	pipelinedata.SetSuppressed(lr, n)
	windowstore.PassesFrom(ctx).Took(p.cooldowns, project, key, it.Seq)
	return true, nil
}

// record runs the trigger, then the transforms, on one record. A record the trigger or a
// transform cannot evaluate is dropped (counted and logged), never retried: retrying
// cannot change the outcome and would stall the project. rec is the whole record as the
// agent gets it, or nil when it was not (wholly) decoded.
func (p *triggerProcessor) record(ctx context.Context, c *pipelinecfg.Compiled, lr plog.LogRecord) (bool, *ottlevent.Record, error) {
	if c.Trigger.String() == "" && c.Transforms == nil {
		return true, nil, nil // every record goes as it is: no need to decode it
	}
	it := pipelinedata.Read(lr)
	// Most records do not match: decode only what the trigger reads, and the whole
	// record only for a match that transforms will change.
	var rec *ottlevent.Record
	var err error
	if c.TriggerFields != nil {
		rec, err = ottlevent.DecodeRecordFields(it.Body, it.Signal, c.TriggerFields)
	} else {
		rec, err = ottlevent.DecodeRecord(it.Body, it.Signal)
	}
	if err != nil {
		return false, nil, err
	}
	rec.SetMaxBytes(p.maxRecordBytes)
	match, err := c.Trigger.Match(ctx, rec)
	if err != nil || !match {
		return false, nil, err
	}
	if c.Transforms == nil {
		if c.TriggerFields != nil {
			return true, nil, nil
		}
		return true, rec, nil
	}
	if c.TriggerFields != nil {
		if rec, err = ottlevent.DecodeRecord(it.Body, it.Signal); err != nil {
			return false, nil, err
		}
		rec.SetMaxBytes(p.maxRecordBytes)
	}
	if err := c.Transforms.Apply(ctx, rec); err != nil {
		return false, nil, err
	}
	if rec.Changed() {
		pipelinedata.SetBody(lr, rec.AppendJSON(nil))
	}
	return true, rec, nil
}
