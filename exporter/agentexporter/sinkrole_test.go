package agentexporter

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/otelcol-svc/otelcol-svc/exporter/sinkexporter"
	"github.com/otelcol-svc/otelcol-svc/internal/delivery"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
	"github.com/otelcol-svc/otelcol-svc/receiver/jetstreamreceiver"
)

const dashboard = "https://dash.example.com"

// startSink runs a sink exporter tuned like start's agent exporter, with a short budget.
func (e *env) startSink(t *testing.T) exporter.Logs {
	t.Helper()
	sf := sinkexporter.NewFactory()
	scfg := sf.CreateDefaultConfig().(*sinkexporter.Config)
	scfg.NATS.URL = e.nats.URL()
	scfg.AllowCIDRs = "127.0.0.0/8"
	scfg.Timeout = 2 * time.Second
	scfg.DashboardURL = dashboard
	scfg.Retry = delivery.RetryConfig{InitialInterval: 10 * time.Millisecond, MaxInterval: 50 * time.Millisecond, MaxElapsedTime: 300 * time.Millisecond}
	require.NoError(t, scfg.Validate())
	exp, err := sf.CreateLogs(context.Background(), exportertest.NewNopSettings(sf.Type()), scfg)
	require.NoError(t, err)
	require.NoError(t, exp.Start(context.Background(), e.host))
	t.Cleanup(func() { _ = exp.Shutdown(context.Background()) })
	return exp
}

// startSinkRole runs the sink role as configs/sink.yaml does: the JetStream receiver
// reading each enabled destination's cursor on the project's output stream, feeding the
// sink exporter, which delivers to the destinations (failure notices among them). It
// returns once the cursors of the given destinations exist, so that nothing published
// after it is missed.
func (e *env) startSinkRole(t *testing.T, projectID string, sinks ...string) {
	t.Helper()
	exp := e.startSink(t)
	f := jetstreamreceiver.NewFactory()
	cfg := f.CreateDefaultConfig().(*jetstreamreceiver.Config)
	cfg.NATS.URL = e.nats.URL()
	cfg.Consume = jetstreamreceiver.ConsumeOutput
	cfg.Durable = "svc-sink"
	cfg.BatchSize = 10
	cfg.AckWait = 5 * time.Second
	cfg.RetryDelay = 100 * time.Millisecond
	require.NoError(t, cfg.Validate())
	rcv, err := f.CreateLogs(context.Background(), receivertest.NewNopSettings(f.Type()), cfg, exp)
	require.NoError(t, err)
	require.NoError(t, rcv.Start(context.Background(), e.host))
	t.Cleanup(func() { _ = rcv.Shutdown(context.Background()) })
	for _, s := range sinks {
		require.Eventually(t, func() bool {
			_, err := e.js.Consumer(context.Background(), streams.OutputStream(projectID), "svc-sink-"+s)
			return err == nil
		}, 10*time.Second, 10*time.Millisecond, "the cursor of destination %s", s)
	}
}

// publishResult stores an agent's result on the project's output stream, as the ingest
// receiver does, and wakes the sink role.
func (e *env) publishResult(t *testing.T, nc *nats.Conn, projectID, id, body string) {
	t.Helper()
	_, err := e.js.PublishMsg(context.Background(), &nats.Msg{Subject: streams.OutputSubject(projectID), Data: []byte(body),
		Header: nats.Header{streams.HeaderSignal: {"agent_output"}, streams.HeaderRequestID: {id}, streams.HeaderMsgID: {"out:" + id}}})
	require.NoError(t, err)
	require.NoError(t, nc.Publish(streams.WakeSubject(streams.WakeOutput, projectID), nil))
}

// notices are the failure notices among what a destination received, decoded.
func notices(t *testing.T, got []received) []delivery.FailureBody {
	t.Helper()
	var out []delivery.FailureBody
	for _, g := range got {
		var b delivery.FailureBody
		if json.Unmarshal(g.body, &b) == nil && b.Type == delivery.FailureNoticeType {
			out = append(out, b)
		}
	}
	return out
}

// untilSentinel waits until a destination has received the sentinel result, published
// after everything the test expects it to have got: what it holds then is all it got
// before, since each destination's cursor delivers in order.
func untilSentinel(t *testing.T, a *agent) []received {
	t.Helper()
	require.Eventually(t, func() bool {
		for _, g := range a.requests() {
			if strings.Contains(string(g.body), "sentinel") {
				return true
			}
		}
		return false
	}, 10*time.Second, 10*time.Millisecond)
	var before []received
	for _, g := range a.requests() {
		if strings.Contains(string(g.body), "sentinel") {
			break
		}
		before = append(before, g)
	}
	return before
}

// sinkProject is a project whose destinations are all enabled.
func sinkProject(id string, sinks ...mirror.Sink) mirror.Project {
	p := project(id, "")
	for i := range sinks {
		sinks[i].Enabled = true
	}
	p.Sinks = sinks
	return p
}
