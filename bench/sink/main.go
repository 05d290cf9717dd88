// Command sink benchmarks the sink role (configs/sink.yaml) against its performance
// goals, with a reference measured in the same run:
//
//  1. latency: results stored on a project's output stream at -rate per second for
//     -duration, each delivered to one local webhook; p50/p99 from the stream's ack of
//     the result to the webhook having read it. Reference: a plain JetStream pull
//     consumer in this process that POSTs each message to the same endpoint and acks it,
//     fed at the same rate; the two alternate in -rounds rounds (never at once, so
//     neither measures the other's load).
//  2. throughput: -results results already on the stream, three webhook destinations;
//     results/s until every destination has every result. Reference: three plain pull
//     consumers that POST and ack, on an identical stream.
//
// The collector runs as a separate process, as deployed; NATS runs in this process.
//
// -pprof FILE runs the collector with the pprof extension and saves a CPU profile of the
// sink's throughput phase to FILE (gzipped protobuf, for go tool pprof).
//
//	go run ./bench/sink [-duration 15s] [-rate 1000] [-rounds 3] [-results 20000] [-json out.json] [-pprof out.pb.gz] [-collector-env GOGC=200]
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/otelcol-svc/otelcol-svc/bench/internal/benchkit"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

const goalP99Ms = 10.0

type report struct {
	CPUs       int               `json:"cpus"`
	Latency    *latencyReport    `json:"latency"`
	Throughput *throughputReport `json:"throughput"`
	Goals      map[string]bool   `json:"goals"`
}

func main() {
	duration := flag.Duration("duration", 15*time.Second, "length of the latency phase")
	rate := flag.Float64("rate", 1000, "results/s of the latency phase")
	rounds := flag.Int("rounds", 3, "the latency phase alternates the reference and the sink in this many rounds")
	results := flag.Int("results", 20000, "results on the stream in the throughput phase")
	jsonOut := flag.String("json", "", "also write the figures to this file as JSON")
	pprofOut := flag.String("pprof", "", "run the collector with the pprof extension and save a CPU profile of the sink's throughput phase to this file")
	var colEnv envFlag
	flag.Var(&colEnv, "collector-env", "NAME=VALUE added to the collector's environment only (repeatable), e.g. GOGC=200: the bench's own GC stays as it is, so the reference is not moved with it")
	flag.Parse()
	if *duration <= 0 || *rate <= 0 || *results <= 0 || *rounds <= 0 {
		fmt.Fprintln(os.Stderr, "bench/sink: -duration, -rate, -rounds and -results must be positive")
		os.Exit(2)
	}
	r := benchkit.NewRunner("bench/sink")
	defer r.Exit()

	fmt.Fprintln(os.Stderr, "building otelcol-svc...")
	bin := testenv.Binary(r)
	r.AtExit(func() { _ = os.RemoveAll(parentDir(bin)) })
	s := start(r, *pprofOut, colEnv)

	rep := &report{CPUs: runtime.NumCPU()}
	fmt.Fprintf(os.Stderr, "latency: %.0f results/s for %s, in %d rounds...\n", *rate, *duration, *rounds)
	rep.Latency = s.latency(*duration, *rate, *rounds)
	fmt.Fprintf(os.Stderr, "throughput: %d results to 3 destinations...\n", *results)
	rep.Throughput = s.throughput(*results)
	rep.Goals = map[string]bool{
		"webhook_p99_lt_10ms":     rep.Latency.Sink.Count > 0 && rep.Latency.Sink.P99 < goalP99Ms,
		"every_result_delivered":  rep.Latency.Missing == 0 && rep.Throughput.Complete,
		"no_duplicate_deliveries": rep.Latency.Duplicates == 0 && rep.Throughput.Duplicates == 0,
	}
	rep.print(os.Stdout)
	benchkit.WriteReport("bench/sink", *jsonOut, rep)
}

// envFlag collects -collector-env NAME=VALUE settings.
type envFlag map[string]string

func (e *envFlag) String() string { return fmt.Sprint(map[string]string(*e)) }

func (e *envFlag) Set(v string) error {
	name, value, ok := strings.Cut(v, "=")
	if !ok || name == "" {
		return fmt.Errorf("want NAME=VALUE, got %q", v)
	}
	if *e == nil {
		*e = envFlag{}
	}
	(*e)[name] = value
	return nil
}

func parentDir(p string) string {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] == '/' {
			return p[:i]
		}
	}
	return "."
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func ok(b bool) string {
	if b {
		return "met"
	}
	return "MISSED"
}

func (rep *report) print(w io.Writer) {
	fmt.Fprintf(w, "\notelcol-svc sink benchmark (%d CPUs)\n", rep.CPUs)
	l := rep.Latency
	fmt.Fprintf(w, "\n(1) Latency: output stream -> webhook, %.0f results/s (achieved %.0f), %d measured, alternating in %d rounds\n",
		l.TargetPerSec, l.SentPerSec, l.Sent, l.Rounds)
	fmt.Fprintf(w, "    %-44s %6s %8s %8s %8s %8s   %s\n", "", "count", "p50 ms", "p90 ms", "p99 ms", "max ms", "CPU cores: collector/bench/other/steal")
	row := func(name string, d benchkit.Dist, c benchkit.CPUUse) {
		fmt.Fprintf(w, "    %-44s %6d %8.2f %8.2f %8.2f %8.2f   %.2f / %.2f / %.2f / %.2f\n", name, d.Count, d.P50, d.P90, d.P99, d.Max,
			c.Collector, c.Bench, c.Other, c.Steal)
	}
	row("sink (configs/sink.yaml)", l.Sink, l.CPU)
	row("reference: pull + POST + ack in-process", l.Reference, l.RefCPU)
	fmt.Fprintf(w, "    missing %d, duplicates %d\n", l.Missing, l.Duplicates)
	fmt.Fprintf(w, "    %-44s %14s   %-12s %s\n", "p99 output -> webhook", fmt.Sprintf("%.2f ms", l.Sink.P99), fmt.Sprintf("< %.0f ms", goalP99Ms), ok(rep.Goals["webhook_p99_lt_10ms"]))
	fmt.Fprintf(w, "    %-44s %14.2f\n", "ratio p99 sink / reference", l.P99Ratio)

	t := rep.Throughput
	fmt.Fprintf(w, "\n(2) Throughput: %d results, 3 webhook destinations each\n", t.Results)
	fmt.Fprintf(w, "    %-44s %12s %14s %8s\n", "", "results/s", "deliveries/s", "seconds")
	fmt.Fprintf(w, "    %-44s %12.0f %14.0f %8.2f\n", "sink (configs/sink.yaml)", t.Sink.ResultsPerSec, 3*t.Sink.ResultsPerSec, t.Sink.Seconds)
	fmt.Fprintf(w, "    %-44s %12.0f %14.0f %8.2f\n", "reference: 3 x pull + POST + ack in-process", t.Reference.ResultsPerSec, 3*t.Reference.ResultsPerSec, t.Reference.Seconds)
	fmt.Fprintf(w, "    %-44s %14.2f\n", "ratio sink / reference", t.Ratio)
	fmt.Fprintf(w, "    %-44s %14.1f\n", "collector CPU µs per delivery", t.CPUMicrosPerDelivery)
	fmt.Fprintf(w, "    duplicates %d; CPU cores: collector %.2f, bench %.2f, other %.2f, steal %.2f\n", t.Duplicates, t.CPU.Collector, t.CPU.Bench, t.CPU.Other, t.CPU.Steal)
	fmt.Fprintf(w, "    %-44s %14s\n", "every result at every destination", ok(rep.Goals["every_result_delivered"]))
	if t.Profile != "" {
		fmt.Fprintf(w, "    CPU profile of the sink's first %d s: %s\n", t.ProfileSeconds, t.Profile)
	}
	if d := benchkit.Disturbed(max(l.CPU.Other, l.RefCPU.Other, t.CPU.Other), max(l.CPU.Steal, l.RefCPU.Steal, t.CPU.Steal)); d != "" {
		fmt.Fprintf(w, "\n  %s\n", d)
	}
}

var bg = context.Background()
