package pipelineeval

import (
	"context"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/processor"

	"github.com/otelcol-svc/otelcol-svc/internal/pipelinectx"
)

// WithPasses wraps a processor so that each batch gets a pipelinectx.Passes before it
// runs: the agent exporter after it gives back the cooldowns of the calls its call
// budget refuses.
func WithPasses(l processor.Logs) processor.Logs { return passesLogs{l} }

type passesLogs struct{ processor.Logs }

func (l passesLogs) ConsumeLogs(ctx context.Context, ld plog.Logs) error {
	return l.Logs.ConsumeLogs(pipelinectx.WithPasses(ctx), ld)
}
