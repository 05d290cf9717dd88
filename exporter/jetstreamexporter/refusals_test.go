package jetstreamexporter

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/records"
	"github.com/otelcol-svc/otelcol-svc/internal/pipelinectx"
)

// exporterhelper's failure line is the operator's only when the operator has something to
// fix: a refusal of the client's making goes to debug, storage unreachable stays ERROR.
func TestHelperLoggerKeepsErrorsForTheOperator(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	l := helperLogger(zap.New(core)).With(zap.String("exporter", "jetstream"))
	const line = "Exporting failed. Rejecting data. Try enabling retry_on_failure config option to retry on retryable errors."
	l.Error(line, zap.Error(&pipelinectx.Throttled{Status: http.StatusTooManyRequests, Code: apierror.QuotaExceeded, Err: assert.AnError}))
	l.Error(line, zap.Error(&records.TooLargeError{Index: 0, Size: 2, Limit: 1}))
	l.Error(line, zap.Error(errNotConnected))
	l.Error("something else", zap.Error(assert.AnError))

	all := logs.All()
	if assert.Len(t, all, 4) {
		assert.Equal(t, zapcore.DebugLevel, all[0].Level)
		assert.NotContains(t, all[0].Message, "retry_on_failure")
		assert.Equal(t, "jetstream", all[0].ContextMap()["exporter"], "fields of the logger are kept")
		assert.Equal(t, zapcore.DebugLevel, all[1].Level)
		assert.Equal(t, zapcore.ErrorLevel, all[2].Level, "storage away is the operator's")
		assert.Equal(t, zapcore.ErrorLevel, all[3].Level)
	}

	// With debug off, a refusal writes nothing.
	core, logs = observer.New(zapcore.InfoLevel)
	helperLogger(zap.New(core)).Error(line, zap.Error(&pipelinectx.Throttled{Code: apierror.RateLimited, Err: assert.AnError}))
	assert.Zero(t, logs.Len())
}
