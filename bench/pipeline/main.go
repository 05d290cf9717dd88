// Command pipeline benchmarks the pipeline role against the performance goals, in one
// run, with a reference measured alongside each:
//
//  1. ottl: an OTTL condition in the project's `event` context vs the stock `ottllog`
//     context on the same data (the go test benchmarks of internal/collector/ottlevent);
//  2. throughput: records/s through consume -> trigger (1% match) -> batch -> POST to a
//     local agent, with the built collector running configs/pipeline.yaml against an
//     in-process NATS holding pre-published records; reference: a plain JetStream pull
//     consumer that pulls and acks as many records from an identical stream;
//     and the same records again in incident mode (fingerprint service.name), whose
//     records/s are compared with the legacy pipeline's;
//  3. latency: ingest -> agent in window mode at 1k events/s with the Redis window store
//     (configs/embedded.yaml); reference: a direct POST of a window call to the agent.
//
// See bench/README.md.
//
//	go run ./bench/pipeline [-duration 15s] [-json out.json] [-phase all|ottl|throughput|latency] [-pprof cpu.pb.gz]
package main

import (
	"flag"
	"fmt"
	"github.com/otelcol-svc/otelcol-svc/bench/internal/benchkit"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// Goals from the performance issue.
const (
	goalOTTLRatio = 1.2
	goalRate      = 100_000.0
	goalP99Ms     = 10.0
	// Incident mode may cost at most a tenth of the legacy pipeline's throughput.
	goalIncidentRatio = 0.9
)

func main() {
	duration := flag.Duration("duration", 15*time.Second, "target length of the throughput drain and of the latency phase")
	phase := flag.String("phase", "all", "all, ottl, throughput or latency")
	nRecords := flag.Int64("records", 0, "records per stream in the throughput phase (0: -duration x 100k/s, the goal rate)")
	rate := flag.Float64("rate", 1000, "records/s of the latency phase")
	incident := flag.Bool("incident", true, "in the throughput phase, also drain the same records in incident mode and compare with legacy")
	perfDir := flag.String("perf", "", "record the collector with Linux perf during the timed pipeline phases, into this directory")
	pprofFile := flag.String("pprof", "", "save a CPU profile of the collector during the pipeline drain to this file, taken through its pprof extension\n"+
		"(the incident-mode drain's goes to the same name with .incident before the extension)")
	jsonOut := flag.String("json", "", "also write the figures to this file as JSON")
	flag.Parse()
	run := map[string]bool{}
	switch *phase {
	case "all":
		run = map[string]bool{"ottl": true, "throughput": true, "latency": true}
	case "ottl", "throughput", "latency":
		run[*phase] = true
	default:
		fmt.Fprintln(os.Stderr, "bench/pipeline: -phase must be all, ottl, throughput or latency")
		os.Exit(2)
	}
	n := *nRecords
	if n == 0 {
		n = int64(duration.Seconds() * goalRate)
	}
	n -= n % 100 // exactly 1% of the records match
	if *duration <= 0 || n < 100 || *rate <= 0 {
		fmt.Fprintln(os.Stderr, "bench/pipeline: -duration, -records and -rate must be positive")
		os.Exit(2)
	}

	r := benchkit.NewRunner("bench/pipeline")
	// Ctrl-C still kills the collector and removes the temporary directories.
	r.ExitOnInterrupt()

	rep := &report{Duration: duration.String(), CPUs: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), LoadBefore: benchkit.LoadAvg(),
		Profiled: *pprofFile != ""}
	if run["ottl"] {
		fmt.Fprintf(os.Stderr, "ottl: %s...\n", shellCommand("go", ottlArgs))
		rep.OTTL = ottl(r)
	}
	if run["throughput"] || run["latency"] {
		fmt.Fprintln(os.Stderr, "building otelcol-svc...")
		bin := testenv.Binary(r) // built once per process, for both phases; ours to remove
		r.AtExit(func() { _ = os.RemoveAll(filepath.Dir(bin)) })
	}
	if run["throughput"] {
		rep.Throughput = throughput(r, n, *perfDir, absPath(r, *pprofFile), *incident)
		// Stop the collector and NATS and remove the streams' files (GBs) before the
		// latency phase.
		r.Cleanups()
	}
	if run["latency"] {
		rep.Latency = latency(r, *duration, *rate, *perfDir)
	}
	r.Exit()
	rep.goals()
	rep.print(os.Stdout)
	benchkit.WriteReport("bench/pipeline", *jsonOut, rep)
}

type report struct {
	Duration   string            `json:"duration"`
	CPUs       int               `json:"cpus"`
	GOMAXPROCS int               `json:"gomaxprocs"`
	LoadBefore string            `json:"loadavg_before"` // /proc/loadavg when the run started
	Profiled   bool              `json:"profiled"`       // a -pprof run: the profile costs CPU, so do not average it with others
	OTTL       *ottlReport       `json:"ottl,omitempty"`
	Throughput *throughputReport `json:"throughput,omitempty"`
	Latency    *latencyReport    `json:"latency,omitempty"`
	Goals      map[string]bool   `json:"goals"`
}

func (rep *report) goals() {
	rep.Goals = map[string]bool{}
	if o := rep.OTTL; o != nil {
		rep.Goals["ottl_ratio_le_1_2"] = o.Ratio <= goalOTTLRatio
	}
	if t := rep.Throughput; t != nil {
		rep.Goals["pipeline_ge_100k_records_per_sec"] = t.Pipeline.RecordsPerSec >= goalRate
		rep.Goals["agent_got_every_match"] = t.AgentRecords == t.Matches
		if t.Incident != nil {
			rep.Goals["incident_ge_0_9_legacy"] = t.IncidentRatio >= goalIncidentRatio
		}
	}
	if l := rep.Latency; l != nil {
		rep.Goals["ingest_to_agent_p99_lt_10ms"] = l.EndToEnd.Count > 0 && l.EndToEnd.P99 < goalP99Ms
		rep.Goals["every_trigger_delivered"] = l.TriggersGot == l.TriggersSent && l.IngestFailures == 0
	}
}

func ok(b bool) string {
	if b {
		return "met"
	}
	return "MISSED"
}

func (rep *report) print(w io.Writer) {
	fmt.Fprintf(w, "\notelcol-svc pipeline benchmark (%d CPUs, GOMAXPROCS %d; load average before the run: %s)\n",
		rep.CPUs, rep.GOMAXPROCS, rep.LoadBefore)
	if rep.Profiled {
		fmt.Fprintln(w, "PROFILED (-pprof): the profile costs the collector CPU; do not average these figures with unprofiled runs")
	}
	goal := func(name, measured, target string, met bool) {
		fmt.Fprintf(w, "    %-44s %14s   %-12s %s\n", name, measured, target, ok(met))
	}
	var other, steal float64
	if o := rep.OTTL; o != nil {
		fmt.Fprintf(w, "\n(1) OTTL condition cost, event context vs stock ottllog, same condition, same record\n")
		fmt.Fprintf(w, "    %s\n", o.Command)
		fmt.Fprintf(w, "    alternating (BenchmarkConditionRatio): event %.1f ns/eval, ottllog %.1f ns/eval\n", o.EventNs, o.LogNs)
		fmt.Fprintf(w, "    separately: event %.1f ns/op (%.0f allocs), ottllog %.1f ns/op (%.0f allocs)\n",
			o.EventContextNs, o.EventContextAlloc, o.OTTLLogNs, o.OTTLLogAlloc)
		goal("ratio event / ottllog", fmt.Sprintf("%.2f", o.Ratio), fmt.Sprintf("<= %.1f", goalOTTLRatio), rep.Goals["ottl_ratio_le_1_2"])
	}
	if t := rep.Throughput; t != nil {
		fmt.Fprintf(w, "\n(2) Throughput: consume -> trigger (1%% match) -> batch of 10 -> POST to a local agent\n")
		fmt.Fprintf(w, "    %d records per stream (%d distinct, %d B average), %d trigger matches; pre-published at %.0f records/s\n",
			t.Records, t.Distinct, t.RecordBytes, t.Matches, t.PublishPerSec)
		fmt.Fprintf(w, "    %-36s %10s %8s   %-20s %s\n", "", "records/s", "seconds", "CPU µs/record", "CPU cores")
		fmt.Fprintf(w, "    %-36s %10s %8s   %-20s %s\n", "", "", "", "collector / bench", "collector / bench / other / steal")
		line := func(name string, c consumed) {
			fmt.Fprintf(w, "    %-36s %10.0f %8.2f   %6.2f / %-11.2f %.2f / %.2f / %.2f / %.2f\n", name, c.RecordsPerSec, c.Seconds,
				c.CollectorUsPerRecord, c.BenchUsPerRecord, c.CPU.Collector, c.CPU.Bench, c.CPU.Other, c.CPU.Steal)
			other, steal = max(other, c.CPU.Other), max(steal, c.CPU.Steal)
		}
		line("reference (JetStream pull + ack)", t.Reference)
		line("pipeline (configs/pipeline.yaml)", t.Pipeline)
		fmt.Fprintf(w, "    (bench = this process: the NATS server, the agent, and the reference's consumer)\n")
		fmt.Fprintf(w, "    agent: %d calls, %d records; redelivered: %d\n", t.AgentCalls, t.AgentRecords, t.Pipeline.Redelivered)
		goal("agent records = trigger matches", fmt.Sprintf("%d", t.AgentRecords), fmt.Sprintf("= %d", t.Matches), rep.Goals["agent_got_every_match"])
		fmt.Fprintf(w, "    %-44s %14.2f\n", "ratio pipeline / reference", t.Ratio)
		goal("pipeline records/s", fmt.Sprintf("%.0f", t.Pipeline.RecordsPerSec), fmt.Sprintf(">= %.0f", goalRate), rep.Goals["pipeline_ge_100k_records_per_sec"])
		if t.Incident != nil {
			line("incident mode (same process, records)", *t.Incident)
			fmt.Fprintf(w, "    incident mode: fingerprint %s, %d agent calls; redelivered: %d\n", incidentFingerprint, t.IncidentCalls, t.Incident.Redelivered)
			goal("ratio incident / legacy records/s", fmt.Sprintf("%.2f", t.IncidentRatio), fmt.Sprintf(">= %.1f", goalIncidentRatio), rep.Goals["incident_ge_0_9_legacy"])
		}
	}
	if l := rep.Latency; l != nil {
		fmt.Fprintf(w, "\n(3) Latency ingest -> agent, window mode, window store %s\n", l.Redis)
		fmt.Fprintf(w, "    %d records sent at %.0f/s (target %.0f), one per OTLP/HTTP request, %d triggers; %d ingest failures\n",
			l.Sent, l.SentPerSec, l.TargetPerSec, l.TriggersSent, l.IngestFailures)
		fmt.Fprintf(w, "    %-40s %6s %8s %8s %8s %8s\n", "", "count", "p50 ms", "p90 ms", "p99 ms", "max ms")
		row := func(name string, d benchkit.Dist) {
			fmt.Fprintf(w, "    %-40s %6d %8.2f %8.2f %8.2f %8.2f\n", name, d.Count, d.P50, d.P90, d.P99, d.Max)
		}
		row("ingest -> agent, per trigger", l.EndToEnd)
		row("OTLP/HTTP ingest request, every record", l.Ingest)
		row("reference: direct POST to the agent", l.Direct)
		fmt.Fprintf(w, "    window: %.1f records on average (max %d), call body %d B on average; duplicates %d\n",
			l.WindowMean, l.WindowMax, l.CallBytesMean, l.Duplicates)
		fmt.Fprintf(w, "    CPU cores: collector %.2f, bench %.2f, other %.2f, steal %.2f\n", l.CPU.Collector, l.CPU.Bench, l.CPU.Other, l.CPU.Steal)
		other, steal = max(other, l.CPU.Other), max(steal, l.CPU.Steal)
		goal("triggers delivered", fmt.Sprintf("%d", l.TriggersGot), fmt.Sprintf("= %d", l.TriggersSent), rep.Goals["every_trigger_delivered"])
		goal("p99 ingest -> agent", fmt.Sprintf("%.2f ms", l.EndToEnd.P99), fmt.Sprintf("< %.0f ms", goalP99Ms), rep.Goals["ingest_to_agent_p99_lt_10ms"])
	}
	if d := benchkit.Disturbed(other, steal); d != "" {
		fmt.Fprintf(w, "\n  %s\n", d)
	}
}

// absPath makes a file name given on the command line absolute, so that it does not
// depend on the directories the benchmark's tools run in.
func absPath(r *benchkit.Runner, file string) string {
	if file == "" {
		return ""
	}
	abs, err := filepath.Abs(file)
	if err != nil {
		r.Fatal(err)
	}
	return abs
}
