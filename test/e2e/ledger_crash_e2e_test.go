package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// ledgerFigures is the ledger as the console reads it, with its destinations.
type ledgerFigures struct {
	Results          int64    `json:"results"`
	Delivered        int64    `json:"delivered"`
	SinkDeadLettered int64    `json:"sink_dead_lettered"`
	Balanced         bool     `json:"balanced"`
	Approximate      []string `json:"approximate"`
	Destinations     map[string]struct {
		Delivered    int64 `json:"delivered"`
		DeadLettered int64 `json:"dead_lettered"`
		Pending      int64 `json:"pending"`
		Results      int64 `json:"results"`
		Exact        bool  `json:"exact"`
	} `json:"destinations"`
}

// A receiver killed while 3,000 results come in, and a sink killed
// while they are delivered, take nothing from the ledger: it shows every result that
// arrived and every one the webhook took. Before, each process lost the counts it had
// not written yet (up to a second's), and the ledger still said balanced.
func TestLedgerExactAfterReceiverAndSinkKills(t *testing.T) {
	const n = 3000
	nt := testenv.StartNATS(t)
	_, m := connectMirror(t, nt.URL())
	hook := startAgent(t)
	// Slow enough that the sink is killed mid-run.
	hook.setRespond(func(int, *http.Request) (int, time.Duration) { return http.StatusOK, time.Millisecond })
	// The results' request ids are made up (no agent call issued them): unmatched ones
	// are limited per hour by default.
	vars := map[string]string{"NATS_URL": nt.URL(), "SVC_OUTBOUND_ALLOW": "127.0.0.0/8", "SVC_STREAM_REPLICAS": "1",
		"SVC_UNMATCHED_RESULTS_PER_HOUR": "0"}
	recv := testenv.StartCollector(t, testenv.CollectorOptions{Config: "configs/receiver.yaml", Env: vars})
	key, _ := sinkProject(t, m, recv.HTTP, "tally", mirror.Sink{ID: "s_hook", Kind: "webhook", URL: hook.URL})
	sink := testenv.StartCollector(t, testenv.CollectorOptions{Config: "configs/sink.yaml", Env: vars})

	// Four agents post results; each is posted until the receiver answers 202, as an
	// agent retries when the receiver is away.
	var accepted atomic.Int64
	var recvMu sync.RWMutex // held to swap the receiver's process
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 4 {
				body := fmt.Sprintf(`{"request_id": "req_tally_%05d", "payload": {"text": "result %d"}}`, i, i)
				for {
					recvMu.RLock()
					ok := postOK(recv.HTTP+"/internal/agent-output", key, body)
					recvMu.RUnlock()
					if ok {
						accepted.Add(1)
						break
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
		}()
	}
	require.Eventually(t, func() bool { return accepted.Load() > n/3 }, 60*time.Second, 5*time.Millisecond)
	recvMu.Lock()
	recv.Kill()
	t.Logf("receiver killed after %d results accepted", accepted.Load())
	recv.Start()
	recvMu.Unlock()

	hooked := func() int {
		ids := map[string]bool{}
		for _, c := range hook.delivered() {
			ids[c.Header.Get("webhook-id")] = true
		}
		return len(ids)
	}
	require.Eventually(t, func() bool { return hooked() > 2*n/3 }, 60*time.Second, 5*time.Millisecond)
	sink.Kill()
	t.Logf("sink killed after %d results delivered", hooked())
	sink.Start()
	wg.Wait()

	var l ledgerFigures
	read := func() ledgerFigures {
		r := get(t, recv.HTTP+"/console/v1/projects/tally/ledger", map[string]string{"X-API-Key": key})
		require.Equal(t, http.StatusOK, r.StatusCode, "%s", r.Body)
		var l ledgerFigures
		require.NoError(t, json.Unmarshal(r.Body, &l), "%s", r.Body)
		return l
	}
	// Settled: every result stored has reached the webhook, and nothing waits.
	var seen struct {
		Ledger      ledgerFigures
		WebhookTook int
	}
	require.Eventually(t, func() bool {
		l = read()
		seen.Ledger, seen.WebhookTook = l, hooked()
		return l.Destinations["s_hook"].Pending == 0 && int64(seen.WebhookTook) >= accepted.Load() && l.Results >= accepted.Load()
	}, 90*time.Second, 200*time.Millisecond, "deliveries never settled, or the ledger misses results (%d accepted): %+v", n, &seen)
	l = read()
	took := int64(hooked())
	t.Logf("ledger after the kills: %+v; %d results accepted, the webhook took %d", l, accepted.Load(), took)
	d := l.Destinations["s_hook"]
	assert.Equal(t, took, l.Results, "results: every result stored, which the webhook took each of")
	assert.Equal(t, took, d.Delivered, "the destination's delivered: what the webhook took")
	assert.Equal(t, took, l.Delivered)
	assert.Zero(t, d.DeadLettered)
	assert.Equal(t, d.Results, d.Delivered+d.DeadLettered+d.Pending, "the destination's figures add up")
	assert.True(t, d.Exact, "derived from the cursor, not counted")
	assert.NotContains(t, l.Approximate, "delivered")
}

// After an upgrade, a destination whose cursor the
// previous release created (and recorded no start for) gets exact figures from when the
// upgraded sink finds it, saying since when, and the ledger balances again; before, its
// figures stayed counted and `balanced` false for good.
func TestLedgerExactAfterUpgradeForACursorWithoutAStart(t *testing.T) {
	nt := testenv.StartNATS(t)
	js, m := connectMirror(t, nt.URL())
	hook := startAgent(t)
	vars := map[string]string{"NATS_URL": nt.URL(), "SVC_OUTBOUND_ALLOW": "127.0.0.0/8", "SVC_STREAM_REPLICAS": "1",
		"SVC_UNMATCHED_RESULTS_PER_HOUR": "0"}
	recv := testenv.StartCollector(t, testenv.CollectorOptions{Config: "configs/receiver.yaml", Env: vars})
	key, _ := sinkProject(t, m, recv.HTTP, "upgr", mirror.Sink{ID: "s_hook", Kind: "webhook", URL: hook.URL})
	post := func(from, to int) {
		for i := from; i < to; i++ {
			body := fmt.Sprintf(`{"request_id": "req_upgr_%03d", "payload": {"text": "result %d"}}`, i, i)
			require.True(t, postOK(recv.HTTP+"/internal/agent-output", key, body))
		}
	}

	// The previous release's sink: its cursor took 3 of 5 results, settled 2 and went
	// away holding the third (it comes again after the ack wait).
	post(0, 5)
	ctx := context.Background()
	old, err := js.CreateConsumer(ctx, streams.OutputStream("upgr"), jetstream.ConsumerConfig{
		Durable: "svc-sink-s_hook", AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Second,
		DeliverPolicy: jetstream.DeliverAllPolicy, MaxDeliver: -1})
	require.NoError(t, err)
	b, err := old.Fetch(3, jetstream.FetchMaxWait(5*time.Second))
	require.NoError(t, err)
	taken := 0
	for msg := range b.Messages() {
		if taken < 2 {
			require.NoError(t, msg.DoubleAck(ctx))
		}
		taken++
	}
	require.Equal(t, 3, taken)

	// The upgraded sink starts, and results keep coming.
	testenv.StartCollector(t, testenv.CollectorOptions{Config: "configs/sink.yaml", Env: vars})
	post(5, 10)

	hooked := func() int64 {
		ids := map[string]bool{}
		for _, c := range hook.delivered() {
			ids[c.Header.Get("webhook-id")] = true
		}
		return int64(len(ids))
	}
	type dest struct {
		Delivered    int64      `json:"delivered"`
		DeadLettered int64      `json:"dead_lettered"`
		Pending      int64      `json:"pending"`
		Results      int64      `json:"results"`
		Since        *time.Time `json:"since"`
		Exact        bool       `json:"exact"`
	}
	var l struct {
		Balanced     bool            `json:"balanced"`
		Approximate  []string        `json:"approximate"`
		Destinations map[string]dest `json:"destinations"`
		WebhookTook  int64           `json:"-"` // not the ledger's: for the failure message
	}
	require.Eventually(t, func() bool {
		r := get(t, recv.HTTP+"/console/v1/projects/upgr/ledger", map[string]string{"X-API-Key": key})
		require.Equal(t, http.StatusOK, r.StatusCode, "%s", r.Body)
		require.NoError(t, json.Unmarshal(r.Body, &l), "%s", r.Body)
		l.WebhookTook = hooked()
		return l.Destinations["s_hook"].Pending == 0 && l.WebhookTook == 8 && l.Balanced
	}, 60*time.Second, 100*time.Millisecond, "the ledger never balanced after the upgrade: %+v", &l)
	d := l.Destinations["s_hook"]
	assert.True(t, d.Exact)
	require.NotNil(t, d.Since)
	assert.True(t, d.Since.After(old.CachedInfo().Created), "since the upgraded sink found the cursor")
	assert.Equal(t, hooked(), d.Delivered, "what the webhook took since: the result held, the 2 never taken, the 5 new")
	assert.Equal(t, d.Results, d.Delivered+d.DeadLettered+d.Pending)
	assert.NotContains(t, l.Approximate, "delivered")
}
