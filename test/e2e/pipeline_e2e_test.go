package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"

	"github.com/otelcol-svc/otelcol-svc/internal/apikey"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
	"github.com/otelcol-svc/otelcol-svc/internal/webhooksig"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// startEmbedded runs every data-plane role in one process (configs/embedded.yaml), with
// outbound calls to this machine allowed for the local test agents.
func startEmbedded(t *testing.T, extra map[string]string) *env {
	t.Helper()
	vars := map[string]string{"SVC_OUTBOUND_ALLOW": "127.0.0.0/8", "SVC_PIPELINE_LINGER": "20ms"}
	maps.Copy(vars, extra)
	col := testenv.StartCollector(t, testenv.CollectorOptions{Config: "configs/embedded.yaml", Env: vars})
	js, m := connectMirror(t, col.EmbeddedNATSURL())
	return &env{col: col, js: js, m: m}
}

// pipelineProject publishes a project with a pipeline and a signing secret, and a key.
func (e *env) pipelineProject(t *testing.T, id string, p mirror.Pipeline) (key, secret string) {
	t.Helper()
	secret = webhooksig.NewSecret()
	require.NoError(t, e.m.PutProject(context.Background(), mirror.Project{ID: id, Version: 1, Pipeline: p, SigningSecret: secret}))
	key = apikey.Generate(apikey.KindProject)
	require.NoError(t, e.m.PutKey(context.Background(), apikey.Hash(key), mirror.KeyEntry{KeyID: "k-" + id, ProjectID: id, Scope: mirror.ScopeProject}))
	waitAccepted(t, e.col.HTTP, key)
	return key, secret
}

type logSpec struct {
	sev   int
	trace string // hex trace id or ""
	body  string
}

// sendLogs posts one OTLP/protobuf request with the records in order.
func sendLogs(t *testing.T, base, key string, specs ...logSpec) {
	t.Helper()
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("service.name", "checkout")
	lrs := rl.ScopeLogs().AppendEmpty().LogRecords()
	for _, s := range specs {
		lr := lrs.AppendEmpty()
		lr.SetSeverityNumber(plog.SeverityNumber(s.sev))
		lr.Body().SetStr(s.body)
		lr.SetTimestamp(pcommonTime(time.Now()))
		if s.trace != "" {
			var id [16]byte
			copy(id[:], s.trace)
			lr.SetTraceID(id)
		}
	}
	b, err := plogotlp.NewExportRequestFromLogs(ld).MarshalProto()
	require.NoError(t, err)
	r := post(t, base+"/v1/logs", key, "application/x-protobuf", b, nil)
	require.Equal(t, http.StatusOK, r.StatusCode, "%s", r.Body)
}

func field(t *testing.T, rec []byte, name string) any {
	t.Helper()
	return decodeRecord(t, rec)[name]
}

func TestLegacyTriggerBatchesMatchingRecordsByteForByte(t *testing.T) {
	e := startEmbedded(t, nil)
	agent := startAgent(t)
	key, secret := e.pipelineProject(t, "legacy", mirror.Pipeline{Trigger: "severity_number >= 17", AgentEndpointURL: agent.URL})

	var specs []logSpec
	for i := 0; i < 125; i++ {
		s := logSpec{sev: 9, body: "info " + strconv.Itoa(i)}
		if i%5 == 0 {
			s = logSpec{sev: 17 + i%4, body: "error " + strconv.Itoa(i)}
		}
		specs = append(specs, s)
	}
	sendLogs(t, e.col.HTTP, key, specs[:60]...)
	sendLogs(t, e.col.HTTP, key, specs[60:]...)

	// Every record has been dropped or delivered: what the agent got is all it gets.
	pipelineSettled(t, e.js, "legacy")
	calls := agent.delivered()
	batches := batchRecords(t, calls)
	require.Equal(t, 25, total(batches), "exactly the matching records")

	onStream := map[string]bool{}
	for _, m := range stored(t, e.js, "legacy") {
		onStream[string(m.Data)] = true
	}
	seen := map[string]bool{}
	ids := map[string]bool{}
	for i, b := range batches {
		assert.LessOrEqual(t, len(b), 10, "batch_size defaults to 10")
		for _, rec := range b {
			assert.True(t, strings.HasPrefix(field(t, rec, "body").(string), "error"), "%s", rec)
			assert.True(t, onStream[string(rec)], "an untouched record reaches the agent byte for byte")
			seen[string(rec)] = true
		}
		h := calls[i].Header
		assert.Equal(t, "application/json", h.Get("Content-Type"))
		require.NoError(t, webhooksig.Verify(secret, h, calls[i].Body, time.Now(), 5*time.Minute), "signature")
		assert.NotEmpty(t, h.Get("X-Request-Id"))
		assert.False(t, ids[h.Get("X-Request-Id")], "a new request id for each call")
		ids[h.Get("X-Request-Id")] = true
	}
	assert.Len(t, seen, 25)
}

func total(batches [][]json.RawMessage) int {
	n := 0
	for _, b := range batches {
		n += len(b)
	}
	return n
}

func TestLegacyTransformsReshapeRecords(t *testing.T) {
	e := startEmbedded(t, nil)
	agent := startAgent(t)
	key, _ := e.pipelineProject(t, "tx", mirror.Pipeline{
		Trigger: `severity_number >= 17`,
		Transforms: []string{
			`set(event["service"], resource_attributes["service.name"])`,
			`delete_key(event, "resourceAttributes")`,
		},
		AgentEndpointURL: agent.URL,
	})
	sendLogs(t, e.col.HTTP, key, logSpec{sev: 17, body: "boom"}, logSpec{sev: 5, body: "noise"})
	pipelineSettled(t, e.js, "tx")
	require.Len(t, agent.delivered(), 1)
	recs := batchRecords(t, agent.delivered())[0]
	require.Len(t, recs, 1)
	got := decodeRecord(t, recs[0])
	assert.Equal(t, "checkout", got["service"])
	assert.NotContains(t, got, "resourceAttributes")
	assert.Equal(t, "boom", got["body"])
}

func TestTriggersMatchJSONEventsByTypeAndBarePath(t *testing.T) {
	e := startEmbedded(t, nil)
	agent := startAgent(t)
	key, _ := e.pipelineProject(t, "events", mirror.Pipeline{
		Trigger:          `event["_event_type"] == "payment.failed" and status == "failed"`,
		AgentEndpointURL: agent.URL,
	})
	for _, ev := range []struct{ typ, body string }{
		{"payment.failed", `{"status": "failed", "order": 1}`},
		{"payment.failed", `{"status": "ok", "order": 2}`},
		{"deploy", `{"status": "failed", "order": 3}`},
		{"payment.failed", `{"status": "failed", "order": 4, "amount": 12345678901234567890}`},
	} {
		r := post(t, e.col.HTTP+"/v1/events", key, "application/json", []byte(ev.body), map[string]string{"X-Event-Type": ev.typ})
		require.Equal(t, http.StatusAccepted, r.StatusCode)
	}
	pipelineSettled(t, e.js, "events")
	var got []string
	for _, b := range batchRecords(t, agent.delivered()) {
		for _, r := range b {
			got = append(got, string(r))
		}
	}
	assert.Equal(t, []string{
		`{"status": "failed", "order": 1,"_event_type":"payment.failed"}`,
		`{"status": "failed", "order": 4, "amount": 12345678901234567890,"_event_type":"payment.failed"}`,
	}, got)
}

func testWindow(t *testing.T, extra map[string]string) {
	e := startEmbedded(t, extra)
	agent := startAgent(t)
	// A fresh project id: Redis outlives the test, and windows last 300 s.
	id := fmt.Sprintf("win%d", time.Now().UnixNano())
	key, _ := e.pipelineProject(t, id, mirror.Pipeline{
		WindowEnabled: true, GroupKey: "traceId", ContextFilter: "severity_number >= 9",
		Trigger: "severity_number >= 17", WindowDurationSeconds: 300, AgentEndpointURL: agent.URL,
	})
	a, b := "trace-aaaaaaaaaa", "trace-bbbbbbbbbb"
	sendLogs(t, e.col.HTTP, key,
		logSpec{9, a, "a1"}, logSpec{5, a, "a-debug (filtered out)"}, logSpec{13, b, "b1"}, logSpec{13, a, "a2"})
	sendLogs(t, e.col.HTTP, key, logSpec{17, a, "a-error"})

	pipelineSettled(t, e.js, id)
	calls := agent.delivered()
	require.Len(t, calls, 1, "one trigger, one call")
	var call struct {
		Trigger json.RawMessage   `json:"trigger"`
		Window  []json.RawMessage `json:"window"`
	}
	require.NoError(t, json.Unmarshal(calls[0].Body, &call), "%s", calls[0].Body)
	assert.Equal(t, "a-error", field(t, call.Trigger, "body"))
	var bodies []any
	for _, w := range call.Window {
		bodies = append(bodies, field(t, w, "body"))
	}
	assert.Equal(t, []any{"a1", "a2"}, bodies, "the trace's stored events, oldest first, not the trigger")

	// The trigger's bytes are the record as stored.
	msgs := stored(t, e.js, id)
	assert.Equal(t, string(msgs[len(msgs)-1].Data), string(call.Trigger))

	// Entries older than the duration are gone.
	require.NoError(t, e.m.PutProject(context.Background(), mirror.Project{ID: id, Version: 2, Pipeline: mirror.Pipeline{
		WindowEnabled: true, GroupKey: "traceId", ContextFilter: "severity_number >= 9",
		Trigger: "severity_number >= 17", WindowDurationSeconds: 1, AgentEndpointURL: agent.URL,
	}}))
	c := "trace-cccccccccc"
	sendLogs(t, e.col.HTTP, key, logSpec{9, c, "c-old"})
	pipelineSettled(t, e.js, id) // c-old is in the window
	// The window's duration itself must pass (no event marks it); it also covers the
	// second within which the new duration reaches the pipeline.
	time.Sleep(1500 * time.Millisecond)
	sendLogs(t, e.col.HTTP, key, logSpec{9, c, "c-recent"}, logSpec{17, c, "c-error"})
	pipelineSettled(t, e.js, id)
	require.Len(t, agent.delivered(), 2)
	require.NoError(t, json.Unmarshal(agent.delivered()[1].Body, &call))
	bodies = nil
	for _, w := range call.Window {
		bodies = append(bodies, field(t, w, "body"))
	}
	assert.Equal(t, []any{"c-recent"}, bodies)
}

func TestWindowModeWithMemoryStore(t *testing.T) { testWindow(t, nil) }

func TestWindowModeWithRedis(t *testing.T) {
	testWindow(t, map[string]string{"REDIS_URL": redisURL(t)})
}

func redisURL(t *testing.T) string {
	t.Helper()
	if u := envOr("REDIS_URL", ""); u != "" {
		return u
	}
	return "redis://127.0.0.1:6379/0"
}

func TestAgentFailuresRetriedOrDeadLettered(t *testing.T) {
	e := startEmbedded(t, map[string]string{"SVC_AGENT_TIMEOUT": "1s", "SVC_AGENT_RETRY_BUDGET": "20s"})

	// 503 for a while, then 200: everything arrives.
	flaky := startAgent(t)
	flaky.setRespond(func(n int, _ *http.Request) (int, time.Duration) {
		if n < 3 {
			return http.StatusServiceUnavailable, 0
		}
		return http.StatusOK, 0
	})
	keyF, _ := e.pipelineProject(t, "flaky", mirror.Pipeline{AgentEndpointURL: flaky.URL})
	for i := 0; i < 5; i++ {
		require.Equal(t, http.StatusAccepted, post(t, e.col.HTTP+"/v1/events", keyF, "application/json", []byte(fmt.Sprintf(`{"i":%d}`, i)), nil).StatusCode)
	}

	// 400: dead-lettered, not retried.
	reject := startAgent(t)
	reject.setRespond(func(int, *http.Request) (int, time.Duration) { return http.StatusBadRequest, 0 })
	keyR, _ := e.pipelineProject(t, "reject", mirror.Pipeline{AgentEndpointURL: reject.URL})
	require.Equal(t, http.StatusAccepted, post(t, e.col.HTTP+"/v1/events", keyR, "application/json", []byte(`{"bad":true}`), nil).StatusCode)

	// Hangs on the first attempt: timeout, retry.
	hang := startAgent(t)
	hang.setRespond(func(n int, _ *http.Request) (int, time.Duration) {
		if n == 0 {
			return http.StatusOK, 5 * time.Second
		}
		return http.StatusOK, 0
	})
	keyH, _ := e.pipelineProject(t, "hang", mirror.Pipeline{AgentEndpointURL: hang.URL})
	require.Equal(t, http.StatusAccepted, post(t, e.col.HTTP+"/v1/events", keyH, "application/json", []byte(`{"slow":true}`), nil).StatusCode)

	require.Eventually(t, func() bool { return total(batchRecords(t, flaky.delivered())) >= 5 }, 30*time.Second, 50*time.Millisecond)
	assert.GreaterOrEqual(t, flaky.attempts(), 4, "the 503s were retried")

	require.Eventually(t, func() bool { return len(hang.delivered()) >= 1 }, 30*time.Second, 50*time.Millisecond)
	assert.GreaterOrEqual(t, hang.attempts(), 2, "the hung attempt timed out and was retried")

	dlq := func() []*jetstream.RawStreamMsg {
		s, err := e.js.Stream(context.Background(), streams.DeadLetterStream("reject"))
		if err != nil {
			return nil
		}
		m, err := s.GetMsg(context.Background(), 1)
		if err != nil {
			return nil
		}
		return []*jetstream.RawStreamMsg{m}
	}
	require.Eventually(t, func() bool { return len(dlq()) == 1 }, 20*time.Second, 50*time.Millisecond)
	m := dlq()[0]
	assert.JSONEq(t, `[{"bad":true}]`, string(m.Data))
	assert.Contains(t, m.Header.Get(streams.HeaderDLQReason), "400")
	assert.Equal(t, "400", m.Header.Get(streams.HeaderDLQStatus))
	// Settled means dead-lettered and acked: a retry of the 400 would have come before.
	pipelineSettled(t, e.js, "reject")
	assert.Equal(t, 1, reject.attempts(), "a 400 is final")
}

func TestSlowAgentOfOneProjectDoesNotDelayAnother(t *testing.T) {
	e := startEmbedded(t, nil)
	slow := startAgent(t)
	slow.setRespond(func(int, *http.Request) (int, time.Duration) { return http.StatusOK, 4 * time.Second })
	fast := startAgent(t)
	keyS, _ := e.pipelineProject(t, "slow", mirror.Pipeline{AgentEndpointURL: slow.URL})
	keyF, _ := e.pipelineProject(t, "fast", mirror.Pipeline{AgentEndpointURL: fast.URL})

	require.Equal(t, http.StatusAccepted, post(t, e.col.HTTP+"/v1/events", keyS, "application/json", []byte(`{"p":"slow"}`), nil).StatusCode)
	require.Eventually(t, func() bool { return slow.attempts() == 1 }, 20*time.Second, 10*time.Millisecond, "the slow call never started")
	sent := time.Now()
	require.Equal(t, http.StatusAccepted, post(t, e.col.HTTP+"/v1/events", keyF, "application/json", []byte(`{"p":"fast"}`), nil).StatusCode)
	require.Eventually(t, func() bool { return len(fast.delivered()) == 1 }, 3*time.Second, 10*time.Millisecond)
	t.Logf("fast project delivered %v after sending, while the slow agent was still busy", fast.delivered()[0].At.Sub(sent))
	assert.Empty(t, slow.delivered(), "the slow call had not finished")
}

func TestInvalidExpressionPausesOnlyThatProject(t *testing.T) {
	e := startEmbedded(t, nil)
	broken, fine := startAgent(t), startAgent(t)
	keyB, _ := e.pipelineProject(t, "broken", mirror.Pipeline{Trigger: `severity_number >>> 3`, AgentEndpointURL: broken.URL})
	keyF, _ := e.pipelineProject(t, "fine", mirror.Pipeline{AgentEndpointURL: fine.URL})
	require.Equal(t, http.StatusAccepted, post(t, e.col.HTTP+"/v1/events", keyB, "application/json", []byte(`{"n":1}`), nil).StatusCode)
	require.Equal(t, http.StatusAccepted, post(t, e.col.HTTP+"/v1/events", keyF, "application/json", []byte(`{"n":2}`), nil).StatusCode)

	require.Eventually(t, func() bool { return len(fine.delivered()) == 1 }, 20*time.Second, 20*time.Millisecond)
	// Paused is the marker: a paused project is not consumed, so nothing of it can still
	// be on its way to the agent.
	require.Eventually(t, func() bool { return metric(t, e.col.Metrics, "otelcol_pipeline_paused_projects") == "1" }, 10*time.Second, 100*time.Millisecond)
	assert.Contains(t, e.col.Log(), "project paused")
	assert.Empty(t, broken.delivered())

	// Fixing the trigger resumes the project, and nothing it had received was lost.
	require.NoError(t, e.m.PutProject(context.Background(), mirror.Project{ID: "broken", Version: 2, Pipeline: mirror.Pipeline{Trigger: `n == 1`, AgentEndpointURL: broken.URL}}))
	require.Eventually(t, func() bool { return len(broken.delivered()) == 1 }, 20*time.Second, 20*time.Millisecond)
	require.Eventually(t, func() bool { return metric(t, e.col.Metrics, "otelcol_pipeline_paused_projects") == "0" }, 10*time.Second, 100*time.Millisecond)
}

// metric returns the value of a metric without labels from the Prometheus endpoint.
func metric(t *testing.T, url, name string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, name+" ") || strings.HasPrefix(line, name+"{") {
			f := strings.Fields(line)
			return f[len(f)-1]
		}
	}
	return ""
}
