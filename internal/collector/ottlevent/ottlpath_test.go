package ottlevent

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"

	"github.com/otelcol-svc/otelcol-svc/internal/ottlpath"
)

// The Fields view and the dashboard write paths by internal/ottlpath's rules; this
// context reads them. Every path the rules write for a field reads that very field,
// even where an alias, signal, event or a keyword shares its name.
func TestPathsWrittenByTheRulesReadTheirField(t *testing.T) {
	names := []string{"status", "attributes", "severityNumber", "severityText", "resourceAttributes", "traceId", "spanId",
		"severity_number", "trace_id", "signal", "event", "nil", "true", "and", "where", "durationMs", "_event_type",
		"http.method", "with space", `quo"te`}
	record := map[string]any{}
	for _, n := range names {
		record[n] = map[string]any{"k": "value of " + n}
	}
	data, err := json.Marshal(record)
	require.NoError(t, err)
	for _, n := range names {
		path := ottlpath.Path([]ottlpath.Key{{Name: n}, {Name: "k"}})
		c, err := CompileCondition(path+" == "+strconv.Quote("value of "+n), componenttest.NewNopTelemetrySettings())
		require.NoError(t, err, path)
		rec, err := DecodeRecord(data, "log")
		require.NoError(t, err)
		match, err := c.Match(context.Background(), rec)
		require.NoError(t, err, path)
		assert.True(t, match, "%s reads the field %q", path, n)
	}
}
