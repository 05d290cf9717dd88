package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/otelcol-svc/otelcol-svc/bench/internal/benchkit"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
	"github.com/otelcol-svc/otelcol-svc/internal/webhooksig"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

const warmup = 2 * time.Second

type setup struct {
	r   *benchkit.Runner
	nc  *nats.Conn
	js  jetstream.JetStream
	m   *mirror.Store
	col *testenv.Collector
	ep  *endpoint
	// pprof is the collector's pprof endpoint (host:port) and pprofOut where the
	// throughput phase's profile goes; both empty without -pprof.
	pprof, pprofOut string
}

const sinkConfig = "configs/sink.yaml"

func start(r *benchkit.Runner, pprofOut string, colEnv map[string]string) *setup {
	n := testenv.StartNATS(r)
	nc, js := testenv.Connect(r, n.URL())
	m, err := mirror.Open(bg, js, 1)
	if err != nil {
		r.Fatal(err)
	}
	s := &setup{r: r, nc: nc, js: js, m: m, pprofOut: pprofOut}
	cfg := sinkConfig
	if pprofOut != "" {
		s.pprof = "127.0.0.1:" + strconv.Itoa(testenv.FreePort(r))
		cfg = withPprof(r, s.pprof)
	}
	env := map[string]string{"NATS_URL": n.URL(), "SVC_OUTBOUND_ALLOW": "127.0.0.0/8", "SVC_STREAM_REPLICAS": "1"}
	for k, v := range colEnv {
		env[k] = v
	}
	s.col = testenv.StartCollector(r, testenv.CollectorOptions{Config: cfg, Env: env})
	s.ep = startEndpoint(r)
	return s
}

// withPprof writes configs/sink.yaml with contrib's pprof extension listening on addr
// into a temporary file and returns its path relative to the repository root (where
// testenv looks for configs). The edit is textual, since the config is the shipped one
// and only its two extension lines change; a config that no longer has them stops the
// benchmark rather than profiling without the extension.
func withPprof(r *benchkit.Runner, addr string) string {
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), sinkConfig))
	if err != nil {
		r.Fatal(err)
	}
	const ext, list = "\nextensions:\n", "\n  extensions: [configmirror, health_check]\n"
	c := string(b)
	if strings.Count(c, ext) != 1 || strings.Count(c, list) != 1 {
		r.Fatalf("bench/sink -pprof: %s no longer has %q and %q to add the pprof extension to", sinkConfig, ext, list)
	}
	c = strings.Replace(c, ext, ext+"  pprof:\n    endpoint: "+addr+"\n", 1)
	c = strings.Replace(c, list, "\n  extensions: [pprof, configmirror, health_check]\n", 1)
	path := filepath.Join(r.TempDir(), "sink-pprof.yaml")
	if err := os.WriteFile(path, []byte(c), 0o600); err != nil {
		r.Fatal(err)
	}
	rel, err := filepath.Rel(testenv.RepoRoot(), path)
	if err != nil {
		r.Fatal(err)
	}
	return rel
}

// profile takes a CPU profile of the collector for d, written to s.pprofOut; the
// returned function waits for it.
func (s *setup) profile(d time.Duration) (wait func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		secs := strconv.Itoa(max(1, int(d.Round(time.Second).Seconds())))
		resp, err := http.Get("http://" + s.pprof + "/debug/pprof/profile?seconds=" + secs)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench/sink: profile:", err)
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			fmt.Fprintln(os.Stderr, "bench/sink: profile:", resp.Status)
			return
		}
		f, err := os.Create(s.pprofOut)
		if err == nil {
			_, err = io.Copy(f, resp.Body)
			err = errors.Join(err, f.Close())
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench/sink: profile:", err)
		}
	}()
	return func() { <-done }
}

// endpoint plays the webhook destinations: it notes when each result (by its index in
// the payload) arrived at each path, and answers 200 at once.
type endpoint struct {
	*httptest.Server
	mu   sync.Mutex
	got  map[string]map[int]time.Time // path -> result index -> arrival
	dups map[string]int
	cond *sync.Cond
}

func startEndpoint(r *benchkit.Runner) *endpoint {
	e := &endpoint{got: map[string]map[int]time.Time{}, dups: map[string]int{}}
	e.cond = sync.NewCond(&e.mu)
	e.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		at := time.Now()
		var p struct{ I int }
		if err != nil || json.Unmarshal(body, &p) != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		e.mu.Lock()
		m := e.got[req.URL.Path]
		if m == nil {
			m = map[int]time.Time{}
			e.got[req.URL.Path] = m
		}
		if _, seen := m[p.I]; seen {
			e.dups[req.URL.Path]++
		} else {
			m[p.I] = at
		}
		e.cond.Broadcast()
		e.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	r.Cleanup(e.Close)
	return e
}

// waitAll waits until every path has n results, or the deadline passes.
func (e *endpoint) waitAll(paths []string, n int, deadline time.Time) (time.Time, bool) {
	done := func() bool {
		for _, p := range paths {
			if len(e.got[p]) < n {
				return false
			}
		}
		return true
	}
	go func() { time.Sleep(time.Until(deadline)); e.mu.Lock(); e.cond.Broadcast(); e.mu.Unlock() }()
	e.mu.Lock()
	defer e.mu.Unlock()
	for !done() && time.Now().Before(deadline) {
		e.cond.Wait()
	}
	last := time.Time{}
	for _, p := range paths {
		for _, t := range e.got[p] {
			if t.After(last) {
				last = t
			}
		}
	}
	return last, done()
}

// project publishes a project whose results go to a webhook at each path.
func (s *setup) project(id string, paths ...string) {
	p := mirror.Project{ID: id, Version: 1, SigningSecret: webhooksig.NewSecret()}
	for i, path := range paths {
		p.Sinks = append(p.Sinks, mirror.Sink{ID: "s_" + strconv.Itoa(i), Kind: "webhook", Enabled: true,
			URL: s.ep.URL + path, Method: http.MethodPost, Since: time.Now().Add(-time.Hour)})
	}
	if err := s.m.PutProject(bg, p); err != nil {
		s.r.Fatal(err)
	}
}

func (s *setup) ensureOutput(project string) {
	if err := streams.Ensure(bg, s.js, streams.OutputConfig(project, streams.DefaultLimits())); err != nil {
		s.r.Fatal(err)
	}
}

// wake does what the receiver does after storing results: idle sink consumers are not
// pulled from until woken.
func (s *setup) wake(project string) {
	if err := s.nc.Publish(streams.WakeSubject(streams.WakeOutput, project), nil); err != nil {
		s.r.Fatal(err)
	}
}

// result is the message the receiver stores for an agent result.
func result(project string, i int) *nats.Msg {
	id := "req_" + strconv.Itoa(i)
	return &nats.Msg{
		Subject: streams.OutputSubject(project),
		Data:    []byte(`{"i":` + strconv.Itoa(i) + `,"text":"result ` + strconv.Itoa(i) + ` of the benchmark","severity":"error"}`),
		Header:  nats.Header{streams.HeaderRequestID: []string{id}, streams.HeaderMsgID: []string{"out:" + id}},
	}
}

// reference consumes a project's output stream the plainest way: a durable pull
// consumer, one POST per message to url, then an ack.
func (s *setup) reference(project, durable, url string, stop <-chan struct{}) {
	cons, err := s.js.CreateOrUpdateConsumer(bg, streams.OutputStream(project), jetstream.ConsumerConfig{
		Durable: durable, AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: 400,
	})
	if err != nil {
		s.r.Fatal(err)
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(200))
	if err != nil {
		s.r.Fatal(err)
	}
	go func() { <-stop; it.Stop() }()
	client := &http.Client{Timeout: 10 * time.Second}
	for {
		m, err := it.Next()
		if err != nil {
			return
		}
		req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(m.Data()))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Request-Id", m.Headers().Get(streams.HeaderRequestID))
		if resp, err := client.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			_ = m.Ack()
		} else {
			_ = m.Nak()
		}
	}
}

type latencyReport struct {
	TargetPerSec float64 `json:"target_results_per_sec"`
	SentPerSec   float64 `json:"sent_results_per_sec"`
	Sent         int     `json:"results_measured"`
	Rounds       int     `json:"rounds"`
	// From JetStream's ack of the stored result to the webhook having read it.
	Sink       benchkit.Dist   `json:"sink"`
	Reference  benchkit.Dist   `json:"reference"`
	P99Ratio   float64         `json:"p99_ratio_sink_reference"`
	Missing    int             `json:"missing"`
	Duplicates int             `json:"duplicates"`
	CPU        benchkit.CPUUse `json:"cpu"`           // during the sink's rounds
	RefCPU     benchkit.CPUUse `json:"reference_cpu"` // during the reference's rounds
}

// latency measures the reference and the sink in alternating rounds, at rate for d each
// in all. Never at once, or each would measure the other's load; alternating, because on
// a shared host the hypervisor's steal comes and goes within seconds, and a reference
// measured in one stretch and the sink in the next would see different machines.
func (s *setup) latency(d time.Duration, rate float64, rounds int) *latencyReport {
	rep := &latencyReport{TargetPerSec: rate, Rounds: rounds}
	refProj, sinkProj := "benchref-"+randomHex(4), "benchsink-"+randomHex(4)
	s.ensureOutput(refProj)
	s.ensureOutput(sinkProj)
	s.project(sinkProj, "/lat")
	time.Sleep(500 * time.Millisecond) // the sink's consumer is created on the mirror change

	var ref, sink pacedRun
	for i := 0; i < rounds; i++ {
		stop := make(chan struct{})
		go s.reference(refProj, "ref", s.ep.URL+"/lat-ref", stop)
		ref.add(s.paced(refProj, "/lat-ref", ref.next, d/time.Duration(rounds), rate))
		close(stop)
		sink.add(s.paced(sinkProj, "/lat", sink.next, d/time.Duration(rounds), rate))
	}

	rep.Sent, rep.Missing, rep.Duplicates = sink.sent, sink.missing, sink.dups
	rep.SentPerSec = float64(sink.sent) / sink.sending.Seconds()
	rep.CPU = benchkit.Since(benchkit.CPUSnap{}, sink.cpu, sink.elapsed)
	rep.RefCPU = benchkit.Since(benchkit.CPUSnap{}, ref.cpu, ref.elapsed)
	rep.Sink, rep.Reference = benchkit.DistOf(sink.lat), benchkit.DistOf(ref.lat)
	if rep.Reference.P99 > 0 {
		rep.P99Ratio = rep.Sink.P99 / rep.Reference.P99
	}
	return rep
}

// pacedRun is what paced measured, summed over rounds.
type pacedRun struct {
	lat                 []time.Duration
	sent, missing, dups int
	next                int              // the index the next round's results start at
	sending             time.Duration    // storing the measured results
	elapsed             time.Duration    // from the first measured result until all arrived
	cpu                 benchkit.CPUSnap // CPU spent meanwhile
}

func (r *pacedRun) add(o pacedRun) {
	r.lat = append(r.lat, o.lat...)
	r.sent, r.missing, r.dups, r.next = r.sent+o.sent, r.missing+o.missing, o.dups, o.next
	r.sending, r.elapsed = r.sending+o.sending, r.elapsed+o.elapsed
	r.cpu = r.cpu.Add(benchkit.CPUSnap{}, o.cpu)
}

// paced stores results from index from on project's output stream at rate, for a warmup
// and then d, and measures, for those after the warmup, the time from JetStream's ack to
// their arrival at path.
func (s *setup) paced(project, path string, from int, d time.Duration, rate float64) pacedRun {
	warm := warmup
	if from > 0 {
		warm = warmup / 4 // the consumer is there already
	}
	interval := time.Duration(float64(time.Second) / rate)
	total := int((d + warm).Seconds() * rate)
	stored := make([]time.Time, total)
	var measuredStart time.Time
	var c0 benchkit.CPUSnap
	begin := time.Now()
	for i := 0; i < total; i++ {
		if next := begin.Add(time.Duration(i) * interval); time.Until(next) > 0 {
			time.Sleep(time.Until(next))
		}
		if time.Since(begin) >= warm && measuredStart.IsZero() {
			measuredStart, c0 = time.Now(), benchkit.ReadCPU(s.col.Pid())
		}
		// Synchronous publishes: the clock starts when the result is stored, as when the
		// receiver answers the agent's POST.
		if _, err := s.js.PublishMsg(bg, result(project, from+i)); err != nil {
			s.r.Fatal(err)
		}
		stored[i] = time.Now()
		s.wake(project)
	}
	sentEnd := time.Now()
	s.ep.waitAll([]string{path}, from+total, time.Now().Add(30*time.Second))
	run := pacedRun{next: from + total, sending: sentEnd.Sub(measuredStart), elapsed: time.Since(measuredStart)}
	run.cpu = benchkit.CPUSnap{}.Add(c0, benchkit.ReadCPU(s.col.Pid()))
	s.ep.mu.Lock()
	defer s.ep.mu.Unlock()
	for i := 0; i < total; i++ {
		if stored[i].Before(measuredStart) {
			continue
		}
		run.sent++
		if at, ok := s.ep.got[path][from+i]; ok {
			run.lat = append(run.lat, at.Sub(stored[i]))
		} else {
			run.missing++
		}
	}
	run.dups = s.ep.dups[path]
	return run
}

type drained struct {
	ResultsPerSec float64 `json:"results_per_sec"`
	Seconds       float64 `json:"seconds"`
}

type throughputReport struct {
	Results    int             `json:"results"`
	Sink       drained         `json:"sink"`
	Reference  drained         `json:"reference"`
	Ratio      float64         `json:"ratio_sink_reference"`
	Complete   bool            `json:"complete"`
	Duplicates int             `json:"duplicates"`
	CPU        benchkit.CPUUse `json:"cpu"`
	// The collector's CPU time for the phase over the deliveries made (3 per result):
	// less sensitive than the rate to other work on the machine, so the figure to
	// compare commits by.
	CPUMicrosPerDelivery float64 `json:"collector_cpu_us_per_delivery"`
	// Profile (with -pprof) is the file holding a CPU profile of the sink's first
	// ProfileSeconds, as long as the reference took: the sink's steady drain.
	Profile        string `json:"profile,omitempty"`
	ProfileSeconds int    `json:"profile_seconds,omitempty"`
}

func (s *setup) throughput(n int) *throughputReport {
	rep := &throughputReport{Results: n}
	publish := func(project string) {
		s.ensureOutput(project)
		futures := make([]jetstream.PubAckFuture, 0, n)
		for i := 0; i < n; i++ {
			f, err := s.js.PublishMsgAsync(result(project, i))
			if errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
				// A loaded machine: the server acks slower than this loop publishes. Wait
				// for the acks, and go on.
				<-s.js.PublishAsyncComplete()
				i--
				continue
			}
			if err != nil {
				s.r.Fatal(err)
			}
			futures = append(futures, f)
		}
		for _, f := range futures {
			select {
			case <-f.Ok():
			case err := <-f.Err():
				s.r.Fatal(err)
			}
		}
		s.wake(project)
	}
	timeout := time.Duration(n/50+60) * time.Second

	// Reference first, so the sink's consumers are not competing with it.
	refProj := "benchref3-" + randomHex(4)
	publish(refProj)
	refPaths := []string{"/ref-0", "/ref-1", "/ref-2"}
	stop := make(chan struct{})
	t0 := time.Now()
	for i, p := range refPaths {
		go s.reference(refProj, "ref"+strconv.Itoa(i), s.ep.URL+p, stop)
	}
	last, _ := s.ep.waitAll(refPaths, n, time.Now().Add(timeout))
	close(stop)
	rep.Reference = drained{Seconds: last.Sub(t0).Seconds(), ResultsPerSec: float64(n) / last.Sub(t0).Seconds()}

	sinkProj := "benchsink3-" + randomHex(4)
	publish(sinkProj)
	paths := []string{"/thr-0", "/thr-1", "/thr-2"}
	waitProfile := func() {}
	if s.pprof != "" {
		d := max(time.Second, last.Sub(t0).Round(time.Second))
		rep.Profile, rep.ProfileSeconds = s.pprofOut, int(d.Seconds())
		waitProfile = s.profile(d)
	}
	c0 := benchkit.ReadCPU(s.col.Pid())
	t0 = time.Now()
	s.project(sinkProj, paths...) // the destinations appear: the sink starts consuming
	last, rep.Complete = s.ep.waitAll(paths, n, time.Now().Add(timeout))
	c1 := benchkit.ReadCPU(s.col.Pid())
	rep.CPU = benchkit.Since(c0, c1, time.Since(t0))
	rep.CPUMicrosPerDelivery = float64((c1.Collector - c0.Collector).Microseconds()) / float64(3*n)
	waitProfile()
	rep.Sink = drained{Seconds: last.Sub(t0).Seconds(), ResultsPerSec: float64(n) / last.Sub(t0).Seconds()}
	if rep.Reference.ResultsPerSec > 0 {
		rep.Ratio = rep.Sink.ResultsPerSec / rep.Reference.ResultsPerSec
	}
	s.ep.mu.Lock()
	for _, p := range paths {
		rep.Duplicates += s.ep.dups[p]
	}
	s.ep.mu.Unlock()
	if !rep.Complete {
		fmt.Printf("throughput: not every destination got every result within %s\n", timeout)
	}
	return rep
}
