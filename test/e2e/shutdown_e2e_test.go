package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/records"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// exitBound is how soon after SIGTERM every role must have exited: well inside the 30 s
// an orchestrator gives before SIGKILL.
const exitBound = 10 * time.Second

// waitExit fails the test unless the process exits within exitBound of the signal sent at
// signalled, and returns how long it took.
func waitExit(t *testing.T, exited <-chan struct{}, signalled time.Time, what string) time.Duration {
	t.Helper()
	select {
	case <-exited:
	case <-time.After(time.Until(signalled.Add(exitBound))):
		t.Fatalf("%s still running %s after SIGTERM", what, exitBound)
	}
	took := time.Since(signalled)
	t.Logf("%s exited %s after SIGTERM", what, took.Round(time.Millisecond))
	return took
}

// SIGTERM to a receiver under load: its health check answers 503 before its listener
// closes, new requests meanwhile get 503 with Retry-After in the contract's error shape,
// every request answered 2xx is stored, and the process exits within the bound.
func TestReceiverSIGTERMDrainsUnderLoad(t *testing.T) {
	const drainDelay = time.Second
	e := startReceiver(t, map[string]string{"SVC_DRAIN_DELAY": drainDelay.String(), "SVC_DRAIN_TIMEOUT": "5s"})
	key := e.project(t, "drain")

	type outcome struct {
		id     string
		status int
		retry  string
		code   string
		at     time.Time
		err    error
	}
	var (
		mu       sync.Mutex
		outcomes []outcome
		stop     = make(chan struct{})
		wg       sync.WaitGroup
	)
	record := func(o outcome) {
		mu.Lock()
		outcomes = append(outcomes, o)
		mu.Unlock()
	}
	accepted := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, o := range outcomes {
			if o.status/100 == 2 {
				n++
			}
		}
		return n
	}
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client := &http.Client{Timeout: 15 * time.Second}
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("drain-%d-%d", g, i)
				req, _ := http.NewRequest(http.MethodPost, e.col.HTTP+"/v1/events", strings.NewReader(`{"kind":"load","id":"`+id+`"}`))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("X-API-Key", key)
				resp, err := client.Do(req)
				o := outcome{id: id, err: err, at: time.Now()}
				if err == nil {
					var b struct{ Error struct{ Code string } }
					_ = json.NewDecoder(resp.Body).Decode(&b)
					resp.Body.Close()
					o.status, o.retry, o.code = resp.StatusCode, resp.Header.Get("Retry-After"), b.Error.Code
				}
				record(o)
				if err != nil {
					// The listener is closed: a client retries elsewhere; this one stops.
					return
				}
			}
		}()
	}
	require.Eventually(t, func() bool { return accepted() >= 100 }, 20*time.Second, 10*time.Millisecond)

	// The health check is polled from the signal on, to see when readiness went down.
	var healthDown time.Time
	healthDone := make(chan struct{})
	sent := time.Now()
	go func() {
		defer close(healthDone)
		for time.Since(sent) < exitBound {
			resp, err := http.Get(e.col.Health + "/")
			if err != nil {
				return
			}
			resp.Body.Close()
			if resp.StatusCode == http.StatusServiceUnavailable {
				healthDown = time.Now()
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	require.True(t, e.col.Signal(syscall.SIGTERM))
	<-healthDone
	waitExit(t, e.col.Exited(), sent, "receiver")
	close(stop)
	wg.Wait()

	require.False(t, healthDown.IsZero(), "the health check never answered 503 during the stop")
	var refusedAt time.Time
	var drained []outcome
	ok := map[string]bool{}
	for _, o := range outcomes {
		switch {
		case o.err != nil:
			if refusedAt.IsZero() || o.at.Before(refusedAt) {
				refusedAt = o.at
			}
		case o.status/100 == 2:
			ok[o.id] = true
		case o.status == http.StatusServiceUnavailable && !o.at.Before(sent):
			drained = append(drained, o)
		default:
			t.Errorf("request %s answered %d (%s)", o.id, o.status, o.code)
		}
	}
	for _, o := range outcomes {
		if o.err != nil && o.at.Equal(refusedAt) {
			t.Logf("first connection error: %v", o.err)
		}
	}
	t.Logf("health 503 after %s; %d accepted, %d answered 503 while draining; first refused connection after %s",
		healthDown.Sub(sent).Round(time.Millisecond), len(ok), len(drained), refusedAt.Sub(sent).Round(time.Millisecond))
	require.NotEmpty(t, drained, "new requests during the drain are answered 503")
	for _, o := range drained {
		assert.Equal(t, "unavailable", o.code, o.id)
		secs, err := strconv.Atoi(o.retry)
		assert.NoError(t, err, "Retry-After of %s: %q", o.id, o.retry)
		assert.Positive(t, secs, o.id)
	}
	if !refusedAt.IsZero() {
		assert.True(t, healthDown.Before(refusedAt), "readiness goes down before the listener closes")
		assert.GreaterOrEqual(t, refusedAt.Sub(sent), drainDelay, "the listener stays open for the drain delay")
	}

	// No accepted request is lost: each one answered 2xx is on the stream.
	idRE := regexp.MustCompile(`drain-\d+-\d+`)
	storedIDs := map[string]bool{}
	for _, m := range stored(t, e.js, "drain") {
		for _, id := range idRE.FindAll(m.Data, -1) {
			storedIDs[string(id)] = true
		}
	}
	for id := range ok {
		assert.True(t, storedIDs[id], "request %s was answered 2xx but is not stored", id)
	}
}

// SIGTERM to a pipeline process holding records (batches whose agent call hangs, and
// records fetched ahead): it exits within the bound, hands everything it held back at
// once, and the other pipeline process on the same NATS delivers all of it within 2 s,
// far sooner than the consumer's AckWait (60 s) would let it. Nothing is lost, nothing is
// delivered twice.
func TestPipelineSIGTERMHandsBackToTheOtherProcess(t *testing.T) {
	const n = 300
	nt := testenv.StartNATS(t)
	nc, js := testenv.Connect(t, nt.URL())
	ctx := context.Background()
	m, err := mirror.Open(ctx, js, 1)
	require.NoError(t, err)
	agent := startAgent(t)
	var hang sync.Mutex
	hanging := true
	agent.setRespond(func(int, *http.Request) (int, time.Duration) {
		hang.Lock()
		defer hang.Unlock()
		if hanging {
			// Until the caller gives up: the call is in flight when the process stops.
			return http.StatusOK, time.Minute
		}
		return http.StatusOK, 0
	})
	require.NoError(t, m.PutProject(ctx, mirror.Project{ID: "handback", Version: 1, Pipeline: mirror.Pipeline{AgentEndpointURL: agent.URL, BatchSize: 10}}))
	vars := map[string]string{"NATS_URL": nt.URL(), "SVC_OUTBOUND_ALLOW": "127.0.0.0/8", "SVC_STREAM_REPLICAS": "1",
		"SVC_PIPELINE_FETCH": "10", "SVC_PIPELINE_INFLIGHT_BATCHES": "2", "SVC_DRAIN_TIMEOUT": "300ms"}
	a := testenv.StartCollector(t, testenv.CollectorOptions{Config: "configs/pipeline.yaml", Env: vars})

	require.NoError(t, streams.Ensure(ctx, js, streams.RawConfig("handback", streams.DefaultLimits())))
	for i := range n {
		_, err := js.PublishMsg(ctx, &nats.Msg{Subject: streams.RawSubject("handback"), Data: []byte(`{"id":` + strconv.Itoa(i) + `}`),
			Header: nats.Header{streams.HeaderSignal: []string{records.SignalEvent}}})
		require.NoError(t, err)
	}
	require.NoError(t, nc.Publish(streams.WakeSubject(streams.WakeRaw, "handback"), nil))
	// A holds what the consumer lets one process hold (MaxAckPending, 4 x the fetch):
	// its first call hangs, the batches behind it wait in its lane, the rest is prefetched.
	require.Eventually(t, func() bool { return agent.attempts() > 0 }, 30*time.Second, 10*time.Millisecond)
	cons, err := js.Consumer(ctx, streams.RawStream("handback"), "svc-pipeline")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		ci, err := cons.Info(ctx)
		return err == nil && ci.NumAckPending == 40
	}, 10*time.Second, 10*time.Millisecond, "process A holds the consumer's whole window")
	b := testenv.StartCollector(t, testenv.CollectorOptions{Config: "configs/pipeline.yaml", Env: vars})
	_ = b

	hang.Lock()
	hanging = false
	hang.Unlock()
	sent := time.Now()
	require.True(t, a.Signal(syscall.SIGTERM))
	delivered := func() (unique, total int) {
		seen := map[string]bool{}
		for _, batch := range batchRecords(t, agent.delivered()) {
			for _, r := range batch {
				seen[string(r)] = true
				total++
			}
		}
		return len(seen), total
	}
	require.Eventually(t, func() bool { u, _ := delivered(); return u == n }, 2*time.Second, 10*time.Millisecond,
		"what the stopped process held is delivered by the other one within 2 s of SIGTERM")
	t.Logf("all %d records delivered %s after SIGTERM", n, time.Since(sent).Round(time.Millisecond))
	waitExit(t, a.Exited(), sent, "pipeline process A")
	unique, total := delivered()
	assert.Equal(t, unique, total, "no record delivered twice: the hung call was never answered")
}

// SIGTERM to a sink process holding results (one whose delivery hangs, the rest fetched
// ahead): it exits within the bound and the other sink process delivers every result
// within 2 s, though the consumer's AckWait is 30 s. Nothing is lost or delivered twice.
func TestSinkSIGTERMHandsBackToTheOtherProcess(t *testing.T) {
	const n = 60
	nt := testenv.StartNATS(t)
	_, js := testenv.Connect(t, nt.URL())
	_, m := connectMirror(t, nt.URL())
	ctx := context.Background()
	hook := startAgent(t)
	var hang sync.Mutex
	hanging := true
	hook.setRespond(func(int, *http.Request) (int, time.Duration) {
		hang.Lock()
		defer hang.Unlock()
		if hanging {
			return http.StatusOK, time.Minute
		}
		return http.StatusOK, 0
	})
	vars := map[string]string{"NATS_URL": nt.URL(), "SVC_OUTBOUND_ALLOW": "127.0.0.0/8", "SVC_STREAM_REPLICAS": "1",
		"SVC_UNMATCHED_RESULTS_PER_HOUR": "0", "SVC_SINK_FETCH": "10", "SVC_SINK_ACK_WAIT": "30s", "SVC_DRAIN_TIMEOUT": "300ms"}
	recv := testenv.StartCollector(t, testenv.CollectorOptions{Config: "configs/receiver.yaml", Env: vars})
	key, _ := sinkProject(t, m, recv.HTTP, "sink-handback", mirror.Sink{ID: "s_hook", Kind: "webhook", URL: hook.URL})
	a := testenv.StartCollector(t, testenv.CollectorOptions{Config: "configs/sink.yaml", Env: vars})
	for i := range n {
		postResult(t, recv.HTTP, key, fmt.Sprintf("req_%04d", i), fmt.Sprintf(`{"text": "result %d"}`, i))
	}
	require.Eventually(t, func() bool { return hook.attempts() > 0 }, 30*time.Second, 10*time.Millisecond)
	cons, err := js.Consumer(ctx, streams.OutputStream("sink-handback"), "svc-sink-s_hook")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		ci, err := cons.Info(ctx)
		return err == nil && ci.NumAckPending == 40
	}, 10*time.Second, 10*time.Millisecond, "process A holds the destination's whole window")
	testenv.StartCollector(t, testenv.CollectorOptions{Config: "configs/sink.yaml", Env: vars})

	hang.Lock()
	hanging = false
	hang.Unlock()
	sent := time.Now()
	require.True(t, a.Signal(syscall.SIGTERM))
	require.Eventually(t, func() bool { return len(byRequest(hook.delivered())) == n }, 2*time.Second, 10*time.Millisecond,
		"what the stopped process held is delivered by the other one within 2 s of SIGTERM")
	t.Logf("all %d results delivered %s after SIGTERM", n, time.Since(sent).Round(time.Millisecond))
	waitExit(t, a.Exited(), sent, "sink process A")
	for id, times := range byRequest(hook.delivered()) {
		assert.Equal(t, 1, times, "result %s delivered once", id)
	}
}

// SIGTERM to the control plane: /readyz answers 503 while the listener still serves, a
// request being handled completes, and the process exits within the bound.
func TestControlPlaneSIGTERMReadinessFirst(t *testing.T) {
	nt := testenv.StartNATS(t)
	cp := testenv.StartControlPlane(t, map[string]string{"NATS_URL": nt.URL(), "SVC_DATA_DIR": t.TempDir(),
		"SVC_DRAIN_DELAY": "1s", "SVC_DRAIN_TIMEOUT": "5s"})
	require.Eventually(t, func() bool {
		resp, err := http.Get(cp.URL + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 20*time.Second, 20*time.Millisecond, "the control plane never became ready")

	sent := time.Now()
	require.True(t, cp.Signal(syscall.SIGTERM))
	var ready response
	require.Eventually(t, func() bool {
		ready = send(t, http.MethodGet, cp.URL+"/readyz", nil, nil)
		return ready.StatusCode == http.StatusServiceUnavailable
	}, 2*time.Second, 5*time.Millisecond, "/readyz answers 503 once the stop begins")
	assert.Equal(t, "unavailable", errorCode(t, ready))
	assert.NotEmpty(t, ready.Header.Get("Retry-After"))
	// The listener still serves during the drain delay: liveness answers.
	health := send(t, http.MethodGet, cp.URL+"/healthz", nil, nil)
	assert.Equal(t, http.StatusOK, health.StatusCode, "%s", health.Body)
	took := waitExit(t, cp.Exited(), sent, "control plane")
	assert.GreaterOrEqual(t, took, time.Second, "readiness is down for the drain delay before the listener closes")
}

// SIGTERM to the all-in-one process (configs/embedded.yaml) while an agent call hangs:
// it exits within the bound (the call is handed back, not waited for), and after a
// restart every accepted event is still there for the pipeline, none acked without
// reaching the agent. (Its NATS restarts with it and forgets the naks: the records come
// back after ack_wait, as after a crash; there is no other process to take them sooner.)
func TestEmbeddedSIGTERMExitsAndLosesNothing(t *testing.T) {
	const n = 50
	e := startEmbedded(t, map[string]string{"SVC_DRAIN_DELAY": "200ms", "SVC_DRAIN_TIMEOUT": "300ms"})
	agent := startAgent(t)
	agent.setRespond(func(int, *http.Request) (int, time.Duration) { return http.StatusOK, time.Minute })
	key, _ := e.pipelineProject(t, "embedded-stop", mirror.Pipeline{AgentEndpointURL: agent.URL, BatchSize: 10})
	for i := range n {
		r := post(t, e.col.HTTP+"/v1/events", key, "application/json", []byte(fmt.Sprintf(`{"id":%d}`, i)), nil)
		require.Equal(t, http.StatusAccepted, r.StatusCode, "%s", r.Body)
	}
	require.Eventually(t, func() bool { return agent.attempts() > 0 }, 30*time.Second, 10*time.Millisecond)

	sent := time.Now()
	require.True(t, e.col.Signal(syscall.SIGTERM))
	waitExit(t, e.col.Exited(), sent, "embedded process")
	require.Empty(t, agent.delivered(), "the hung call was never answered")

	e.col.Start()
	_, js := testenv.Connect(t, e.col.EmbeddedNATSURL())
	assert.Len(t, stored(t, js, "embedded-stop"), n, "every accepted event is stored")
	cons, err := js.Consumer(context.Background(), streams.RawStream("embedded-stop"), "svc-pipeline")
	require.NoError(t, err)
	ci, err := cons.Info(context.Background())
	require.NoError(t, err)
	assert.Zero(t, ci.AckFloor.Stream, "nothing acked that the agent did not take")
}
