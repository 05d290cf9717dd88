package triggerprocessor

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processorhelper"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/otelcol-svc/otelcol-svc/components/mirror/mirrorcache"
	"github.com/otelcol-svc/otelcol-svc/components/ottlevent"
	"github.com/otelcol-svc/otelcol-svc/components/pipelinecfg"
	"github.com/otelcol-svc/otelcol-svc/components/pipelinedata"
	"github.com/otelcol-svc/otelcol-svc/processor/triggerprocessor/internal/metadata"
)

type triggerProcessor struct {
	logger *zap.Logger
	// mirror is the projectauth extension whose configuration mirror it reads.
	mirror component.ID
	// pipelines is this instance's compiled-pipeline cache, following the mirror.
	pipelines *pipelinecfg.Cache
	tel       *metadata.TelemetryBuilder
}

func newProcessor(set processor.Settings) (*triggerProcessor, error) {
	tel, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	return &triggerProcessor{logger: set.Logger, tel: tel}, nil
}

func (p *triggerProcessor) start(_ context.Context, host component.Host) error {
	cache, err := mirrorcache.FromHost(host, p.mirror)
	if err != nil {
		return err
	}
	p.pipelines = pipelinecfg.NewCache(cache)
	return nil
}

func (p *triggerProcessor) shutdown(context.Context) error {
	p.pipelines.Close()
	return nil
}

var (
	outcomeMatched = metric.WithAttributes(attribute.String("outcome", "matched"))
	outcomeDropped = metric.WithAttributes(attribute.String("outcome", "dropped"))
	outcomeError   = metric.WithAttributes(attribute.String("outcome", "error"))
)

func (p *triggerProcessor) processLogs(ctx context.Context, ld plog.Logs) (plog.Logs, error) {
	project, c, ok, err := p.pipelines.ForRequest(ctx)
	if !ok || (err == nil && c.Window) {
		return ld, nil // not ours: no project, or window mode
	}
	if err != nil {
		return ld, err // the batch is delivered again; an invalid config pauses the project
	}
	var matched, dropped, failed int64
	pipelinedata.RemoveIf(ld, func(lr plog.LogRecord) bool {
		keep, err := p.record(ctx, c, lr)
		switch {
		case err != nil:
			failed++
			p.logger.Debug("record skipped", zap.String("project_id", project.ID), zap.Error(err))
		case keep:
			matched++
		default:
			dropped++
		}
		return !keep
	})
	p.tel.TriggerRecords.Add(ctx, matched, outcomeMatched)
	p.tel.TriggerRecords.Add(ctx, dropped, outcomeDropped)
	if failed > 0 {
		p.tel.TriggerRecords.Add(ctx, failed, outcomeError)
		p.logger.Warn("records dropped: the trigger or a transform failed on them",
			zap.String("project_id", project.ID), zap.Int64("records", failed))
	}
	if ld.LogRecordCount() == 0 {
		return ld, processorhelper.ErrSkipProcessingData
	}
	return ld, nil
}

// record runs the trigger, then the transforms, on one record. A record the trigger or a
// transform cannot evaluate is dropped (counted and logged), never retried: retrying
// cannot change the outcome and would stall the project.
func (p *triggerProcessor) record(ctx context.Context, c *pipelinecfg.Compiled, lr plog.LogRecord) (bool, error) {
	if c.Trigger.String() == "" && c.Transforms == nil {
		return true, nil // every record goes as it is: no need to decode it
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
		return false, err
	}
	match, err := c.Trigger.Match(ctx, rec)
	if err != nil || !match {
		return false, err
	}
	if c.Transforms == nil {
		return true, nil
	}
	if c.TriggerFields != nil {
		if rec, err = ottlevent.DecodeRecord(it.Body, it.Signal); err != nil {
			return false, err
		}
	}
	if err := c.Transforms.Apply(ctx, rec); err != nil {
		return false, err
	}
	if rec.Changed() {
		pipelinedata.SetBody(lr, rec.AppendJSON(nil))
	}
	return true, nil
}
