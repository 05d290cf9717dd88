package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/otelcol-svc/otelcol-svc/bench/internal/benchkit"
	"github.com/otelcol-svc/otelcol-svc/internal/apikey"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/webhooksig"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// env is one environment: nats-server and the collector (configs/embedded.yaml with
// NATS_URL set: receiver, pipeline and sink roles in one process) as two processes, the
// configuration mirror, and the agent.
type env struct {
	r        *benchkit.Runner
	nats     *natsServer
	col      *testenv.Collector
	m        *mirror.Store
	ag       *agent
	client   *http.Client
	conc     int
	projects []project
	colProf  string // the collector's pprof endpoint, with -pprof
}

type project struct{ id, key string }

func newEnv(r *benchkit.Runner, natsBin string, conc int) *env {
	e := &env{r: r, conc: conc, ag: startAgent(r)}
	e.nats = startNATS(r, natsBin)
	cfg := "configs/embedded.yaml"
	if prof != nil {
		port := testenv.FreePort(r)
		cfg, e.colProf = prof.collectorConfig(r, port), "http://127.0.0.1:"+strconv.Itoa(port)
	}
	e.col = testenv.StartCollector(r, testenv.CollectorOptions{Config: cfg, Env: map[string]string{
		"NATS_URL": e.nats.url(), "SVC_OUTBOUND_ALLOW": "127.0.0.0/8",
	}})
	_, js := testenv.Connect(r, e.nats.url())
	var err error
	if e.m, err = mirror.Open(context.Background(), js, 1); err != nil {
		r.Fatal(err)
	}
	tr := &http.Transport{MaxIdleConns: 2 * conc, MaxIdleConnsPerHost: 2 * conc, IdleConnTimeout: time.Minute, DisableCompression: true}
	e.client = &http.Client{Transport: tr, Timeout: 30 * time.Second}
	r.Cleanup(tr.CloseIdleConnections)
	return e
}

// each runs f for every project on e.conc goroutines.
func (e *env) each(f func(i int, p project)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(e.conc, len(e.projects)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < len(e.projects); i = int(next.Add(1) - 1) {
				f(i, e.projects[i])
			}
		}()
	}
	wg.Wait()
}

type createResult struct {
	Projects      int       `json:"projects"`
	WriteSeconds  float64   `json:"mirror_write_seconds"`
	WritesPerSec  float64   `json:"mirror_projects_per_sec"`
	ReadySeconds  float64   `json:"until_ready_seconds"` // from the first write until every project consumed its event
	ReadyPerSec   float64   `json:"projects_per_sec_to_ready"`
	FirstReadying ready     `json:"first_event"`
	CPU           createCPU `json:"cpu"`
}

// create publishes n projects into the mirror, each with an agent endpoint and one
// enabled webhook destination, then sends each one event and waits until each is at the
// agent: the collector creates a project's streams and consumers when it sees it.
func (e *env) create(n int, timeout time.Duration) createResult {
	ctx := context.Background()
	now := time.Now().UTC()
	for i := range n {
		e.projects = append(e.projects, project{id: fmt.Sprintf("p%05d", i), key: apikey.Generate(apikey.KindProject)})
	}
	var mu sync.Mutex
	var errs []error
	c0, n0 := benchkit.ReadCPU(e.col.Pid()), benchkit.ReadCPU(e.nats.pid())
	t0 := time.Now()
	e.each(func(_ int, p project) {
		err := errors.Join(
			e.m.PutProject(ctx, mirror.Project{ID: p.id, Name: p.id, Version: 1, UpdatedAt: now, SigningSecret: webhooksig.NewSecret(),
				Pipeline: mirror.Pipeline{AgentEndpointURL: e.ag.URL + "/agent/" + p.id, BatchSize: 10, WindowDurationSeconds: 300},
				Sinks:    []mirror.Sink{{ID: "s-" + p.id, Kind: "webhook", Enabled: true, URL: e.ag.URL + "/webhook/" + p.id, Method: http.MethodPost, Since: now}},
			}),
			e.m.PutKey(ctx, apikey.Hash(p.key), mirror.KeyEntry{KeyID: "k-" + p.id, ProjectID: p.id, Scope: mirror.ScopeProject}))
		if err != nil {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		}
	})
	written := time.Since(t0)
	if len(errs) > 0 {
		e.r.Fatalf("%d of %d mirror writes failed, e.g. %v", len(errs), n, errs[0])
	}
	res := createResult{Projects: n, WriteSeconds: written.Seconds(), WritesPerSec: float64(n) / written.Seconds()}
	res.FirstReadying = e.ready(1, t0, timeout)
	if res.FirstReadying.Complete {
		res.ReadySeconds = res.FirstReadying.ConsumingSeconds
		res.ReadyPerSec = float64(n) / res.ReadySeconds
	}
	// Who was busy: if this process used the most, the tool limited the rate.
	c1, n1 := benchkit.ReadCPU(e.col.Pid()), benchkit.ReadCPU(e.nats.pid())
	u := benchkit.Since(c0, c1, time.Since(t0))
	res.CPU = createCPU{Collector: u.Collector, NATS: (n1.Collector - n0.Collector).Seconds() / time.Since(t0).Seconds(), Bench: u.Bench}
	res.CPU.Other = max(0, u.Other-res.CPU.NATS)
	return res
}

// createCPU is the cores each used from the first write until every project was ready.
type createCPU struct {
	Collector float64 `json:"collector_cores"`
	NATS      float64 `json:"nats_cores"`
	Bench     float64 `json:"bench_cores"`
	Other     float64 `json:"other_cores"`
}

// ready is how long it took, from a start, until every project accepted one event (a 2xx
// answer, retried until then) and until the agent had received each project's event.
type ready struct {
	Round            int            `json:"round"`
	Complete         bool           `json:"complete"`
	Accepted         int            `json:"accepted"`
	Consumed         int            `json:"consumed"`
	AcceptingSeconds float64        `json:"accepting_seconds"`
	ConsumingSeconds float64        `json:"consuming_seconds"`
	Refusals         map[string]int `json:"refusals"` // answers other than 2xx on the way, by status and code
}

func (e *env) ready(round int, t0 time.Time, timeout time.Duration) ready {
	res := ready{Round: round, Refusals: map[string]int{}}
	deadline := t0.Add(timeout)
	var mu sync.Mutex
	var lastAccepted time.Time
	body := []byte(fmt.Sprintf(`{"bench":"tenants","round":%d}`, round))
	// At 10,000 projects a round can take minutes: say how far it got now and then.
	done := make(chan struct{})
	defer close(done)
	go func() {
		tick := time.NewTicker(10 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			got, _ := e.ag.reachedRound(round)
			mu.Lock()
			fmt.Fprintf(os.Stderr, "  ... %.0f s: %d of %d projects accepted, %d consumed\n", time.Since(t0).Seconds(), res.Accepted, len(e.projects), got)
			mu.Unlock()
		}
	}()
	e.each(func(_ int, p project) {
		for wait := 50 * time.Millisecond; time.Now().Before(deadline); wait = min(2*wait, time.Second) {
			refusal := e.send(p.key, body)
			now := time.Now()
			mu.Lock()
			if refusal == "" {
				res.Accepted++
				lastAccepted = now
				mu.Unlock()
				return
			}
			res.Refusals[refusal]++
			mu.Unlock()
			time.Sleep(wait)
		}
	})
	res.AcceptingSeconds = lastAccepted.Sub(t0).Seconds()
	for {
		got, last := e.ag.reachedRound(round)
		res.Consumed = got
		if got >= len(e.projects) {
			res.ConsumingSeconds = last.Sub(t0).Seconds()
			break
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	res.Complete = res.Accepted == len(e.projects) && res.Consumed == len(e.projects)
	return res
}

// send posts one event to /v1/events and returns "" when it was accepted, else what the
// answer was (status and error code, or the transport error).
func (e *env) send(key string, body []byte) string {
	req, err := http.NewRequest(http.MethodPost, e.col.HTTP+"/v1/events", bytes.NewReader(body))
	if err != nil {
		return err.Error()
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-API-Key", key)
	resp, err := e.client.Do(req)
	if err != nil {
		return "no answer"
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 == 2 {
		return ""
	}
	var eb struct {
		Error struct{ Code string } `json:"error"`
	}
	_ = json.Unmarshal(b, &eb)
	return fmt.Sprintf("%d %s", resp.StatusCode, eb.Error.Code)
}

// idle is what the two processes use while no project sends anything.
type idle struct {
	Seconds        float64      `json:"seconds"`
	CollectorCores float64      `json:"collector_cores"`
	NATSCores      float64      `json:"nats_cores"`
	BenchCores     float64      `json:"bench_cores"`
	OtherCores     float64      `json:"other_cores"`
	StealCores     float64      `json:"steal_cores"`
	CollectorRSS   benchkit.Mem `json:"collector_rss"`
	NATSRSS        benchkit.Mem `json:"nats_rss"`
	// Messages through NATS per second (in + out): pull requests, heartbeats, KV and
	// JetStream API traffic, since no project sends anything.
	NATSMsgsPerSec float64 `json:"nats_msgs_per_sec"`
	JSAPIPerSec    float64 `json:"jetstream_api_calls_per_sec"`
	Connections    int     `json:"nats_connections"`
	Subscriptions  uint32  `json:"nats_subscriptions"`
	Streams        int     `json:"streams"`
	Consumers      int     `json:"consumers"`
	StoreFiles     int     `json:"store_files"`
	StoreDiskMiB   float64 `json:"store_disk_mib"` // blocks allocated, as du counts
	JSStoreMiB     float64 `json:"jetstream_storage_mib"`
	ReservedMiB    float64 `json:"jetstream_reserved_mib"`
	Goroutines     int     `json:"collector_goroutines"` // filled in by the restart
	// The collector's live Go heap (its own metric otelcol_process_runtime_heap_alloc_bytes):
	// RSS above it is memory the runtime holds but does not use now, e.g. after a burst.
	CollectorHeapMiB float64 `json:"collector_heap_mib"`
	// With -pprof: each process's heap right after a garbage collection (pprof.go).
	CollectorLiveHeapMiB float64 `json:"collector_live_heap_mib,omitempty"`
	NATSLiveHeapMiB      float64 `json:"nats_live_heap_mib,omitempty"`
}

func (e *env) idle(d time.Duration) idle {
	var v0, v1 varz
	var j0, j1 jsz
	cp, np := e.col.Pid(), e.nats.pid()
	c0, n0 := benchkit.ReadCPU(cp), benchkit.ReadCPU(np)
	err := errors.Join(e.nats.monitor("/varz", &v0), e.nats.monitor("/jsz", &j0))
	t0 := time.Now()
	time.Sleep(d)
	c1, n1 := benchkit.ReadCPU(cp), benchkit.ReadCPU(np)
	el := time.Since(t0)
	err = errors.Join(err, e.nats.monitor("/varz", &v1), e.nats.monitor("/jsz", &j1))
	if err != nil {
		e.r.Fatal(err)
	}
	u := benchkit.Since(c0, c1, el)
	sec := el.Seconds()
	res := idle{Seconds: sec, CollectorCores: u.Collector, BenchCores: u.Bench, StealCores: u.Steal,
		NATSCores:      (n1.Collector - n0.Collector).Seconds() / sec,
		NATSMsgsPerSec: float64(v1.InMsgs+v1.OutMsgs-v0.InMsgs-v0.OutMsgs) / sec,
		JSAPIPerSec:    float64(j1.API.Total-j0.API.Total) / sec,
		Connections:    v1.Connections, Subscriptions: v1.Subscriptions, Streams: j1.Streams, Consumers: j1.Consumers,
		JSStoreMiB: float64(j1.Store) / (1 << 20), ReservedMiB: float64(j1.Reserved) / (1 << 20)}
	// benchkit counts everything but the collector and this process as other; NATS is ours.
	res.OtherCores = max(0, u.Other-res.NATSCores)
	if res.CollectorRSS, err = benchkit.ReadMem(cp); err != nil {
		e.r.Fatal(err)
	}
	if res.NATSRSS, err = benchkit.ReadMem(np); err != nil {
		e.r.Fatal(err)
	}
	res.StoreFiles, res.StoreDiskMiB = du(e.nats.storeDir)
	if prof != nil {
		prof.save(e.colProf, "/debug/pprof/heap?gc=1", fmt.Sprintf("collector-%dp-idle.heap", len(e.projects)))
		prof.save(e.nats.profileURL(), "/debug/pprof/heap?gc=1", fmt.Sprintf("nats-%dp-idle.heap", len(e.projects)))
		if res.CollectorLiveHeapMiB, err = prof.heapAfterGC(e.colProf); err != nil {
			fmt.Fprintln(os.Stderr, "bench/tenants: the collector's live heap is unknown:", err)
		}
		if res.NATSLiveHeapMiB, err = prof.heapAfterGC(e.nats.profileURL()); err != nil {
			fmt.Fprintln(os.Stderr, "bench/tenants: nats-server's live heap is unknown:", err)
		}
	}
	if heap, err := metric(e.col.Metrics, "otelcol_process_runtime_heap_alloc_bytes"); err == nil {
		res.CollectorHeapMiB = heap / (1 << 20)
	} else {
		fmt.Fprintln(os.Stderr, "bench/tenants: the collector's heap size is unknown:", err)
	}
	return res
}

// metric reads one unlabelled value from a Prometheus text exposition.
func metric(url, name string) (float64, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, fmt.Errorf("no %s in %s", name, url)
}

// du counts the regular files under dir and the disk blocks they occupy.
func du(dir string) (files int, mib float64) {
	var blocks int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		if fi, err := d.Info(); err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				files++
				blocks += st.Blocks // 512-byte units whatever the file system's block size
			}
		}
		return nil
	})
	return files, float64(blocks*512) / (1 << 20)
}

type restart struct {
	NATSReadySeconds        float64 `json:"nats_ready_seconds"`
	CollectorHealthySeconds float64 `json:"collector_healthy_seconds"`
	Ready                   ready   `json:"ready"`
}

// crash ends the collector with SIGQUIT, which makes the Go runtime print every
// goroutine's stack before exiting: the collector has no pprof endpoint, and its own
// metrics do not count goroutines. It returns how many there were.
func (e *env) crash() int {
	pid := e.col.Pid()
	before := len(e.col.Log())
	if err := syscall.Kill(pid, syscall.SIGQUIT); err != nil {
		e.r.Fatal(err)
	}
	// Wait until the process is gone (reaped) before Stop signals it again, which could
	// cut the dump short (100k goroutines before the idle-consumer change take a while).
	for deadline := time.Now().Add(5 * time.Minute); syscall.Kill(pid, 0) == nil && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	e.col.Stop(ctx)
	return countGoroutines(e.col.Log()[before:])
}

// countGoroutines counts the goroutines of a SIGQUIT stack dump: each starts with a line
// "goroutine <id> [state]:" (Go 1.23+ adds "gp=... m=..." before the state). Goroutine 0
// is the thread's signal-handling stack, not a goroutine; the runtime's own few (GC,
// scavenger, finalizers) are listed too and counted, a constant of about five.
func countGoroutines(dump string) int {
	n := 0
	for _, line := range strings.Split(dump, "\n") {
		if strings.HasPrefix(line, "goroutine ") && strings.HasSuffix(line, ":") && !strings.HasPrefix(line, "goroutine 0 ") {
			n++
		}
	}
	return n
}

// restart stops both processes (the collector as a crash, NATS gracefully), starts them
// again on the same store and data, and times each step until every project accepts and
// consumes again.
func (e *env) restart(round int, timeout time.Duration) (restart, int) {
	goroutines := e.crash()
	e.nats.stop()
	var profiled []*sync.WaitGroup
	stop := make(chan struct{})
	if prof != nil {
		profiled = append(profiled, prof.cpuUntil(e.nats.profileURL(), fmt.Sprintf("nats-%dp-restart", len(e.projects)), stop),
			prof.cpuUntil(e.colProf, fmt.Sprintf("collector-%dp-restart", len(e.projects)), stop))
	}
	t0 := time.Now()
	e.nats.start(e.r)
	res := restart{NATSReadySeconds: time.Since(t0).Seconds()}
	e.col.Start()
	res.CollectorHealthySeconds = time.Since(t0).Seconds()
	res.Ready = e.ready(round, t0, timeout)
	close(stop)
	for _, wg := range profiled {
		wg.Wait()
	}
	return res, goroutines
}
