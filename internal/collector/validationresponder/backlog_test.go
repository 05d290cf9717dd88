package validationresponder_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/otelcol-svc/otelcol-svc/exporter/agentexporter"
	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/lifecyclehost"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/mirrorcache"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/natsclient"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
	"github.com/otelcol-svc/otelcol-svc/internal/validation"
	"github.com/otelcol-svc/otelcol-svc/processor/triggerprocessor"
	"github.com/otelcol-svc/otelcol-svc/processor/windowprocessor"
	"github.com/otelcol-svc/otelcol-svc/receiver/jetstreamreceiver"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// agentStandIn is the customer's agent: it counts the calls and the records in them.
type agentStandIn struct {
	srv     *httptest.Server
	mu      sync.Mutex
	calls   int
	records int
}

func newAgentStandIn(t *testing.T) *agentStandIn {
	a := &agentStandIn{}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		n := 1 // a window call is one trigger
		var arr []json.RawMessage
		if json.Unmarshal(body, &arr) == nil {
			n = len(arr)
		}
		a.mu.Lock()
		a.calls++
		a.records += n
		a.mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(a.srv.Close)
	return a
}

func (a *agentStandIn) counts() (calls, records int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.calls, a.records
}

type previewEnv struct {
	host  lifecyclehost.Host
	nc    *nats.Conn
	js    jetstream.JetStream
	m     *mirrorcache.Cache
	store *mirror.Store
}

// newPreviewEnv runs the collector's extensions (embedded NATS, configmirror), whose
// responder answers the previews, as every collector role runs it.
func newPreviewEnv(t *testing.T) *previewEnv {
	// The deployment's call body limit, which the agent exporter gets from the configs
	// and the responder from the same variable: small, so the preview must split arrays.
	t.Setenv("SVC_MAX_CALL_BYTES", fmt.Sprint(1<<20))
	host := lifecyclehost.New(t)
	url := host[natsclient.DefaultExtension].(natsclient.Embedded).ClientURL()
	m, err := mirrorcache.FromHost(host, mirrorcache.DefaultExtension)
	require.NoError(t, err)
	nc, js := testenv.Connect(t, url)
	store, err := mirror.Open(context.Background(), js, 1)
	require.NoError(t, err)
	return &previewEnv{host: host, nc: nc, js: js, m: m, store: store}
}

func (e *previewEnv) put(t *testing.T, p mirror.Project) {
	t.Helper()
	require.NoError(t, e.store.PutProject(context.Background(), p))
	require.Eventually(t, func() bool { q, ok := e.m.Project(p.ID); return ok && q.Version == p.Version }, 10*time.Second, 10*time.Millisecond)
}

// publish stores events; body(i) is the i-th (from 1).
func (e *previewEnv) publish(t *testing.T, project string, n int, body func(i int) string) {
	t.Helper()
	require.NoError(t, streams.Create(context.Background(), e.js, streams.RawConfig(project, streams.DefaultLimits())))
	for i := 1; i <= n; i++ {
		_, err := e.js.PublishMsg(context.Background(), &nats.Msg{Subject: streams.RawSubject(project), Data: []byte(body(i)),
			Header: nats.Header{streams.HeaderSignal: []string{"event"}}})
		require.NoError(t, err)
	}
}

// runPipelineRole starts the pipeline role as configs/pipeline.yaml has it: the jetstream
// receiver (raw), the trigger and window processors, the agent exporter.
func (e *previewEnv) runPipelineRole(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	af := agentexporter.NewFactory()
	acfg := af.CreateDefaultConfig().(*agentexporter.Config)
	acfg.AllowCIDRs = "127.0.0.0/8"
	acfg.MaxCallBytes = 1 << 20
	exp, err := af.CreateLogs(ctx, exportertest.NewNopSettings(af.Type()), acfg)
	require.NoError(t, err)
	wf, tf := windowprocessor.NewFactory(), triggerprocessor.NewFactory()
	w, err := wf.CreateLogs(ctx, processortest.NewNopSettings(wf.Type()), wf.CreateDefaultConfig(), exp)
	require.NoError(t, err)
	tp, err := tf.CreateLogs(ctx, processortest.NewNopSettings(tf.Type()), tf.CreateDefaultConfig(), w)
	require.NoError(t, err)
	rf := jetstreamreceiver.NewFactory()
	rcv, err := rf.CreateLogs(ctx, receivertest.NewNopSettings(rf.Type()), rf.CreateDefaultConfig(), tp)
	require.NoError(t, err)
	for _, c := range []component.Component{exp, w, tp, rcv} {
		require.NoError(t, c.Start(ctx, e.host))
		t.Cleanup(func() { require.NoError(t, c.Shutdown(context.Background())) })
	}
	var _ receiver.Logs = rcv
}

func (e *previewEnv) backlogDone(t *testing.T, project, id string) validation.BacklogState {
	t.Helper()
	var st validation.BacklogState
	require.Eventually(t, func() bool {
		kv, err := e.js.KeyValue(context.Background(), validation.BacklogsBucket)
		if err != nil {
			return false
		}
		en, err := kv.Get(context.Background(), validation.BacklogKey(project, id))
		if err != nil {
			return false
		}
		require.NoError(t, json.Unmarshal(en.Value(), &st))
		return st.State == validation.BacklogDone
	}, 60*time.Second, 20*time.Millisecond)
	return st
}

func ptr[T any](v T) *T { return &v }

// The preview says how many records, matches and agent calls a backlog makes,
// and the backlog, run through the real pipeline role, makes exactly those calls at the
// agent. 2,500 records are three batches of the run; matches spread over them leave
// partial arrays at each batch's end, and six large matches split an array under the call
// body limit, so a count that ignored either would be wrong.
func TestPreviewAnnouncesWhatTheBacklogRunMakes(t *testing.T) {
	for _, mode := range []string{"legacy", "window"} {
		t.Run(mode, func(t *testing.T) {
			e := newPreviewEnv(t)
			agent := newAgentStandIn(t)
			project := "prj_preview_" + mode
			big := strings.Repeat("x", 300<<10)
			e.publish(t, project, 2500, func(i int) string {
				switch {
				case i >= 1990 && i < 1996:
					return fmt.Sprintf(`{"n":%d,"alert":true,"pad":%q}`, i, big)
				case i%7 == 0:
					return fmt.Sprintf(`{"n":%d,"alert":true}`, i)
				}
				return fmt.Sprintf(`{"n":%d}`, i)
			})
			pipe := mirror.Pipeline{Trigger: `event["alert"] == true`, Transforms: []string{`set(event["seen"], true)`}, BatchSize: 10,
				AgentEndpointURL: agent.srv.URL, WindowEnabled: mode == "window", WindowDurationSeconds: 300}
			// The URL is set after the records were stored (later than the write margin):
			// the live consumer takes none of them.
			s, err := e.js.Stream(context.Background(), streams.RawStream(project))
			require.NoError(t, err)
			lastStored, err := s.GetMsg(context.Background(), 2500)
			require.NoError(t, err)
			require.Eventually(t, func() bool { return time.Since(lastStored.Time) > 1200*time.Millisecond }, 10*time.Second, 10*time.Millisecond)
			p := mirror.Project{ID: project, Version: 1, Pipeline: pipe, AgentSince: time.Now()}
			e.put(t, p)

			pv, err := validation.PreviewBacklog(context.Background(), e.nc, validation.BacklogRequest{ProjectID: project, Pipeline: pipe, Last: ptr(2500)})
			require.NoError(t, err)
			require.True(t, pv.OK, "%+v", pv)
			matched := 2500/7 + 6 - 1 // 1995 is both
			assert.Equal(t, 2500, pv.Records)
			assert.Equal(t, matched, pv.Matched)
			assert.Equal(t, uint64(1), pv.FirstSeq)
			assert.Equal(t, uint64(2500), pv.LastSeq)
			require.NotNil(t, pv.From)
			require.NotNil(t, pv.To)
			assert.False(t, pv.To.Before(*pv.From))
			if mode == "window" {
				assert.Equal(t, matched, pv.Calls, "one call per trigger")
			} else {
				assert.Greater(t, pv.Calls, (matched+9)/10, "partial arrays at batch ends and the size split make more calls than matches/10")
			}

			e.runPipelineRole(t)
			p.Version = 2
			p.Backlog = &mirror.Backlog{ID: "bl_e2e", FirstSeq: pv.FirstSeq, LastSeq: pv.LastSeq, Records: pv.Records, Calls: pv.Calls,
				RequestedAt: time.Now(), RequestedBy: "usr_1"}
			e.put(t, p)
			st := e.backlogDone(t, project, "bl_e2e")
			assert.Equal(t, 2500, st.Processed)
			calls, records := agent.counts()
			assert.Equal(t, pv.Calls, calls, "the run makes the calls the preview announced")
			assert.Equal(t, pv.Matched, records)
		})
	}
}

// "since" takes the records stored at or after a time; a range past 10,000 records, a
// project the data plane does not know and a broken pipeline are refused in the
// contract's terms.
func TestPreviewRangesAndRefusals(t *testing.T) {
	e := newPreviewEnv(t)
	const project = "prj_preview_ranges"
	pipe := mirror.Pipeline{Trigger: `event["n"] > 0`}
	e.put(t, mirror.Project{ID: project, Version: 1, Pipeline: pipe})
	ctx := context.Background()

	pv, err := validation.PreviewBacklog(ctx, e.nc, validation.BacklogRequest{ProjectID: project, Pipeline: pipe, Last: ptr(5)})
	require.NoError(t, err)
	assert.Equal(t, validation.BacklogPreview{OK: true}, pv, "nothing stored yet")

	e.publish(t, project, 20, func(i int) string { return fmt.Sprintf(`{"n":%d}`, i) })
	s, err := e.js.Stream(ctx, streams.RawStream(project))
	require.NoError(t, err)
	m, err := s.GetMsg(ctx, 12)
	require.NoError(t, err)
	pv, err = validation.PreviewBacklog(ctx, e.nc, validation.BacklogRequest{ProjectID: project, Pipeline: pipe, Since: ptr(m.Time)})
	require.NoError(t, err)
	require.True(t, pv.OK, "%+v", pv)
	assert.Equal(t, 9, pv.Records)
	assert.Equal(t, uint64(12), pv.FirstSeq)
	assert.Equal(t, uint64(20), pv.LastSeq)
	assert.Equal(t, 9, pv.Matched)
	assert.Equal(t, 1, pv.Calls)
	assert.True(t, pv.From.Equal(m.Time))

	pv, err = validation.PreviewBacklog(ctx, e.nc, validation.BacklogRequest{ProjectID: project, Pipeline: pipe, Last: ptr(5)})
	require.NoError(t, err)
	assert.Equal(t, 5, pv.Records)
	assert.Equal(t, uint64(16), pv.FirstSeq)

	// The live pipeline takes the records from when the agent URL was set (here from the
	// 15th): a backlog is what was stored before, never those again.
	m15, err := s.GetMsg(ctx, 15)
	require.NoError(t, err)
	_, err = e.js.CreateConsumer(ctx, streams.RawStream(project), jetstream.ConsumerConfig{Durable: "svc-pipeline",
		AckPolicy: jetstream.AckExplicitPolicy, DeliverPolicy: jetstream.DeliverByStartTimePolicy, OptStartTime: &m15.Time})
	require.NoError(t, err)
	pv, err = validation.PreviewBacklog(ctx, e.nc, validation.BacklogRequest{ProjectID: project, Pipeline: pipe, Last: ptr(20)})
	require.NoError(t, err)
	assert.Equal(t, 14, pv.Records)
	assert.Equal(t, uint64(1), pv.FirstSeq)
	assert.Equal(t, uint64(14), pv.LastSeq)
	pv, err = validation.PreviewBacklog(ctx, e.nc, validation.BacklogRequest{ProjectID: project, Pipeline: pipe, Since: ptr(m.Time)})
	require.NoError(t, err)
	assert.Equal(t, 3, pv.Records)
	assert.Equal(t, uint64(12), pv.FirstSeq)
	assert.Equal(t, uint64(14), pv.LastSeq)
	// A live consumer started by agent_since_seq (17 when the URL was set) takes from 18.
	require.NoError(t, e.js.DeleteConsumer(ctx, streams.RawStream(project), "svc-pipeline"))
	_, err = e.js.CreateConsumer(ctx, streams.RawStream(project), jetstream.ConsumerConfig{Durable: "svc-pipeline",
		AckPolicy: jetstream.AckExplicitPolicy, DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: 18})
	require.NoError(t, err)
	pv, err = validation.PreviewBacklog(ctx, e.nc, validation.BacklogRequest{ProjectID: project, Pipeline: pipe, Last: ptr(20)})
	require.NoError(t, err)
	assert.Equal(t, 17, pv.Records)
	assert.Equal(t, uint64(17), pv.LastSeq)

	pv, err = validation.PreviewBacklog(ctx, e.nc, validation.BacklogRequest{ProjectID: "prj_unknown", Pipeline: pipe, Last: ptr(5)})
	require.NoError(t, err)
	assert.Equal(t, validation.BacklogPreview{Code: apierror.NotFound, Status: 404, Message: pv.Message}, pv)

	pv, err = validation.PreviewBacklog(ctx, e.nc, validation.BacklogRequest{ProjectID: project, Pipeline: mirror.Pipeline{Trigger: `event["n"] >`}, Last: ptr(5)})
	require.NoError(t, err)
	assert.Equal(t, apierror.InvalidPipeline, pv.Code)
	assert.Equal(t, 400, pv.Status)
	assert.True(t, strings.HasPrefix(pv.Message, "trigger: "), pv.Message)

	pv, err = validation.PreviewBacklog(ctx, e.nc, validation.BacklogRequest{ProjectID: project, Pipeline: pipe, Last: ptr(10_001)})
	require.NoError(t, err)
	assert.Equal(t, apierror.InvalidBody, pv.Code)

	const many = "prj_preview_many"
	e.put(t, mirror.Project{ID: many, Version: 1, Pipeline: pipe})
	e.publish(t, many, validation.MaxBacklogRecords+50, func(i int) string { return `{}` })
	pv, err = validation.PreviewBacklog(ctx, e.nc, validation.BacklogRequest{ProjectID: many, Pipeline: pipe, Since: ptr(time.Now().Add(-time.Hour))})
	require.NoError(t, err)
	assert.False(t, pv.OK)
	assert.Equal(t, validation.CodeBacklogTooLarge, pv.Code)
	assert.Equal(t, 400, pv.Status)
	assert.Contains(t, pv.Message, "10050 records")
	assert.Contains(t, pv.Message, `"last": 10000`)
	pv, err = validation.PreviewBacklog(ctx, e.nc, validation.BacklogRequest{ProjectID: many, Pipeline: pipe, Last: ptr(validation.MaxBacklogRecords)})
	require.NoError(t, err)
	assert.True(t, pv.OK, "%+v", pv)
	assert.Equal(t, validation.MaxBacklogRecords, pv.Records)
	assert.Equal(t, uint64(51), pv.FirstSeq)
}

// A backlog previewed before the pipeline role created the project's live
// consumer (it starts later, or no pipeline process runs yet) ends where that consumer
// will start, right after agent_since_seq: every record reaches the agent exactly once,
// from the backlog or from the live pipeline, never from both.
func TestABacklogPreviewedBeforeThePipelineStartsDoesNotOverlapIt(t *testing.T) {
	e := newPreviewEnv(t)
	agent := newAgentStandIn(t)
	const project = "prj_preview_gap"
	ctx := context.Background()
	e.publish(t, project, 10, func(i int) string { return fmt.Sprintf(`{"n":%d}`, i) })
	pipe := mirror.Pipeline{Trigger: `event["n"] > 0`, BatchSize: 1, AgentEndpointURL: agent.srv.URL}
	// The URL was saved when the stream's last record was the 6th; 7 to 10 came after
	// it, and are the live pipeline's.
	p := mirror.Project{ID: project, Version: 1, Pipeline: pipe, AgentSince: time.Now(), AgentSinceSeq: 6}
	e.put(t, p)

	pv, err := validation.PreviewBacklog(ctx, e.nc, validation.BacklogRequest{ProjectID: project, Pipeline: pipe, Last: ptr(10)})
	require.NoError(t, err)
	require.True(t, pv.OK, "%+v", pv)
	assert.Equal(t, uint64(1), pv.FirstSeq)
	assert.Equal(t, uint64(6), pv.LastSeq)
	assert.Equal(t, 6, pv.Records)

	p.Version = 2
	p.Backlog = &mirror.Backlog{ID: "bl_gap", FirstSeq: pv.FirstSeq, LastSeq: pv.LastSeq, Records: pv.Records, Calls: pv.Calls,
		RequestedAt: time.Now(), RequestedBy: "usr_1"}
	e.put(t, p)
	e.runPipelineRole(t)
	e.backlogDone(t, project, "bl_gap")
	// The live consumer has taken (and the agent acknowledged) everything stored.
	require.Eventually(t, func() bool {
		c, err := e.js.Consumer(ctx, streams.RawStream(project), "svc-pipeline")
		if err != nil {
			return false
		}
		ci, err := c.Info(ctx)
		return err == nil && ci.AckFloor.Stream == 10
	}, 30*time.Second, 20*time.Millisecond)
	calls, records := agent.counts()
	assert.Equal(t, 10, records, "each of the 10 records once")
	assert.Equal(t, 10, calls)
}

// A project whose entry says neither when its URL was set nor when it was written gets
// its live consumer from new records, at a moment the preview cannot know: it is
// refused as unavailable (the control plane's 503) until the pipeline role created it.
func TestAPreviewWithoutAKnownLiveStartIsRetried(t *testing.T) {
	e := newPreviewEnv(t)
	const project = "prj_preview_unknown_start"
	ctx := context.Background()
	e.publish(t, project, 3, func(i int) string { return fmt.Sprintf(`{"n":%d}`, i) })
	pipe := mirror.Pipeline{Trigger: `event["n"] > 0`, AgentEndpointURL: "http://127.0.0.1:1/agent"}
	// Written as an older control plane wrote entries: without written_at.
	kv, err := e.js.KeyValue(ctx, mirror.BucketProjects)
	require.NoError(t, err)
	b, err := json.Marshal(mirror.Project{ID: project, Version: 1, Pipeline: pipe})
	require.NoError(t, err)
	_, err = kv.Put(ctx, project, b)
	require.NoError(t, err)
	require.Eventually(t, func() bool { _, ok := e.m.Project(project); return ok }, 10*time.Second, 10*time.Millisecond)

	pv, err := validation.PreviewBacklog(ctx, e.nc, validation.BacklogRequest{ProjectID: project, Pipeline: pipe, Last: ptr(3)})
	require.NoError(t, err)
	assert.Equal(t, apierror.Unavailable, pv.Code, "%+v", pv)
	assert.Equal(t, http.StatusServiceUnavailable, pv.Status)
	assert.Contains(t, pv.Message, "try again")
}

// Previews leave no consumers on the project's stream: a user looping them would
// otherwise pile up two or three a time for minutes.
func TestPreviewsLeaveNoConsumersBehind(t *testing.T) {
	e := newPreviewEnv(t)
	const project = "prj_preview_consumers"
	ctx := context.Background()
	e.publish(t, project, 20, func(i int) string { return fmt.Sprintf(`{"n":%d}`, i) })
	pipe := mirror.Pipeline{Trigger: `event["n"] > 0`, AgentEndpointURL: "http://127.0.0.1:1/agent"}
	s, err := e.js.Stream(ctx, streams.RawStream(project))
	require.NoError(t, err)
	m5, err := s.GetMsg(ctx, 5)
	require.NoError(t, err)
	// A live consumer by time: the preview reads where it starts, by another consumer.
	_, err = e.js.CreateConsumer(ctx, streams.RawStream(project), jetstream.ConsumerConfig{Durable: "svc-pipeline",
		AckPolicy: jetstream.AckExplicitPolicy, DeliverPolicy: jetstream.DeliverByStartTimePolicy, OptStartTime: &m5.Time})
	require.NoError(t, err)
	e.put(t, mirror.Project{ID: project, Version: 1, Pipeline: pipe, AgentSince: m5.Time})
	consumers := func() int {
		si, err := s.Info(ctx)
		require.NoError(t, err)
		return si.State.Consumers
	}
	// The preview's pulls as the server gets them: bounded by bytes, so a range of 1 MB
	// records does not fill the subscription.
	var pullMu sync.Mutex
	var pulls []struct {
		Batch    int `json:"batch"`
		MaxBytes int `json:"max_bytes"`
	}
	sub, err := e.nc.Subscribe("$JS.API.CONSUMER.MSG.NEXT."+streams.RawStream(project)+".*", func(m *nats.Msg) {
		pullMu.Lock()
		defer pullMu.Unlock()
		var p struct {
			Batch    int `json:"batch"`
			MaxBytes int `json:"max_bytes"`
		}
		if json.Unmarshal(m.Data, &p) == nil {
			pulls = append(pulls, p)
		}
	})
	require.NoError(t, err)
	defer func() { _ = sub.Unsubscribe() }()
	require.NoError(t, e.nc.Flush())
	before := consumers()
	for range 5 {
		pv, err := validation.PreviewBacklog(ctx, e.nc, validation.BacklogRequest{ProjectID: project, Pipeline: pipe, Since: ptr(m5.Time.Add(-time.Hour))})
		require.NoError(t, err)
		require.True(t, pv.OK, "%+v", pv)
		require.Equal(t, 4, pv.Records)
	}
	// Each preview deletes its consumer as it ends (a busy server may take a moment to
	// apply the last delete); within half the 10 s after which the server drops an idle
	// consumer itself, so it is the delete that is seen.
	assert.Eventually(t, func() bool { return consumers() == before }, 5*time.Second, 20*time.Millisecond,
		"the previews' consumers are deleted as they end")
	require.NoError(t, e.nc.Flush())
	pullMu.Lock()
	defer pullMu.Unlock()
	counted := 0
	for _, p := range pulls {
		if p.Batch > 1 { // the count's pulls (finding where a range starts takes one record)
			counted++
			assert.Greater(t, p.MaxBytes, 0, "a pull of %d records without a byte limit", p.Batch)
		}
	}
	assert.NotZero(t, counted)
}
