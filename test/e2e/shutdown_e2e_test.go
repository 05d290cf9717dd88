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

// Every test here runs the roles with the shipped drain settings (configs/*.yaml): the
// bounds must hold with what operators get, not with shortened timeouts.

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
	const drainDelay = 2 * time.Second // configs/receiver.yaml's SVC_DRAIN_DELAY default
	e := startReceiver(t, nil)
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
	// The clients keep sending until their connection is refused, so the listener's
	// closing is observed, not assumed.
	require.False(t, refusedAt.IsZero(), "no client saw the listener close before the process exited")
	assert.True(t, healthDown.Before(refusedAt), "readiness goes down before the listener closes")
	assert.GreaterOrEqual(t, refusedAt.Sub(sent), drainDelay, "the listener stays open for the drain delay")

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

// SIGTERM to a pipeline process holding records (a batch whose agent call hangs, and
// records fetched ahead): it exits within the bound, hands back what was fetched ahead at
// once and the hung batch after drain_timeout, and the other pipeline process on the same
// NATS delivers all of it within 2 s, far sooner than the consumer's AckWait (60 s) would
// let it. Nothing is lost; no record reaches the agent more often than the hung call
// explains (the agent received that call's records, though it never answered).
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
		"SVC_PIPELINE_FETCH": "10", "SVC_PIPELINE_INFLIGHT_BATCHES": "2"}
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
	_, total := delivered()
	assert.Equal(t, n, total, "each record answered 2xx exactly once")
	// Every call that reached the agent counts, answered or not: a record sent once more
	// than the cut-off call explains (A retrying while stopping, or both processes
	// holding it) shows here.
	var cut []agentCall
	require.Eventually(t, func() bool { cut = agent.cutOff(); return len(cut) > 0 }, time.Second, 10*time.Millisecond,
		"A's hung call was cut off when it stopped, not answered")
	for _, c := range cut {
		assert.Less(t, c.At.Sub(sent), 2*time.Second, "A gave up its hung call within drain_timeout")
	}
	inCut := countRecords(t, cut)
	for r, times := range countRecords(t, agent.received()) {
		assert.Equal(t, 1, times, "record %s answered once", r)
		assert.LessOrEqual(t, inCut[r], 1, "record %s sent again by A while it stopped", r)
	}
}

// countRecords counts how often each record appears in legacy-mode calls.
func countRecords(t *testing.T, calls []agentCall) map[string]int {
	t.Helper()
	n := map[string]int{}
	for _, batch := range batchRecords(t, calls) {
		for _, r := range batch {
			n[string(r)]++
		}
	}
	return n
}

// SIGTERM to a sink process holding results (one whose delivery hangs, the rest fetched
// ahead): it exits within the bound and the other sink process delivers every result
// within 2 s, though the consumer's AckWait is 30 s. Nothing is lost; no result reaches
// the webhook more often than the cut-off delivery explains.
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
		"SVC_UNMATCHED_RESULTS_PER_HOUR": "0", "SVC_SINK_FETCH": "10", "SVC_SINK_ACK_WAIT": "30s"}
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
	for id, times := range byRequest(hook.received()) {
		assert.Equal(t, 1, times, "result %s answered once", id)
	}
	// The cut-off delivery reached the webhook too: counting it, a result sent once more
	// than that explains would show.
	var cut []agentCall
	require.Eventually(t, func() bool { cut = hook.cutOff(); return len(cut) > 0 }, time.Second, 10*time.Millisecond,
		"A's hung delivery was cut off when it stopped, not answered")
	for id, times := range byRequest(cut) {
		assert.Equal(t, 1, times, "result %s sent again by A while it stopped", id)
	}
}

// SIGTERM to the control plane: /readyz answers 503 while the listener still serves, a
// request being handled completes, and the process exits within the bound.
func TestControlPlaneSIGTERMReadinessFirst(t *testing.T) {
	nt := testenv.StartNATS(t)
	const drainDelay = 2 * time.Second // the control plane's SVC_DRAIN_DELAY default
	cp := testenv.StartControlPlane(t, map[string]string{"NATS_URL": nt.URL(), "SVC_DATA_DIR": t.TempDir()})
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
	assert.GreaterOrEqual(t, took, drainDelay, "readiness is down for the drain delay before the listener closes")
}

// SIGTERM to the all-in-one process (configs/embedded.yaml) while an agent call and a
// webhook delivery both hang: the receivers stop one after another (ingest drain_delay,
// then each jetstream receiver's drain_timeout), and the process still exits within the
// bound. After a restart every accepted event is still there for the pipeline and the
// result for its destination, none acked without reaching the agent or the webhook.
// (Its NATS restarts with it and forgets the naks: the records come back after ack_wait,
// as after a crash; there is no other process to take them sooner.)
func TestEmbeddedSIGTERMExitsAndLosesNothing(t *testing.T) {
	const n = 50
	e := startEmbedded(t, nil)
	hung := func(int, *http.Request) (int, time.Duration) { return http.StatusOK, time.Minute }
	agent, hook := startAgent(t), startAgent(t)
	agent.setRespond(hung)
	hook.setRespond(hung)
	key, _ := e.pipelineProject(t, "embedded-stop", mirror.Pipeline{AgentEndpointURL: agent.URL, BatchSize: 10})
	sinkKey, _ := sinkProject(t, e.m, e.col.HTTP, "embedded-stop-sink", mirror.Sink{ID: "s_hook", Kind: "webhook", URL: hook.URL})
	for i := range n {
		r := post(t, e.col.HTTP+"/v1/events", key, "application/json", []byte(fmt.Sprintf(`{"id":%d}`, i)), nil)
		require.Equal(t, http.StatusAccepted, r.StatusCode, "%s", r.Body)
	}
	postResult(t, e.col.HTTP, sinkKey, "req_stop", `{"text": "held"}`)
	require.Eventually(t, func() bool { return agent.attempts() > 0 && hook.attempts() > 0 }, 30*time.Second, 10*time.Millisecond,
		"an agent call and a webhook delivery are in flight")

	sent := time.Now()
	require.True(t, e.col.Signal(syscall.SIGTERM))
	waitExit(t, e.col.Exited(), sent, "embedded process")

	e.col.Start()
	_, js := testenv.Connect(t, e.col.EmbeddedNATSURL())
	assert.Len(t, stored(t, js, "embedded-stop"), n, "every accepted event is stored")
	ackFloor := func(stream, durable string) uint64 {
		cons, err := js.Consumer(context.Background(), stream, durable)
		require.NoError(t, err)
		ci, err := cons.Info(context.Background())
		require.NoError(t, err)
		return ci.AckFloor.Stream
	}
	assert.Zero(t, ackFloor(streams.RawStream("embedded-stop"), "svc-pipeline"), "nothing acked that the agent did not take")
	assert.Len(t, outputs(t, js, "embedded-stop-sink"), 1, "the result is stored")
	assert.Zero(t, ackFloor(streams.OutputStream("embedded-stop-sink"), "svc-sink-s_hook"), "no result acked that the webhook did not take")
}
