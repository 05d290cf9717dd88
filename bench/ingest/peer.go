package main

// The -peer phase: otelcol-svc's ingest against a stock OpenTelemetry Collector built
// with ocb from bench/peer/builder-config.yaml, on the same requests, alternating.

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/otelcol-svc/otelcol-svc/bench/internal/benchkit"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

const (
	// ocbVersion is the Makefile's OCB_VER: the stock collector is built with the same
	// builder as otelcol-svc.
	ocbVersion = "v0.162.0"
	// peerDir holds the pinned builder config and the stock collectors' configs.
	peerDir = "bench/peer"
	// peerBin is where ocb puts the binary: the builder config's output_path and
	// dist.name, relative to the directory ocb runs in.
	peerBin = "build/otelcol-peer"
	// peerDrainTimeout bounds the wait for side B's queue to empty after a round.
	peerDrainTimeout = 2 * time.Minute
	// peerTail is how long after a round's last answer its sides' CPU is still counted.
	peerTail = time.Second

	// Goals from the performance issue, against the stock collector of the same run.
	goalPeerRateA = 0.6 // otelcol-svc records/s ≥ 0.6 × A
	goalPeerCPUA  = 2.0 // otelcol-svc CPU per record ≤ 2 × A
	goalPeerRateB = 2.0 // otelcol-svc records/s ≥ 2 × B
)

// peerBinary returns the stock collector built from bench/peer/builder-config.yaml.
// It is kept in bin/peer/<hash>, the hash of the config, the builder's version and the
// Go toolchain, so it is built again only when one of them changes. ocb fetches the
// modules from the module proxy, as `make generate` does.
func peerBinary(r *benchkit.Runner) string {
	root := testenv.RepoRoot()
	cfg, err := os.ReadFile(filepath.Join(root, peerDir, "builder-config.yaml"))
	if err != nil {
		r.Fatal(err)
	}
	base := filepath.Join(root, "bin", "peer")
	dir := peerCacheDir(base, cfg)
	sweepPeerBuilds(base, dir)
	if _, err := os.Stat(filepath.Join(dir, peerBin)); err == nil {
		// Its time says it is in use, so that another run's sweep keeps it.
		now := time.Now()
		_ = os.Chtimes(dir, now, now)
		fmt.Fprintf(os.Stderr, "stock collector: %s (built before from %s/builder-config.yaml)\n", filepath.Join(dir, peerBin), peerDir)
		return filepath.Join(dir, peerBin)
	}
	if err := os.MkdirAll(base, 0o755); err != nil {
		r.Fatal(err)
	}
	ocb := ocbBinary(r, root, base)
	// Built in a directory of its own and renamed once complete, so that an interrupted
	// build is never taken for a finished one.
	tmp, err := os.MkdirTemp(base, "building-")
	if err != nil {
		r.Fatal(err)
	}
	r.AtExit(func() { _ = os.RemoveAll(tmp) })
	if err := os.WriteFile(filepath.Join(tmp, "builder-config.yaml"), cfg, 0o644); err != nil {
		r.Fatal(err)
	}
	fmt.Fprintf(os.Stderr, "building the stock collector with ocb %s from %s/builder-config.yaml (a few minutes, once)...\n", ocbVersion, peerDir)
	var log bytes.Buffer
	cmd := exec.Command(ocb, "--config", "builder-config.yaml")
	cmd.Dir, cmd.Stdout, cmd.Stderr = tmp, &log, &log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Run(); err != nil {
		r.Fatalf("ocb: %v\n%s", err, tailOf(log.String(), 8<<10))
	}
	if _, err := os.Stat(filepath.Join(tmp, peerBin)); err != nil {
		r.Fatalf("ocb built no %s (does %s/builder-config.yaml still say output_path ./build and name otelcol-peer?)", peerBin, peerDir)
	}
	if err := os.Rename(tmp, dir); err != nil {
		// Another run (another helper's, say) finished the same build first: use it.
		if _, serr := os.Stat(filepath.Join(dir, peerBin)); serr != nil {
			r.Fatal(err)
		}
	}
	return filepath.Join(dir, peerBin)
}

const (
	// peerBuildKeep is how long a build of another config is kept unused: a run started
	// with another builder config (another checkout's, another helper's) may be using it.
	peerBuildKeep = 24 * time.Hour
	// peerBuildingKeep is how long an unfinished build's directory may sit untouched
	// before it is taken for one whose run was killed (SIGKILL skips AtExit) and removed;
	// a build takes minutes.
	peerBuildingKeep = time.Hour
)

// sweepPeerBuilds removes from base the builds of other configs left unused for a day
// and the directories of builds interrupted long ago.
func sweepPeerBuilds(base, keep string) {
	entries, _ := os.ReadDir(base)
	for _, e := range entries {
		p := filepath.Join(base, e.Name())
		info, err := e.Info()
		if err != nil || !e.IsDir() || p == keep {
			continue
		}
		age := time.Since(info.ModTime())
		switch {
		case len(e.Name()) == 16 && isHex(e.Name()) && age > peerBuildKeep,
			strings.HasPrefix(e.Name(), "building-") && age > peerBuildingKeep:
			_ = os.RemoveAll(p)
		}
	}
}

// peerCacheDir is where the stock collector built from the builder config cfg is kept:
// a directory named by the hash of cfg, the builder's version and the Go toolchain.
func peerCacheDir(base string, cfg []byte) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00", ocbVersion, runtime.Version())
	h.Write(cfg)
	return filepath.Join(base, hex.EncodeToString(h.Sum(nil))[:16])
}

// ocbBinary is the Makefile's bin/ocb when it is the pinned version, else the pinned
// version installed from the module proxy into dir, as the Makefile's $(OCB) target does.
func ocbBinary(r *benchkit.Runner, root, dir string) string {
	for _, p := range []string{filepath.Join(root, "bin", "ocb"), filepath.Join(dir, "ocb-"+ocbVersion)} {
		if out, err := exec.Command(p, "version").CombinedOutput(); err == nil && strings.Contains(string(out), ocbVersion) {
			return p
		}
	}
	fmt.Fprintf(os.Stderr, "installing ocb %s...\n", ocbVersion)
	gobin, err := os.MkdirTemp(dir, "ocb-")
	if err != nil {
		r.Fatal(err)
	}
	defer os.RemoveAll(gobin)
	cmd := exec.Command("go", "install", "go.opentelemetry.io/collector/cmd/builder@"+ocbVersion)
	cmd.Env = append(os.Environ(), "GOBIN="+gobin)
	if out, err := cmd.CombinedOutput(); err != nil {
		r.Fatalf("go install ocb: %v\n%s", err, out)
	}
	p := filepath.Join(dir, "ocb-"+ocbVersion)
	if err := os.Rename(filepath.Join(gobin, "builder"), p); err != nil {
		r.Fatal(err)
	}
	return p
}

func isHex(s string) bool {
	_, err := hex.DecodeString(s)
	return err == nil
}

func tailOf(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// peerProc is a running stock collector. Started here rather than with test/testenv,
// whose process runner starts only otelcol-svc, the control plane and NATS.
type peerProc struct {
	name    string
	cmd     *exec.Cmd
	exited  chan struct{}
	mu      sync.Mutex
	log     bytes.Buffer
	URL     string // base URL of its OTLP/HTTP receiver
	Metrics string // its own metrics (Prometheus text)
}

func (p *peerProc) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.log.Len() < 1<<20 { // its log is only read when something failed
		p.log.Write(b)
	}
	return len(b), nil
}

func (p *peerProc) Log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

func (p *peerProc) Pid() int { return p.cmd.Process.Pid }

// startPeer runs the stock collector with one of bench/peer's configs on free loopback
// ports (env adds to them) and waits until its receiver answers. It is killed at the end
// of the run, also on Ctrl-C, and with the bench process should that die (Pdeathsig).
func startPeer(r *benchkit.Runner, bin, name, config string, env map[string]string) *peerProc {
	for attempt := 0; ; attempt++ {
		otlp, metrics := testenv.FreePort(r), testenv.FreePort(r)
		p := &peerProc{name: name, exited: make(chan struct{}),
			URL: fmt.Sprintf("http://127.0.0.1:%d", otlp), Metrics: fmt.Sprintf("http://127.0.0.1:%d/metrics", metrics)}
		p.cmd = exec.Command(bin, "--config", filepath.Join(testenv.RepoRoot(), peerDir, config))
		p.cmd.Env = append(os.Environ(), "PEER_OTLP_LISTEN=127.0.0.1:"+strconv.Itoa(otlp), "PEER_METRICS_PORT="+strconv.Itoa(metrics))
		for k, v := range env {
			p.cmd.Env = append(p.cmd.Env, k+"="+v)
		}
		p.cmd.Stdout, p.cmd.Stderr = p, p
		p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := p.cmd.Start(); err != nil {
			r.Fatal(err)
		}
		go func() { _ = p.cmd.Wait(); close(p.exited) }()
		r.Cleanup(func() {
			_ = p.cmd.Process.Kill()
			<-p.exited
			if r.Failed() {
				r.Logf("%s log:\n%s", name, tailOf(p.Log(), 16<<10))
			}
		})
		err := p.waitReady()
		if err == nil {
			return p
		}
		// A port picked as free may have been taken meanwhile by another process.
		if !strings.Contains(p.Log(), "address already in use") || attempt == 4 {
			r.Fatalf("%s: %v\n%s", name, err, tailOf(p.Log(), 16<<10))
		}
	}
}

// waitReady polls until an empty OTLP request is answered 200 and the metrics answer.
func (p *peerProc) waitReady() error {
	empty := newSender(p.URL, "", 1)
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-p.exited:
			return errors.New("exited during start")
		default:
		}
		if empty.post(nil) == "" {
			if resp, err := http.Get(p.Metrics); err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return nil
				}
			}
		}
		if time.Now().After(deadline) {
			return errors.New("not ready within 60s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// acceptedRE matches the receivers' accepted log records counter in the collector's own
// metrics, with or without the _total suffix its Prometheus exporter adds.
var acceptedRE = regexp.MustCompile(`^otelcol_receiver_accepted_log_records(_total)?[{ ]`)

// accepted is the number of log records the collector's receivers accepted so far.
func (p *peerProc) accepted() (float64, error) {
	resp, err := http.Get(p.Metrics)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	n, err := acceptedIn(resp.Body)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", p.name, err)
	}
	return n, nil
}

// acceptedIn sums the accepted log records counter over its series (one per receiver
// and transport) in a collector's metrics in the Prometheus text format; 0 when there is
// none yet (a receiver has no series before its first records). Read with a line scan:
// one counter's lines are all this needs, and the Prometheus text parser
// (prometheus/common/expfmt) is not among the module's direct dependencies.
func acceptedIn(r io.Reader) (float64, error) {
	var n float64
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !acceptedRE.MatchString(line) {
			continue
		}
		// The value is the last field; an optional timestamp would follow it, which the
		// collector's exporter does not write.
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			return 0, fmt.Errorf("%q: %w", line, err)
		}
		n += v
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return n, nil
}

// drained waits until the second collector of side B has accepted every record the
// first one accepted (its persistent queue is empty) and returns how long that took.
func drained(r *benchkit.Runner, front, back *peerProc) time.Duration {
	start := time.Now()
	for {
		f, err := front.accepted()
		if err != nil {
			r.Fatal(err)
		}
		b, err := back.accepted()
		if err != nil {
			r.Fatal(err)
		}
		if b >= f {
			return time.Since(start)
		}
		if time.Since(start) > peerDrainTimeout {
			r.Fatalf("side B: the second collector got %.0f of the %.0f records the first accepted within %s", b, f, peerDrainTimeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// cpuOf is a CPU reading with the collector time of every process of a side summed.
func cpuOf(pids []int) benchkit.CPUSnap {
	s := benchkit.ReadCPU(pids[0])
	for _, p := range pids[1:] {
		s.Collector += benchkit.ReadCPU(p).Collector
	}
	return s
}

// sampleRSS samples the summed resident memory of pids every 200 ms until the returned
// function is called, which returns the highest sample.
func sampleRSS(pids []int) (stop func() mem) {
	read := func() mem {
		var sum mem
		for _, p := range pids {
			m, _ := benchkit.ReadMem(p)
			sum.RSS, sum.Anon, sum.File = sum.RSS+m.RSS, sum.Anon+m.Anon, sum.File+m.File
		}
		return sum
	}
	done, out := make(chan struct{}), make(chan mem)
	go func() {
		peak := read()
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				if m := read(); m.RSS > peak.RSS {
					peak = m
				}
				out <- peak
				return
			case <-t.C:
				if m := read(); m.RSS > peak.RSS {
					peak = m
				}
			}
		}
	}()
	return func() mem { close(done); return <-out }
}

// peerSide is one of the compared setups.
type peerSide struct {
	name, setup string
	s           *sender
	pids        []int
	// settle, when set, waits after a round until what the side acknowledged has reached
	// its end, and returns how long that took (charged to the round).
	settle func() time.Duration
	res    result
	cpu    benchkit.CPUSnap
	drain  time.Duration
	tail   time.Duration // collector CPU in the idle tails after the rounds
	rss    mem
	rounds []peerRound
}

func peerBench(r *benchkit.Runner, d time.Duration, rounds, conc, batch, distinct int) *peerReport {
	rep := &peerReport{Duration: d.String(), Rounds: rounds, Concurrency: conc, Batch: batch, Distinct: distinct,
		GOMAXPROCS: runtime.GOMAXPROCS(0), CPUs: runtime.NumCPU(), OCB: ocbVersion, LoadBefore: benchkit.LoadAvg()}

	peer := peerBinary(r)
	fmt.Fprintf(os.Stderr, "generating %d requests of %d records...\n", distinct, batch)
	reqs, err := workload(distinct, batch)
	if err != nil {
		r.Fatal(err)
	}
	for _, q := range reqs {
		rep.RequestBytes += len(q.body)
	}
	rep.RequestBytes /= len(reqs)

	fmt.Fprintln(os.Stderr, "building and starting otelcol-svc (configs/embedded.yaml)...")
	bin := testenv.Binary(r)
	r.AtExit(func() { _ = os.RemoveAll(filepath.Dir(bin)) })
	col := testenv.StartCollector(r, testenv.CollectorOptions{
		Config: "configs/embedded.yaml",
		Env:    map[string]string{"SVC_STREAM_MAX_BYTES": strconv.Itoa(streamMax)},
	})
	key, _, _ := provision(r, col)

	fmt.Fprintln(os.Stderr, "starting the stock collectors...")
	a := startPeer(r, peer, "stock A (otlp -> nop)", "otlp-nop.yaml", nil)
	back := startPeer(r, peer, "stock B2 (otlp -> nop)", "otlp-nop.yaml", nil)
	front := startPeer(r, peer, "stock B1 (otlp -> file queue -> otlphttp)", "otlp-filequeue-otlphttp.yaml", map[string]string{
		"PEER_STORAGE_DIR": r.TempDir(),
		"PEER_NEXT":        strings.TrimPrefix(back.URL, "http://"),
	})

	sides := []*peerSide{
		{name: "otelcol-svc", setup: "configs/embedded.yaml: ingest receiver -> JetStream (embedded NATS, in the process)",
			s: newSender(col.HTTP, key, conc), pids: []int{col.Pid()}},
		{name: "A", setup: "stock otlp -> nop (bench/peer/otlp-nop.yaml)",
			s: newSender(a.URL, "", conc), pids: []int{a.Pid()}},
		{name: "B", setup: "stock otlp -> otlp_http, sending_queue on file_storage, block_on_overflow -> stock otlp -> nop (bench/peer/otlp-filequeue-otlphttp.yaml, otlp-nop.yaml)",
			s: newSender(front.URL, "", conc), pids: []int{front.Pid(), back.Pid()},
			settle: func() time.Duration { return drained(r, front, back) }},
	}
	fmt.Fprintf(os.Stderr, "otelcol-svc pid %d, A pid %d, B pids %d %d\n", col.Pid(), a.Pid(), front.Pid(), back.Pid())

	slice := d / time.Duration(rounds)
	for i := 0; i < rounds; i++ {
		// Each side goes first, second and last in turn, so that none is more often the
		// one right after another's work (nats-server writing out, a queue on disk).
		for j := range sides {
			side := sides[(i+j)%len(sides)]
			fmt.Fprintf(os.Stderr, "round %d/%d: %s (%d clients, %s)...\n", i+1, rounds, side.name, conc, slice)
			c0, stopRSS := cpuOf(side.pids), sampleRSS(side.pids)
			res := ingest(side.s, reqs, conc, slice)
			if side.settle != nil {
				drain := side.settle()
				res.Elapsed += drain
				side.drain += drain
			}
			if peak := stopRSS(); peak.RSS > side.rss.RSS {
				side.rss = peak
			}
			// The side's CPU is read after the same idle tail for every side, so that
			// what a process does after its last answer (nats-server flushing and
			// compacting its store, a periodic sync) is charged to it, not to nobody or
			// the next side. records/s stays on the time until the last answer.
			cEnd := cpuOf(side.pids)
			time.Sleep(peerTail)
			c1 := cpuOf(side.pids)
			side.tail += c1.Collector - cEnd.Collector
			side.res = side.res.merge(res)
			side.cpu = side.cpu.Add(c0, c1)
			use := cpuUseOf(benchkit.CPUSnap{}.Add(c0, c1), res.Elapsed)
			p := phaseReport(res, use)
			side.rounds = append(side.rounds, peerRound{RecordsPerSec: p.RecordsPerSec, CollectorUsPerRecord: p.CollectorUsPerRecord,
				Other: use.Other, Steal: use.Steal})
		}
	}

	for _, s := range sides {
		sr := peerSideReport{Name: s.name, Setup: s.setup, Processes: len(s.pids), RSSPeak: s.rss,
			DrainSeconds: s.drain.Seconds(), Rounds: s.rounds}
		sr.phase = phaseReport(s.res, cpuUseOf(s.cpu, s.res.Elapsed))
		if s.cpu.Collector > 0 {
			sr.TailCPUShare = s.tail.Seconds() / s.cpu.Collector.Seconds()
		}
		rep.Sides = append(rep.Sides, sr)
	}
	svc, ra, rb := rep.Sides[0], rep.Sides[1], rep.Sides[2]
	div := func(a, b float64) float64 {
		if b == 0 {
			return 0
		}
		return a / b
	}
	rep.RateA, rep.CPUA = div(svc.RecordsPerSec, ra.RecordsPerSec), div(svc.CollectorUsPerRecord, ra.CollectorUsPerRecord)
	rep.RateB, rep.CPUB = div(svc.RecordsPerSec, rb.RecordsPerSec), div(svc.CollectorUsPerRecord, rb.CollectorUsPerRecord)
	rep.judge()
	return rep
}

// judge sets the goals from the ratios. A side that refused requests (503, 429) is
// measured on its successes only, which says nothing about the load it was given: no
// goal is judged then.
func (rep *peerReport) judge() {
	rep.Comparable = true
	for _, s := range rep.Sides {
		if total(s.Failures) > 0 {
			rep.Comparable = false
		}
	}
	rep.Goals = peerGoals{}
	if rep.Comparable {
		rep.Goals = peerGoals{RateA: rep.RateA >= goalPeerRateA, CPUA: rep.CPUA > 0 && rep.CPUA <= goalPeerCPUA, RateB: rep.RateB >= goalPeerRateB}
	}
}

type peerReport struct {
	Duration     string           `json:"duration"`
	Rounds       int              `json:"rounds"`
	Concurrency  int              `json:"concurrency"`
	Batch        int              `json:"batch"`
	Distinct     int              `json:"distinct_requests"`
	GOMAXPROCS   int              `json:"gomaxprocs"`
	CPUs         int              `json:"cpus"`
	OCB          string           `json:"ocb"`
	LoadBefore   string           `json:"load_before"` // /proc/loadavg when the run started
	RequestBytes int              `json:"request_bytes_avg"`
	Sides        []peerSideReport `json:"sides"` // otelcol-svc, A, B
	// otelcol-svc ÷ A and ÷ B: records/s and collector CPU per record.
	RateA float64 `json:"ratio_records_per_sec_a"`
	CPUA  float64 `json:"ratio_cpu_per_record_a"`
	RateB float64 `json:"ratio_records_per_sec_b"`
	CPUB  float64 `json:"ratio_cpu_per_record_b"`
	// Comparable is false when a side had failures: the goals are then not judged (all
	// false) and print as not comparable.
	Comparable bool      `json:"comparable"`
	Goals      peerGoals `json:"goals"`
}

type peerSideReport struct {
	Name  string `json:"name"`
	Setup string `json:"setup"`
	phase
	Processes int `json:"processes"` // whose CPU and RSS count
	RSSPeak   mem `json:"rss_peak"`  // summed over them, sampled every 200 ms at full speed
	// B: time after the clients' last answer until the second collector had every
	// record, included in its seconds (so in records/s and in CPU per record).
	DrainSeconds float64 `json:"drain_seconds,omitempty"`
	// TailCPUShare is the part of its collector CPU spent in the idle tail after each
	// round's last answer (counted, as work the round caused).
	TailCPUShare float64     `json:"tail_cpu_share"`
	Rounds       []peerRound `json:"rounds"`
}

type peerRound struct {
	RecordsPerSec        float64 `json:"records_per_sec"`
	CollectorUsPerRecord float64 `json:"collector_cpu_us_per_record"`
	Other                float64 `json:"other_cores"`
	Steal                float64 `json:"steal_cores"`
}

type peerGoals struct {
	RateA bool `json:"records_per_sec_ge_0_6_a"`
	CPUA  bool `json:"cpu_per_record_le_2_a"`
	RateB bool `json:"records_per_sec_ge_2_b"`
}

func (rep *peerReport) print(w io.Writer) {
	ok := func(b bool) string {
		if !rep.Comparable {
			return "not comparable (a side had failures)"
		}
		if b {
			return "met"
		}
		return "MISSED"
	}
	fmt.Fprintf(w, "\notelcol-svc against a stock collector (ocb %s, %s/builder-config.yaml), %d CPUs, GOMAXPROCS %d, load before %s\n",
		rep.OCB, peerDir, rep.CPUs, rep.GOMAXPROCS, rep.LoadBefore)
	fmt.Fprintf(w, "workload: %d distinct OTLP/HTTP protobuf logs requests x %d records (%d B each), %d clients\n",
		rep.Distinct, rep.Batch, rep.RequestBytes, rep.Concurrency)
	fmt.Fprintf(w, "%s per side, in %d rounds alternating (the order rotates each round)\n\n", rep.Duration, rep.Rounds)
	for _, s := range rep.Sides {
		fmt.Fprintf(w, "  %-11s %s\n", s.Name, s.Setup)
	}
	fmt.Fprintf(w, "\n  %-11s %10s %9s %9s %8s %13s %12s   %s\n", "", "records/s", "p50", "p99", "failures", "CPU µs/rec", "RSS peak", "cores collector/generator/other/steal")
	for _, s := range rep.Sides {
		fmt.Fprintf(w, "  %-11s %10.0f %7.2fms %7.2fms %8d %13.2f %8.1f MiB   %.2f / %.2f / %.2f / %.2f\n", s.Name, s.RecordsPerSec, s.P50Ms, s.P99Ms,
			total(s.Failures), s.CollectorUsPerRecord, s.RSSPeak.RSS, s.CPU.Collector, s.CPU.Generator, s.CPU.Other, s.CPU.Steal)
	}
	fmt.Fprintf(w, "  CPU includes a %s idle tail after each round's last answer; its share of the collector CPU:", peerTail)
	for _, s := range rep.Sides {
		fmt.Fprintf(w, " %s %.1f%%", s.Name, 100*s.TailCPUShare)
	}
	fmt.Fprintln(w)
	if b := rep.Sides[2]; b.DrainSeconds > 0 {
		fmt.Fprintf(w, "  (B: %.2f s of its %.2f s were the second collector catching up after the clients' last answer)\n", b.DrainSeconds, b.Seconds)
	}
	fmt.Fprintf(w, "\n  per round, records/s (CPU µs/record) other/steal cores:\n")
	for _, s := range rep.Sides {
		fmt.Fprintf(w, "  %-11s", s.Name)
		for _, rd := range s.Rounds {
			fmt.Fprintf(w, "  %8.0f (%5.2f) %.2f/%.2f", rd.RecordsPerSec, rd.CollectorUsPerRecord, rd.Other, rd.Steal)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w)
	goal := func(name string, v float64, target string, met bool) {
		fmt.Fprintf(w, "  %-38s %6.2f   %-8s %s\n", name, v, target, ok(met))
	}
	goal("otelcol-svc / A records/s", rep.RateA, fmt.Sprintf(">= %.1f", goalPeerRateA), rep.Goals.RateA)
	goal("otelcol-svc / A CPU per record", rep.CPUA, fmt.Sprintf("<= %.1f", goalPeerCPUA), rep.Goals.CPUA)
	goal("otelcol-svc / B records/s", rep.RateB, fmt.Sprintf(">= %.1f", goalPeerRateB), rep.Goals.RateB)
	fmt.Fprintf(w, "  %-38s %6.2f\n", "otelcol-svc / B CPU per record", rep.CPUB)
	var other, steal float64
	for _, s := range rep.Sides {
		printFailures(w, s.Name, s.Failures)
		for _, rd := range s.Rounds {
			other, steal = max(other, rd.Other), max(steal, rd.Steal)
		}
	}
	if d := benchkit.Disturbed(other, steal); d != "" {
		fmt.Fprintf(w, "\n  %s\n", d)
	}
}
