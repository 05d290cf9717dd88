package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/otelcol-svc/otelcol-svc/bench/internal/benchkit"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/otelcol-svc/otelcol-svc/internal/apikey"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
	"github.com/otelcol-svc/otelcol-svc/internal/webhooksig"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

const (
	traceIDs = 200             // the window's groups
	warmup   = 2 * time.Second // sent before the measured part; its triggers do not count
)

type latencyReport struct {
	TargetPerSec   float64 `json:"target_records_per_sec"`
	SentPerSec     float64 `json:"sent_records_per_sec"` // achieved over the measured part
	Sent           int     `json:"records_sent"`         // measured part
	TriggersSent   int     `json:"triggers_sent"`
	TriggersGot    int     `json:"triggers_received"` // distinct triggers the agent got
	Duplicates     int     `json:"duplicate_calls"`
	IngestFailures int     `json:"ingest_failures"` // requests not answered 200
	// Ingest to agent: from just before the trigger's OTLP request was built and sent to
	// when the agent had read the whole {trigger, window} call.
	EndToEnd benchkit.Dist `json:"ingest_to_agent"`
	// The OTLP/HTTP request alone (POST until its 200), over every record.
	Ingest benchkit.Dist `json:"ingest_request"`
	// Reference: a direct POST of the latest window call body to the same agent, paced
	// like the triggers and sent during the same phase.
	Direct        benchkit.Dist   `json:"direct_post_reference"`
	WindowMean    float64         `json:"window_mean_records"`
	WindowMax     int             `json:"window_max_records"`
	CallBytesMean int             `json:"call_bytes_mean"`
	CPU           benchkit.CPUUse `json:"cpu"`
	Redis         string          `json:"redis"`
}

// latency runs configs/embedded.yaml with the Redis window store and a window-mode
// project, sends rate records/s over OTLP/HTTP for d, and measures each trigger's way to
// the agent.
func latency(r *benchkit.Runner, d time.Duration, rate float64, perfDir string) *latencyReport {
	ctx := context.Background()
	rep := &latencyReport{TargetPerSec: rate, Redis: os.Getenv("REDIS_URL")}
	if rep.Redis == "" {
		rep.Redis = "redis://127.0.0.1:6379/0"
	}
	project := "benchwin-" + randomHex(4) // the shared Redis may hold other runs' windows
	cleanRedis(r, rep.Redis, project)

	ag := startAgent(r, true)
	col := testenv.StartCollector(r, testenv.CollectorOptions{Config: "configs/embedded.yaml", Env: map[string]string{
		"REDIS_URL": rep.Redis, "SVC_OUTBOUND_ALLOW": "127.0.0.0/8",
	}})
	_, js := testenv.Connect(r, col.EmbeddedNATSURL())
	m, err := mirror.Open(ctx, js, 1)
	if err != nil {
		r.Fatal(err)
	}
	key := apikey.Generate(apikey.KindProject)
	err = errors.Join(
		m.PutProject(ctx, mirror.Project{ID: project, Version: 1, SigningSecret: webhooksig.NewSecret(), Pipeline: mirror.Pipeline{
			WindowEnabled: true, GroupKey: "traceId", ContextFilter: "severity_number >= 9",
			Trigger: trigger, WindowDurationSeconds: 300, AgentEndpointURL: ag.URL,
		}}),
		m.PutKey(ctx, apikey.Hash(key), mirror.KeyEntry{KeyID: "k-" + project, ProjectID: project, Scope: mirror.ScopeProject}))
	if err != nil {
		r.Fatal(err)
	}
	s := newSender(col.HTTP+"/v1/logs", key)
	waitReady(r, s, js, project)

	pid := col.Pid()
	fmt.Fprintf(os.Stderr, "latency: otelcol-svc (configs/embedded.yaml, pid %d, window store %s), project %s, %.0f records/s for %s after a %s warm-up...\n",
		pid, rep.Redis, project, rate, d, warmup)
	interval := time.Duration(float64(time.Second) / rate)
	nWarm := int(warmup / interval)
	nAll := nWarm + max(1, int(d/interval))

	var mu sync.Mutex // guards the ingest figures
	var ingestLat []time.Duration
	var wg sync.WaitGroup
	sem := make(chan struct{}, 256)
	g := newLatencyGen(traceIDs)
	var c0 benchkit.CPUSnap
	var measured time.Time
	var stopPerf func()
	var stopDirect func() []time.Duration
	start := time.Now()
	for i := 0; i < nAll; i++ {
		// Paced by schedule, not by a ticker: a late send is followed by the next at once,
		// so the rate holds on average.
		if w := time.Until(start.Add(time.Duration(i) * interval)); w > 0 {
			time.Sleep(w)
		}
		if i == nWarm {
			measured, c0 = time.Now(), benchkit.ReadCPU(pid)
			stopPerf = benchkit.PerfRecord(r, perfDir, "latency", pid)
			stopDirect = direct(ag, rate/triggerEvery)
		}
		sent := time.Now()
		body, isTrigger := g.request(i, sent)
		if isTrigger && i >= nWarm {
			rep.TriggersSent++
		}
		sem <- struct{}{}
		wg.Add(1)
		go func(count bool) {
			defer wg.Done()
			defer func() { <-sem }()
			t0 := time.Now()
			ok := s.post(body)
			el := time.Since(t0)
			mu.Lock()
			defer mu.Unlock()
			if !ok {
				rep.IngestFailures++
			} else if count {
				ingestLat = append(ingestLat, el)
			}
		}(i >= nWarm)
	}
	wg.Wait()
	end := time.Now()
	rep.Sent = nAll - nWarm
	rep.SentPerSec = float64(rep.Sent) / end.Sub(measured).Seconds()
	rep.CPU = benchkit.Since(c0, benchkit.ReadCPU(pid), end.Sub(measured))
	directLat := stopDirect()
	stopPerf()

	// Every trigger should be at the agent within moments; wait a little for stragglers.
	wantCalls := (nAll + triggerEvery - 1) / triggerEvery // records 0, 20, 40, ... are triggers
	for deadline := time.Now().Add(10 * time.Second); ag.calls.Load() < int64(wantCalls) && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	var e2e []time.Duration
	seen := map[int64]bool{}
	var windowSum, bytesSum int
	for _, c := range ag.windowCalls() {
		var call struct {
			Trigger struct {
				Attributes map[string]json.RawMessage `json:"attributes"`
			} `json:"trigger"`
			Window []json.RawMessage `json:"window"`
		}
		if err := json.Unmarshal(c.body, &call); err != nil {
			r.Fatalf("window call is not {trigger, window}: %v", err)
		}
		seq, err1 := strconv.ParseInt(string(call.Trigger.Attributes[attrSeq]), 10, 64)
		ns, err2 := strconv.ParseInt(string(call.Trigger.Attributes[attrSent]), 10, 64)
		if err1 != nil || err2 != nil {
			r.Fatalf("trigger without %s and %s", attrSeq, attrSent)
		}
		if seq < int64(nWarm) {
			continue
		}
		if seen[seq] {
			rep.Duplicates++
			continue
		}
		seen[seq] = true
		e2e = append(e2e, c.at.Sub(time.Unix(0, ns)))
		windowSum += len(call.Window)
		bytesSum += len(c.body)
		rep.WindowMax = max(rep.WindowMax, len(call.Window))
	}
	rep.TriggersGot = len(seen)
	if len(seen) > 0 {
		rep.WindowMean = float64(windowSum) / float64(len(seen))
		rep.CallBytesMean = bytesSum / len(seen)
	}
	rep.EndToEnd, rep.Ingest, rep.Direct = benchkit.DistOf(e2e), benchkit.DistOf(ingestLat), benchkit.DistOf(directLat)
	return rep
}

// waitReady waits until the collector accepts the key (an empty OTLP request publishes
// nothing) and consumes the project, so start-up is not measured.
func waitReady(r *benchkit.Runner, s *sender, js jetstream.JetStream, project string) {
	deadline := time.Now().Add(20 * time.Second)
	for !s.post(nil) {
		if time.Now().After(deadline) {
			r.Fatal("the collector never accepted the bench key")
		}
		time.Sleep(20 * time.Millisecond)
	}
	for {
		if _, err := js.Consumer(context.Background(), streams.RawStream(project), durable); err == nil {
			return
		}
		if time.Now().After(deadline) {
			r.Fatalf("the collector never consumed project %s", project)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// direct is the latency reference: until the returned function is called, it POSTs the
// latest window call the agent received (a trigger-sized body before the first) straight
// to the agent, at rate calls/s over a keep-alive connection like the collector's, and
// returns the round trips.
func direct(ag *agent, rate float64) (stop func() []time.Duration) {
	done := make(chan struct{})
	var lat []time.Duration
	finished := make(chan struct{})
	client := &http.Client{Timeout: 10 * time.Second}
	go func() {
		defer close(finished)
		t := time.NewTicker(time.Duration(float64(time.Second) / rate))
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			body := ag.lastWindow()
			if body == nil {
				body = []byte(`{"trigger":{},"window":[]}`)
			}
			t0 := time.Now()
			resp, err := client.Post(ag.URL+"/ref", "application/json", bytes.NewReader(body))
			if err != nil {
				continue
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				lat = append(lat, time.Since(t0))
			}
		}
	}()
	return func() []time.Duration {
		close(done)
		<-finished
		client.CloseIdleConnections()
		return lat
	}
}

// sender posts OTLP/HTTP protobuf requests to the collector over keep-alive connections.
type sender struct {
	client *http.Client
	url    string
	key    string
}

func newSender(url, key string) *sender {
	tr := &http.Transport{MaxIdleConns: 64, MaxIdleConnsPerHost: 64, IdleConnTimeout: time.Minute, DisableCompression: true}
	return &sender{client: &http.Client{Transport: tr, Timeout: 30 * time.Second}, url: url, key: key}
}

// post sends one request and reports whether it was answered 200.
func (s *sender) post(body []byte) bool {
	req, err := http.NewRequest(http.MethodPost, s.url, bytes.NewReader(body))
	if err != nil {
		return false
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Set("X-API-Key", s.key)
	resp, err := s.client.Do(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, resp.Body) // drained, so the connection is reused
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// cleanRedis checks that Redis answers, and removes the project's windows at the end
// (they would otherwise expire after window_duration).
func cleanRedis(r *benchkit.Runner, url, project string) {
	opts, err := redis.ParseURL(url)
	if err != nil {
		r.Fatalf("REDIS_URL: %v", err)
	}
	c := redis.NewClient(opts)
	if err := c.Ping(context.Background()).Err(); err != nil {
		c.Close()
		r.Fatalf("Redis at %s must run for the latency phase: %v", url, err)
	}
	r.Cleanup(func() {
		defer c.Close()
		ctx := context.Background()
		// The window store's keys: "svc:win:{<project>}:<group>" (internal/windowstore).
		it := c.Scan(ctx, 0, "svc:win:{"+project+"}:*", 1000).Iterator()
		var keys []string
		for it.Next(ctx) {
			keys = append(keys, it.Val())
		}
		for k := range slices.Chunk(keys, 500) {
			_ = c.Del(ctx, k...).Err()
		}
	})
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
