package jetstreamexporter

import (
	"context"
	"errors"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/records"
	"github.com/otelcol-svc/otelcol-svc/internal/pipelinectx"
)

// A request over its account's month, its project's rate or its results' allowances, or
// holding a record too large, is refused for a reason of the client's making: the client
// is told (429/413 with the limit), and there is nothing for the operator to fix.
// exporterhelper logs every error its push function returns at ERROR, with advice to
// enable retry_on_failure and sending_queue, which here would break "a 2xx means stored".
// So such refusals are counted (otelcol_jetstream_exporter_requests_refused, by the code
// the client was answered with) and exporterhelper's line about them goes to debug.

// refusalCode is the contract's error code of a refusal of the client's making, "" for
// any other error (storage away or full, a configuration problem: the operator's).
func refusalCode(err error) string {
	var th *pipelinectx.Throttled
	if errors.As(err, &th) {
		return th.Code
	}
	var tl *records.TooLargeError
	if errors.As(err, &tl) {
		return apierror.PayloadTooLarge
	}
	return ""
}

// countRefusals wraps a push function to count the refusals it returns.
func countRefusals[T any](e *jsExporter, push func(context.Context, T) error) func(context.Context, T) error {
	return func(ctx context.Context, data T) error {
		err := push(ctx, data)
		if code := refusalCode(err); code != "" && e.tel != nil && e.tel.JetstreamExporterRequestsRefused != nil {
			e.tel.JetstreamExporterRequestsRefused.Add(ctx, 1, metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", code))))
		}
		return err
	}
}

// helperFailureMessage starts exporterhelper's line about a failed export ("Exporting
// failed. Rejecting data. Try enabling retry_on_failure ...").
const helperFailureMessage = "Exporting failed."

// helperLogger is the logger given to exporterhelper: its line about a refusal of the
// client's making is written at debug, without the advice; every other line as it was.
func helperLogger(l *zap.Logger) *zap.Logger {
	return l.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core { return refusalCore{c} }))
}

type refusalCore struct{ zapcore.Core }

func (c refusalCore) With(fields []zapcore.Field) zapcore.Core {
	return refusalCore{c.Core.With(fields)}
}

func (c refusalCore) Check(ent zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if !strings.HasPrefix(ent.Message, helperFailureMessage) {
		return c.Core.Check(ent, ce)
	}
	// Whether it is a refusal shows only in the fields, which Write gets: take the entry
	// here when either level could be written.
	if c.Core.Enabled(ent.Level) || c.Core.Enabled(zapcore.DebugLevel) {
		return ce.AddCore(ent, c)
	}
	return ce
}

func (c refusalCore) Write(ent zapcore.Entry, fields []zapcore.Field) error {
	for _, f := range fields {
		if err, ok := f.Interface.(error); ok && f.Type == zapcore.ErrorType && refusalCode(err) != "" {
			ent.Level, ent.Message = zapcore.DebugLevel, "request refused for a reason of the client's making; the client was told"
			break
		}
	}
	// Through the wrapped core's Check, so that its sampling still thins out a flood of
	// the operator's errors (NATS away under load).
	if ce := c.Core.Check(ent, nil); ce != nil {
		ce.Write(fields...)
	}
	return nil
}
