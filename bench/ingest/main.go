// Command ingest is the load generator of the ingest path. It starts the built
// otelcol-svc with configs/embedded.yaml (NATS inside the collector process, as `make
// run` does) and measures, in one run:
//
//  1. RSS: the collector's resident memory while it takes a steady 10k records/s;
//  2. reference: the same flat records published straight to the embedded JetStream
//     with nats.go async publish, as the exporter publishes them: the physical limit;
//  3. ingest: OTLP/HTTP protobuf logs posted to /v1/logs, answered 200 once stored;
//  4. metered: the same, to a project whose account the free-tier meter counts.
//
// and reports ingest records/s as a ratio of the reference, and metered records/s as a
// ratio of ingest. With -peer it runs only the peer phase instead (peer.go): the ingest
// phase against a stock collector built with ocb, alternating. See bench/README.md.
//
//	go run ./bench/ingest [-duration 15s] [-concurrency N] [-batch 100] [-json out.json]
//	go run ./bench/ingest -peer [-duration 15s] [-rounds 3]
package main

import (
	"context"
	"flag"
	"fmt"
	"github.com/otelcol-svc/otelcol-svc/bench/internal/benchkit"
	"io"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/otelcol-svc/otelcol-svc/internal/apikey"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
	"github.com/otelcol-svc/otelcol-svc/internal/usage"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

const (
	project    = "bench"  // the collector publishes its records here
	metProject = "benchm" // the metered phase's project, of account metAccount
	metAccount = "bench-account"
	// metLimit is the metered account's monthly limit: never reached, but a limit, so the
	// phase takes the meter's limited path (leases capped at a share of what is left).
	metLimit   = 1 << 50
	refProject = "benchref" // the reference publishes here, a stream of the same config
	streamMax  = 8 << 30    // bytes: neither phase may fill its stream up

	// The exporter's defaults (exporter/jetstreamexporter/factory.go), used by the
	// reference so that both publish with the same client settings.
	publishTimeout = 5 * time.Second
	maxPending     = 16384

	// Goals from the performance issue.
	goalRatio  = 0.5
	goalRate   = 100_000.0
	goalRSSMiB = 100.0
	// Metering may cost at most 5% of the ingest rate.
	goalMetered = 0.95
)

func main() {
	duration := flag.Duration("duration", 15*time.Second, "length of the reference and of the ingest phase, each")
	conc := flag.Int("concurrency", defaultConcurrency(), "HTTP workers (ingest) and publishing goroutines (reference)")
	batch := flag.Int("batch", 100, "log records per request")
	distinct := flag.Int("distinct", 300, "distinct pre-generated requests, sent round robin")
	rssRate := flag.Float64("rss-rate", 10_000, "records/s of the paced RSS phase")
	rssDuration := flag.Duration("rss-duration", 10*time.Second, "length of the paced RSS phase")
	rounds := flag.Int("rounds", 3, "the reference and ingest phases alternate in this many rounds")
	perfDir := flag.String("perf", "", "record the collector with Linux perf during each timed phase, into this directory")
	jsonOut := flag.String("json", "", "also write the figures to this file as JSON")
	flag.StringVar(&altMode, "alt-mode", "", "also run the ingest phase, in every round, against a second collector publishing in this mode (SVC_PUBLISH_MODE: async, fast_batch, atomic_batch), and report its ratio to the first")
	peer := flag.Bool("peer", false, "run only the peer phase: otelcol-svc's ingest against a stock collector built with ocb from bench/peer/builder-config.yaml, otlp -> nop (A) and otlp -> file-backed queue -> otlphttp -> a second collector (B), -duration each, in -rounds")
	flag.Parse()
	if *conc < 1 || *batch < 1 || *distinct < 1 || *rounds < 1 || *rssRate <= 0 {
		fmt.Fprintln(os.Stderr, "bench/ingest: -concurrency, -batch, -distinct, -rounds and -rss-rate must be positive")
		os.Exit(2)
	}

	r := benchkit.NewRunner("bench/ingest")
	// Ctrl-C still kills the collector and removes the temporary directories.
	r.ExitOnInterrupt()

	if *peer {
		rep := peerBench(r, *duration, *rounds, *conc, *batch, *distinct)
		r.Exit()
		rep.print(os.Stdout)
		benchkit.WriteReport("bench/ingest", *jsonOut, rep)
		return
	}
	rep := bench(r, *perfDir, *duration, *rounds, *conc, *batch, *distinct, *rssRate, *rssDuration)
	r.Cleanups()
	rep.print(os.Stdout)
	benchkit.WriteReport("bench/ingest", *jsonOut, rep)
}

// defaultConcurrency was chosen by measurement on the 2-core machine (bench/README.md):
// from 4 requests in flight per core the ingest rate no longer grows (both cores are
// busy), only the latency does.
func defaultConcurrency() int { return 4 * runtime.GOMAXPROCS(0) }

// altMode is the -alt-mode flag: a publish mode compared with the default in the same run.
var altMode string

func bench(r *benchkit.Runner, perfDir string, d time.Duration, rounds, conc, batch, distinct int, rssRate float64, rssD time.Duration) *report {
	rep := &report{Duration: d.String(), Rounds: rounds, Concurrency: conc, Batch: batch, Distinct: distinct, GOMAXPROCS: runtime.GOMAXPROCS(0), CPUs: runtime.NumCPU()}

	fmt.Fprintf(os.Stderr, "generating %d requests of %d records...\n", distinct, batch)
	reqs, err := workload(distinct, batch)
	if err != nil {
		r.Fatal(err)
	}
	var pbBytes, recBytes, recs int
	for _, q := range reqs {
		pbBytes += len(q.body)
		for _, rec := range q.records {
			recBytes += len(rec)
			recs++
		}
	}
	rep.RequestBytes = pbBytes / len(reqs)
	rep.RecordBytes = recBytes / recs

	fmt.Fprintln(os.Stderr, "building and starting otelcol-svc (configs/embedded.yaml)...")
	bin := testenv.Binary(r) // built once per process; ours to remove at the end
	r.Cleanup(func() { _ = os.RemoveAll(filepath.Dir(bin)) })
	col := testenv.StartCollector(r, testenv.CollectorOptions{
		Config: "configs/embedded.yaml",
		Env:    map[string]string{"SVC_STREAM_MAX_BYTES": strconv.Itoa(streamMax)},
	})
	key, metKey, js := provision(r, col)
	s := newSender(col.HTTP, key, conc)
	sm := newSender(col.HTTP, metKey, conc)

	pid := col.Pid()
	fmt.Fprintf(os.Stderr, "collector pid %d, receiver %s, embedded NATS %s, metrics %s\n", pid, col.HTTP, col.EmbeddedNATSURL(), col.Metrics)
	// The compared mode runs in a collector of its own (the mode is per process), idle
	// while the other phases run.
	var altSender *sender
	var altPid int
	if altMode != "" {
		rep.AltMode = altMode
		alt := testenv.StartCollector(r, testenv.CollectorOptions{
			Config: "configs/embedded.yaml",
			Env:    map[string]string{"SVC_STREAM_MAX_BYTES": strconv.Itoa(streamMax), "SVC_PUBLISH_MODE": altMode},
		})
		altKey, _, _ := provision(r, alt)
		altSender, altPid = newSender(alt.HTTP, altKey, conc), alt.Pid()
	}

	// RSS first, on the fresh process: after the full-speed phases the Go heap and the
	// JetStream caches would still hold memory grown there, which is not what the
	// process needs at 10k records/s.
	fmt.Fprintf(os.Stderr, "RSS phase: %.0f records/s for %s...\n", rssRate, rssD)
	c0 := benchkit.ReadCPU(pid)
	rss, err := paced(s, reqs, pid, rssRate, rssD)
	if err != nil {
		r.Fatal(err)
	}
	rssCPU := cpuUseOf(benchkit.CPUSnap{}.Add(c0, benchkit.ReadCPU(pid)), rss.Elapsed)
	rep.RSS = rssReport{
		TargetRecordsPerSec: rssRate,
		SentRecordsPerSec:   float64(rss.Sent-rss.Failed) * float64(batch) / rss.Elapsed.Seconds(),
		Idle:                rss.Idle, Peak: rss.Peak, Final: rss.Final,
		Failed: rss.Failed, Skipped: rss.Skipped, Failures: rss.Failures, CPU: rssCPU,
	}

	// The reference and the ingest phase alternate in rounds, so that both see the same
	// conditions (other work on the machine, the kernel writing back earlier phases'
	// data, the streams' growing files), which keeps the ratio meaningful.
	var ref, ing, met, alt result
	var refCPU, ingCPU, metCPU, altCPU benchkit.CPUSnap
	slice := d / time.Duration(rounds)
	for i := 1; i <= rounds; i++ {
		fmt.Fprintf(os.Stderr, "round %d/%d: reference (JetStream async publish, %d goroutines, %s)...\n", i, rounds, conc, slice)
		c0, stop := benchkit.ReadCPU(pid), benchkit.PerfRecord(r, perfDir, fmt.Sprintf("reference-%d", i), pid)
		ref = ref.merge(reference(js, refProject, reqs, conc, slice))
		refCPU = refCPU.Add(c0, benchkit.ReadCPU(pid))
		stop()
		time.Sleep(time.Second)
		// Unmetered ingest runs half a slice before and half after the metered slice, so
		// that both are as far from the reference on average (a phase right after it
		// runs while nats-server still writes the reference's records out).
		unmetered := func(d time.Duration, part string) {
			fmt.Fprintf(os.Stderr, "round %d/%d: ingest %s (OTLP/HTTP protobuf, %d workers, %s)...\n", i, rounds, part, conc, d)
			c0, stop := benchkit.ReadCPU(pid), benchkit.PerfRecord(r, perfDir, fmt.Sprintf("ingest-%d-%s", i, part), pid)
			ing = ing.merge(ingest(s, reqs, conc, d))
			ingCPU = ingCPU.Add(c0, benchkit.ReadCPU(pid))
			stop()
			time.Sleep(time.Second)
		}
		unmetered(slice/2, "a")
		fmt.Fprintf(os.Stderr, "round %d/%d: metered ingest (the same, counted by the usage meter, %s)...\n", i, rounds, slice)
		c0, stop = benchkit.ReadCPU(pid), benchkit.PerfRecord(r, perfDir, fmt.Sprintf("metered-%d", i), pid)
		met = met.merge(ingest(sm, reqs, conc, slice))
		metCPU = metCPU.Add(c0, benchkit.ReadCPU(pid))
		stop()
		time.Sleep(time.Second)
		unmetered(slice/2, "b")
		if altSender != nil {
			fmt.Fprintf(os.Stderr, "round %d/%d: ingest, publish mode %s (second collector, %s)...\n", i, rounds, altMode, slice)
			c0 := benchkit.ReadCPU(altPid)
			alt = alt.merge(ingest(altSender, reqs, conc, slice))
			altCPU = altCPU.Add(c0, benchkit.ReadCPU(altPid))
			time.Sleep(time.Second)
		}
	}
	if altSender != nil {
		rep.Alt = phaseReport(alt, cpuUseOf(altCPU, alt.Elapsed))
	}
	rep.Reference = phaseReport(ref, cpuUseOf(refCPU, ref.Elapsed))
	rep.Ingest = phaseReport(ing, cpuUseOf(ingCPU, ing.Elapsed))
	rep.Metered = phaseReport(met, cpuUseOf(metCPU, met.Elapsed))
	if rep.Ingest.RecordsPerSec > 0 {
		rep.MeteredRatio = rep.Metered.RecordsPerSec / rep.Ingest.RecordsPerSec
	}

	if rep.Reference.RecordsPerSec > 0 {
		rep.Ratio = rep.Ingest.RecordsPerSec / rep.Reference.RecordsPerSec
	}
	if rep.Ingest.RecordsPerSec > 0 && altSender != nil {
		rep.AltRatio = rep.Alt.RecordsPerSec / rep.Ingest.RecordsPerSec
	}
	rep.Goals = goals{
		RatioOK:   rep.Ratio >= goalRatio,
		RateOK:    rep.Ingest.RecordsPerSec >= goalRate,
		RSSOK:     rep.RSS.Peak.RSS < goalRSSMiB,
		MeteredOK: rep.MeteredRatio >= goalMetered,
	}
	return rep
}

// provision publishes project "bench" and a key for it into the configuration mirror,
// as the control plane does, waits until the collector accepts the key, and creates the
// reference's stream. It returns the key and a JetStream client for the reference.
//
// The key of "bench" names no account, so its records are not metered (the exporter's
// path with metering off: no meter call, as for keys of a control plane older than
// metering). Project "benchm" and its key name an account, so every request of the
// metered phase goes through the meter, on the same process and configuration.
func provision(r *benchkit.Runner, col *testenv.Collector) (string, string, jetstream.JetStream) {
	ctx := context.Background()
	nc, _ := testenv.Connect(r, col.EmbeddedNATSURL())
	// The reference's client is set up like the exporter's.
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(maxPending), jetstream.WithPublishAsyncTimeout(publishTimeout))
	if err != nil {
		r.Fatal(err)
	}
	m, err := mirror.Open(ctx, js, 1)
	if err != nil {
		r.Fatal(err)
	}
	key := apikey.Generate(apikey.KindProject)
	if err := m.PutProject(ctx, mirror.Project{ID: project, Version: 1}); err != nil {
		r.Fatal(err)
	}
	if err := m.PutKey(ctx, apikey.Hash(key), mirror.KeyEntry{KeyID: "k-" + project, ProjectID: project, Scope: mirror.ScopeProject}); err != nil {
		r.Fatal(err)
	}
	metKey := apikey.Generate(apikey.KindProject)
	if err := m.PutProject(ctx, mirror.Project{ID: metProject, AccountID: metAccount, Version: 1}); err != nil {
		r.Fatal(err)
	}
	if err := m.PutKey(ctx, apikey.Hash(metKey), mirror.KeyEntry{KeyID: "k-" + metProject, ProjectID: metProject, AccountID: metAccount, Scope: mirror.ScopeProject}); err != nil {
		r.Fatal(err)
	}
	lim, err := usage.OpenLimits(ctx, js, 1)
	if err != nil {
		r.Fatal(err)
	}
	if err := lim.Set(ctx, metAccount, metLimit); err != nil {
		r.Fatal(err)
	}
	limits := streams.DefaultLimits()
	limits.MaxBytes = streamMax
	if err := streams.Ensure(ctx, js, streams.RawConfig(refProject, limits)); err != nil {
		r.Fatal(err)
	}
	// An empty OTLP request publishes nothing; it is answered 200 once the key is known.
	for _, k := range []string{key, metKey} {
		s := newSender(col.HTTP, k, 1)
		deadline := time.Now().Add(10 * time.Second)
		for {
			fail := s.post(nil)
			if fail == "" {
				break
			}
			if time.Now().After(deadline) {
				r.Fatalf("the collector never accepted the bench key: %s", fail)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return key, metKey, js
}

type report struct {
	Duration     string    `json:"duration"`
	Rounds       int       `json:"rounds"`
	Concurrency  int       `json:"concurrency"`
	Batch        int       `json:"batch"`
	Distinct     int       `json:"distinct_requests"`
	GOMAXPROCS   int       `json:"gomaxprocs"`
	CPUs         int       `json:"cpus"`
	RequestBytes int       `json:"request_bytes_avg"` // protobuf body of one request
	RecordBytes  int       `json:"record_bytes_avg"`  // one flat JSON record
	Reference    phase     `json:"reference"`
	Ingest       phase     `json:"ingest"`
	Metered      phase     `json:"metered"`
	Ratio        float64   `json:"ratio"`         // ingest / reference records/s
	MeteredRatio float64   `json:"metered_ratio"` // metered / ingest records/s
	RSS          rssReport `json:"rss"`
	Goals        goals     `json:"goals"`
	// -alt-mode: the ingest phase against a collector in that publish mode, and its
	// records/s as a ratio of the ingest phase's.
	AltMode  string  `json:"alt_mode,omitempty"`
	Alt      phase   `json:"alt,omitempty"`
	AltRatio float64 `json:"alt_ratio,omitempty"`
}

type phase struct {
	RecordsPerSec float64        `json:"records_per_sec"`
	Records       int64          `json:"records"`
	Batches       int64          `json:"batches"` // requests (ingest) or publish groups (reference)
	Seconds       float64        `json:"seconds"`
	P50Ms         float64        `json:"p50_ms"` // per batch: request latency / publish-to-last-ack
	P99Ms         float64        `json:"p99_ms"`
	Failures      map[string]int `json:"failures"` // non-200 answers (ingest), publish errors (reference)
	CPU           cpuUse         `json:"cpu"`
	// CPU time per record in the collector process (with the embedded NATS) and in the
	// load generator: less sensitive to other work on the machine than records/s.
	CollectorUsPerRecord float64 `json:"collector_cpu_us_per_record"`
	GeneratorUsPerRecord float64 `json:"generator_cpu_us_per_record"`
}

type rssReport struct {
	TargetRecordsPerSec float64        `json:"target_records_per_sec"`
	SentRecordsPerSec   float64        `json:"sent_records_per_sec"` // accepted, averaged over the phase
	Idle                mem            `json:"idle"`                 // before the phase
	Peak                mem            `json:"peak"`                 // the sample with the highest RSS
	Final               mem            `json:"final"`
	Failed              int64          `json:"failed"`
	Skipped             int64          `json:"skipped"` // ticks with too many requests in flight
	Failures            map[string]int `json:"failures"`
	CPU                 cpuUse         `json:"cpu"`
}

type goals struct {
	RatioOK   bool `json:"ratio_ge_0_5"`
	RateOK    bool `json:"ingest_ge_100k_per_sec"`
	RSSOK     bool `json:"rss_lt_100_mib_at_10k_per_sec"`
	MeteredOK bool `json:"metered_ge_0_95_of_ingest"`
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func phaseReport(r result, cpu cpuUse) phase {
	perRecord := func(cores float64) float64 {
		if r.Records == 0 {
			return 0
		}
		return cores * 1e6 / r.rate()
	}
	return phase{
		RecordsPerSec: r.rate(), Records: r.Records, Batches: r.Batches, Seconds: r.Elapsed.Seconds(),
		P50Ms: ms(percentile(r.Latencies, 0.50)), P99Ms: ms(percentile(r.Latencies, 0.99)),
		Failures: r.Failures, CPU: cpu,
		CollectorUsPerRecord: perRecord(cpu.Collector), GeneratorUsPerRecord: perRecord(cpu.Generator),
	}
}

func (rep *report) print(w io.Writer) {
	ok := func(b bool) string {
		if b {
			return "met"
		}
		return "MISSED"
	}
	fmt.Fprintf(w, "\notelcol-svc ingest benchmark (configs/embedded.yaml, %d CPUs, GOMAXPROCS %d)\n", rep.CPUs, rep.GOMAXPROCS)
	fmt.Fprintf(w, "workload: %d distinct requests x %d log records, %d B protobuf per request, %d B per flat record\n",
		rep.Distinct, rep.Batch, rep.RequestBytes, rep.RecordBytes)
	fmt.Fprintf(w, "phases: %s each (alternating in %d rounds), %d concurrent workers\n\n", rep.Duration, rep.Rounds, rep.Concurrency)
	fmt.Fprintf(w, "  %-34s %10s %9s %9s %8s   %-20s %s\n", "", "records/s", "p50", "p99", "failures",
		"CPU µs/record", "CPU cores")
	fmt.Fprintf(w, "  %-34s %10s %9s %9s %8s   %-20s %s\n", "", "", "", "", "", "collector/generator", "collector/generator/other/steal")
	line := func(name string, p phase) {
		fmt.Fprintf(w, "  %-34s %10.0f %7.2fms %7.2fms %8d   %6.1f / %-11.1f %.2f / %.2f / %.2f / %.2f\n", name, p.RecordsPerSec, p.P50Ms, p.P99Ms,
			total(p.Failures), p.CollectorUsPerRecord, p.GeneratorUsPerRecord, p.CPU.Collector, p.CPU.Generator, p.CPU.Other, p.CPU.Steal)
	}
	line("reference (JetStream async publish)", rep.Reference)
	line("ingest (OTLP/HTTP protobuf)", rep.Ingest)
	line("metered ingest (usage meter on)", rep.Metered)
	if rep.AltMode != "" {
		line("ingest, publish mode "+rep.AltMode, rep.Alt)
	}
	goal := func(name, measured, target string, met bool, note string) {
		line := fmt.Sprintf("  %-36s %12s   %-11s %-6s %s", name, measured, target, ok(met), note)
		fmt.Fprintln(w, strings.TrimRight(line, " "))
	}
	fmt.Fprintln(w)
	goal("ingest requests not answered 200", strconv.Itoa(total(rep.Ingest.Failures)), "= 0", len(rep.Ingest.Failures) == 0, "")
	goal("metered requests not answered 200", strconv.Itoa(total(rep.Metered.Failures)), "= 0", len(rep.Metered.Failures) == 0, "")
	goal("ratio ingest / reference", fmt.Sprintf("%.2f", rep.Ratio), fmt.Sprintf(">= %.1f", goalRatio), rep.Goals.RatioOK, "")
	if rep.AltMode != "" {
		fmt.Fprintf(w, "  %-36s %12.3f   (same run; collector CPU per record %.1f / %.1f µs)\n", "ratio "+rep.AltMode+" / ingest",
			rep.AltRatio, rep.Alt.CollectorUsPerRecord, rep.Ingest.CollectorUsPerRecord)
	}
	goal("ratio metered / ingest", fmt.Sprintf("%.3f", rep.MeteredRatio), fmt.Sprintf(">= %.2f", goalMetered), rep.Goals.MeteredOK, "")
	goal("ingest records/s", fmt.Sprintf("%.0f", rep.Ingest.RecordsPerSec), fmt.Sprintf(">= %.0f", goalRate), rep.Goals.RateOK, "")
	goal(fmt.Sprintf("RSS peak at %.0f records/s", rep.RSS.TargetRecordsPerSec), fmt.Sprintf("%.1f MiB", rep.RSS.Peak.RSS),
		fmt.Sprintf("< %.0f MiB", goalRSSMiB), rep.Goals.RSSOK, fmt.Sprintf("(%.0f records/s accepted)", rep.RSS.SentRecordsPerSec))
	fmt.Fprintf(w, "    RSS = anon + file, MiB: idle %.1f = %.1f + %.1f; peak %.1f = %.1f + %.1f; final %.1f = %.1f + %.1f\n",
		rep.RSS.Idle.RSS, rep.RSS.Idle.Anon, rep.RSS.Idle.File, rep.RSS.Peak.RSS, rep.RSS.Peak.Anon, rep.RSS.Peak.File,
		rep.RSS.Final.RSS, rep.RSS.Final.Anon, rep.RSS.Final.File)
	fmt.Fprintf(w, "    collector CPU at that rate: %.2f cores\n", rep.RSS.CPU.Collector)
	if d := benchkit.Disturbed(max(rep.Reference.CPU.Other, rep.Ingest.CPU.Other, rep.Metered.CPU.Other, rep.RSS.CPU.Other),
		max(rep.Reference.CPU.Steal, rep.Ingest.CPU.Steal, rep.Metered.CPU.Steal, rep.RSS.CPU.Steal)); d != "" {
		fmt.Fprintf(w, "\n  %s\n", d)
	}
	printFailures(w, "reference", rep.Reference.Failures)
	printFailures(w, "ingest", rep.Ingest.Failures)
	printFailures(w, "metered", rep.Metered.Failures)
	printFailures(w, "RSS phase", rep.RSS.Failures)
	if rep.RSS.Skipped > 0 {
		fmt.Fprintf(w, "\n  RSS phase: %d ticks skipped (too many requests in flight): the rate was not held\n", rep.RSS.Skipped)
	}
}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func printFailures(w io.Writer, phase string, m map[string]int) {
	if len(m) == 0 {
		return
	}
	fmt.Fprintf(w, "\n  %s failures:\n", phase)
	for _, k := range slices.Sorted(maps.Keys(m)) {
		fmt.Fprintf(w, "    %6d x %s\n", m[k], k)
	}
}
