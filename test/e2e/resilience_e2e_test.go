package e2e

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/apikey"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

func TestNATSOutageAnswers503ThenRecoversWithoutRestart(t *testing.T) {
	e := startReceiver(t, nil)
	key := e.project(t, "outage")
	require.Equal(t, http.StatusAccepted, post(t, e.col.HTTP+"/v1/events", key, "application/json", []byte(`{"n":0}`), nil).StatusCode)

	require.Equal(t, http.StatusOK, healthStatus(t, e.col), "healthy while NATS is up")

	e.nats.Stop()
	start := time.Now()
	r := post(t, e.col.HTTP+"/v1/events", key, "application/json", []byte(`{"n":1}`), nil)
	took := time.Since(start)
	require.Equal(t, http.StatusServiceUnavailable, r.StatusCode, "%s", r.Body)
	assert.Equal(t, "unavailable", errorCode(t, r))
	assert.NotEmpty(t, r.Header.Get("Retry-After"))
	assert.Less(t, took, 10*time.Second, "a request must not hang while NATS is down")
	// The key configuration stays in memory: the key is still recognised (not 401).
	r = post(t, e.col.HTTP+"/v1/logs", key, "application/json", []byte(`{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"body":{"stringValue":"x"}}]}]}]}`), nil)
	require.Equal(t, http.StatusServiceUnavailable, r.StatusCode)
	assert.NotEmpty(t, r.Header.Get("Retry-After"))

	// The health check tells the operator: an error status (the health_check extension
	// answers 500) once NATS has been away longer than the recovery duration (5 s),
	// naming the lost dependency.
	require.Eventually(t, func() bool { return healthStatus(t, e.col) >= 500 }, 20*time.Second, 100*time.Millisecond,
		"the health check stayed green while NATS was down")
	assert.Contains(t, healthBody(t, e.col), "NATS is unreachable")

	e.nats.Start(t)
	require.Eventually(t, func() bool {
		return post(t, e.col.HTTP+"/v1/events", key, "application/json", []byte(`{"n":2}`), nil).StatusCode == http.StatusAccepted
	}, 20*time.Second, 100*time.Millisecond, "ingestion did not resume after NATS came back")
	require.Eventually(t, func() bool { return healthStatus(t, e.col) == http.StatusOK }, 20*time.Second, 100*time.Millisecond,
		"the health check did not recover with NATS")

	_, js := testenv.Connect(t, e.nats.URL())
	msgs := stored(t, js, "outage")
	require.NotEmpty(t, msgs)
	assert.Equal(t, `{"n":0}`, string(msgs[0].Data))
	for _, m := range msgs {
		assert.NotEqual(t, `{"n":1}`, string(m.Data), "a refused request must not be stored")
	}
}

func TestFullStreamPushesBackWith503(t *testing.T) {
	e := startReceiver(t, map[string]string{"SVC_STREAM_MAX_BYTES": "4096"})
	key := e.project(t, "full")
	payload := []byte(`{"pad":"` + strings.Repeat("0123456789", 7) + `"}`)
	var accepted, refused int
	for i := 0; i < 200 && refused == 0; i++ {
		r := post(t, e.col.HTTP+"/v1/events", key, "application/json", payload, nil)
		switch r.StatusCode {
		case http.StatusAccepted:
			accepted++
		case http.StatusServiceUnavailable:
			refused++
			assert.Contains(t, string(r.Body), "full")
			assert.NotEmpty(t, r.Header.Get("Retry-After"))
		default:
			t.Fatalf("unexpected %d %s", r.StatusCode, r.Body)
		}
	}
	require.Equal(t, 1, refused, "the stream never filled up")
	assert.Len(t, stored(t, e.js, "full"), accepted, "everything answered 202 is stored, nothing else")
}

// In the embedded default NATS lives inside the process: records answered 2xx must
// survive a kill -9 of that process and be there after a restart.
func TestAcceptedRecordsSurviveKill9(t *testing.T) {
	col := testenv.StartCollector(t, testenv.CollectorOptions{Config: "configs/embedded.yaml"})
	js, m := connectMirror(t, col.EmbeddedNATSURL())
	key := apikey.Generate(apikey.KindProject)
	require.NoError(t, m.PutKey(context.Background(), apikey.Hash(key), mirror.KeyEntry{KeyID: "k", ProjectID: "crash", Scope: mirror.ScopeProject}))
	waitAccepted(t, col.HTTP, key)

	// Several writers keep sending until the process dies; every 202 is remembered.
	var acked sync.Map
	var n atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				id := strconv.FormatInt(n.Add(1), 10)
				req, _ := http.NewRequest(http.MethodPost, col.HTTP+"/v1/events", strings.NewReader(`{"id":`+id+`}`))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("X-API-Key", key)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					return // the process is gone
				}
				resp.Body.Close()
				if resp.StatusCode == http.StatusAccepted {
					acked.Store(`{"id":`+id+`}`, true)
				}
			}
		}()
	}
	require.Eventually(t, func() bool { return n.Load() > 300 }, 30*time.Second, 10*time.Millisecond)
	col.Kill()
	close(stop)
	wg.Wait()

	col.Start()
	_, js = testenv.Connect(t, col.EmbeddedNATSURL())
	have := map[string]bool{}
	for _, m := range stored(t, js, "crash") {
		have[string(m.Data)] = true
	}
	missing := 0
	total := 0
	acked.Range(func(k, _ any) bool {
		total++
		if !have[k.(string)] {
			missing++
		}
		return true
	})
	require.Greater(t, total, 100)
	assert.Zero(t, missing, "%d of %d acknowledged records lost", missing, total)
	t.Logf("%d acknowledged records, all present after kill -9 and restart", total)
}

func healthStatus(t *testing.T, c *testenv.Collector) int {
	t.Helper()
	resp, err := http.Get(c.Health)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

func healthBody(t *testing.T, c *testenv.Collector) string {
	t.Helper()
	resp, err := http.Get(c.Health + "?verbose")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}
