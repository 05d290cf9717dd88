package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/streams"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// With a client no one here wrote: telemetrygen (collector-contrib's
// load generator, pinned in internal/tools/telemetrygen) sends spans with links and logs
// over OTLP/gRPC and OTLP/HTTP, and they land on the raw stream with those fields.
//
// What telemetrygen v0.161.0 cannot send, TestOTLPSpanLinksAndLogEventNameLand covers with
// pdata: `telemetrygen logs` has no flag for a log's event name (its record factory leaves
// EventName unset), and no flag sets a span's or a link's trace state (the spans it starts
// have no parent carrying one), so both arrive empty here.
func TestTelemetrygenSpanLinksAndLogsLand(t *testing.T) {
	bin := telemetrygenBinary(t)
	e := startReceiver(t, nil)
	for _, tc := range []struct {
		transport string
		endpoint  string
		flags     []string
	}{
		{"grpc", e.col.GRPC, nil},
		{"http", strings.TrimPrefix(e.col.HTTP, "http://"), []string{"--otlp-http"}},
	} {
		t.Run(tc.transport, func(t *testing.T) {
			project := "tgen-" + tc.transport
			key := e.project(t, project)
			common := append([]string{
				"--otlp-endpoint", tc.endpoint, "--otlp-insecure",
				"--otlp-header", `x-api-key="` + key + `"`,
				"--service", "tgen-" + tc.transport,
				// No throttling: the default of one record a second only makes the test slow.
				"--rate", "0",
			}, tc.flags...)

			// Two traces of a parent and one child each: every span but the very first
			// links to two spans started before it.
			tracesOut := runTelemetrygen(t, bin, append([]string{"traces", "--traces", "2", "--child-spans", "1", "--span-links", "2"}, common...)...)
			logsOut := runTelemetrygen(t, bin, append([]string{"logs", "--logs", "2",
				"--body", "payment failed", "--severity-number", "17", "--severity-text", "ERROR",
				"--trace-id", "5b8efff798038103d269b633813fc60c", "--span-id", "eee19b7ec3c1b174",
				"--telemetry-attributes", `order.id="o-42"`}, common...)...)

			spans, logs := bySignal(t, stored(t, e.js, project))
			require.Len(t, spans, 4, "telemetrygen's spans on the raw stream; it said:\n%s", tracesOut)
			require.Len(t, logs, 2, "telemetrygen's logs on the raw stream; it said:\n%s", logsOut)
			assertLinkedSpans(t, spans, "tgen-"+tc.transport)
			for _, l := range logs {
				assert.Equal(t, "payment failed", l["body"])
				assert.Equal(t, json.Number("17"), l["severityNumber"])
				assert.Equal(t, "ERROR", l["severityText"])
				assert.Equal(t, "5b8efff798038103d269b633813fc60c", l["traceId"])
				assert.Equal(t, "eee19b7ec3c1b174", l["spanId"])
				assert.Equal(t, map[string]any{"app": "server", "order.id": "o-42"}, l["attributes"])
				assert.Equal(t, "tgen-"+tc.transport, l["resourceAttributes"].(map[string]any)["service.name"])
				assert.Equal(t, "", l["eventName"], "telemetrygen sets no event name")
				assertTimestamp(t, l["timestamp"])
			}
		})
	}
}

// assertLinkedSpans checks telemetrygen's two traces: the spans that have links carry two
// each, every link names a span that landed too (telemetrygen links to spans it started
// before) with the attributes telemetrygen gives it, and the trace states are empty.
func assertLinkedSpans(t *testing.T, spans []map[string]any, service string) {
	t.Helper()
	landed := map[string]bool{}
	for _, s := range spans {
		landed[s["traceId"].(string)+"/"+s["spanId"].(string)] = true
	}
	withLinks := 0
	for _, s := range spans {
		assert.Equal(t, service, s["resourceAttributes"].(map[string]any)["service.name"])
		assert.Equal(t, "", s["traceState"], "telemetrygen sets no trace state")
		assertTimestamp(t, s["timestamp"])
		links, ok := s["links"].([]any)
		require.True(t, ok, "span %v has no links array", s["name"])
		if len(links) == 0 {
			continue
		}
		withLinks++
		require.Len(t, links, 2, "span %v", s["name"])
		for i, l := range links {
			link := l.(map[string]any)
			target := fmt.Sprint(link["traceId"]) + "/" + fmt.Sprint(link["spanId"])
			assert.True(t, landed[target], "span %v links to %s, which did not land", s["name"], target)
			assert.Equal(t, "", link["traceState"])
			assert.Equal(t, map[string]any{"link.type": "random", "link.index": json.Number(fmt.Sprint(i))}, link["attributes"])
		}
	}
	// The first span started has nothing to link to yet; the three after it do.
	assert.Equal(t, 3, withLinks, "spans with links")
}

func assertTimestamp(t *testing.T, v any) {
	t.Helper()
	s, _ := v.(string)
	ts, err := time.Parse(time.RFC3339Nano, s)
	if assert.NoError(t, err, "timestamp %v", v) {
		assert.WithinDuration(t, time.Now(), ts, time.Hour, "telemetrygen stamps records with the time it sends them")
	}
}

// bySignal decodes the raw stream's records and splits them by the signal header.
func bySignal(t *testing.T, msgs []*jetstream.RawStreamMsg) (spans, logs []map[string]any) {
	t.Helper()
	for _, m := range msgs {
		switch sig := m.Header.Get(streams.HeaderSignal); sig {
		case "span":
			spans = append(spans, decodeRecord(t, m.Data))
		case "log":
			logs = append(logs, decodeRecord(t, m.Data))
		default:
			t.Fatalf("unexpected signal %q: %s", sig, m.Data)
		}
	}
	return spans, logs
}

// runTelemetrygen runs one telemetrygen command to its end and returns what it printed.
// It waits for its exports' answers before it exits, so the records are on the raw stream
// by then. `telemetrygen logs` exits non-zero when an export is refused, but `telemetrygen
// traces` only prints the error and exits 0: its output goes into the failure messages.
func runTelemetrygen(t *testing.T, bin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	require.NoError(t, err, "telemetrygen %s:\n%s", strings.Join(redactKey(args), " "), out)
	return string(out)
}

// redactKey keeps the project key out of a failure message.
func redactKey(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		if strings.HasPrefix(a, "x-api-key=") {
			a = `x-api-key="…"`
		}
		out[i] = a
	}
	return out
}

var (
	telemetrygenOnce sync.Once
	telemetrygenBin  string
	// telemetrygenSkip is why the binary could not be had without a network (the
	// modules are not in the module cache); telemetrygenErr is any other failure.
	telemetrygenSkip, telemetrygenErr error
)

// telemetrygenBinary builds the pinned telemetrygen to bin/telemetrygen, as make
// bin/telemetrygen does, so the test does not depend on make having run; go build leaves
// an up-to-date binary as it is, so this is quick after the first time. Without a network
// to fetch its modules the test is skipped, except under CI.
func telemetrygenBinary(t *testing.T) string {
	t.Helper()
	telemetrygenOnce.Do(func() {
		root := testenv.RepoRoot()
		dir := filepath.Join(root, "internal", "tools", "telemetrygen")
		telemetrygenBin = filepath.Join(root, "bin", "telemetrygen")
		goCmd := func(args ...string) ([]byte, error) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, "go", args...)
			cmd.Dir = dir
			// The tools module stands alone; a go.work of the developer's must not pull it in.
			cmd.Env = append(os.Environ(), "GOWORK=off")
			return cmd.CombinedOutput()
		}
		// Downloading first tells a missing network apart from a build that fails.
		if out, err := goCmd("mod", "download"); err != nil {
			telemetrygenSkip = fmt.Errorf("go mod download in internal/tools/telemetrygen: %v\n%s", err, out)
			return
		}
		if out, err := goCmd("build", "-o", telemetrygenBin, "github.com/open-telemetry/opentelemetry-collector-contrib/cmd/telemetrygen"); err != nil {
			telemetrygenErr = fmt.Errorf("go build telemetrygen: %v\n%s", err, out)
		}
	})
	if telemetrygenSkip != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("telemetrygen is needed (CI is set: not skipped): %v", telemetrygenSkip)
		}
		t.Skipf("telemetrygen could not be fetched (no network?): %v", telemetrygenSkip)
	}
	require.NoError(t, telemetrygenErr)
	return telemetrygenBin
}
