package e2e

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// The embedded default runs the agent and sink exporters in one process, and both emit
// the delivery instruments (otelcol_delivery_log_*, otelcol_target_*) under the same
// names. They must be one instrument: two would collide on the Prometheus endpoint, which
// leaves the instrumentation scope out, and /metrics answered 500 to every scrape.
func TestEmbeddedDefaultServesItsMetrics(t *testing.T) {
	col := testenv.StartCollector(t, testenv.CollectorOptions{Config: "configs/embedded.yaml"})
	var status int
	var body string
	require.Eventually(t, func() bool {
		resp, err := http.Get(col.Metrics)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		status, body = resp.StatusCode, string(b)
		return strings.Contains(body, "otelcol_delivery_log_dropped")
	}, 20*time.Second, 50*time.Millisecond, "the delivery log's metrics never appeared: last answer %d %.300s", status, body)
	assert.Equal(t, http.StatusOK, status)
	assert.Equal(t, 1, strings.Count(body, "# TYPE otelcol_delivery_log_dropped "), "one family, not one per exporter")
}
