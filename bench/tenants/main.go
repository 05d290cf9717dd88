// Command tenants benchmarks otelcol-svc with many projects on one NATS server: it
// creates N projects (each with an agent endpoint and one enabled webhook destination),
// then measures, in one run:
//
//  1. creation: projects/s written into the configuration mirror, and until every
//     project accepted an event and its agent received it;
//  2. idle: collector and nats-server CPU and RSS while nobody sends, the collector's
//     goroutines, NATS traffic, streams, consumers, files and disk of the store;
//  3. restart: both processes stopped and started again, until every project accepts
//     and consumes again;
//  4. hot: one project's ingest -> agent latency at a steady rate while the others idle.
//
// The same is measured with 1 project in an environment of its own, as the reference,
// running beside the N-project one: each phase runs on one then the other, and the hot
// project's rounds alternate between them. Each environment is nats-server and the
// collector (configs/embedded.yaml with NATS_URL set) as two processes. Last, -api-projects
// projects are created through the control plane's API, in a third environment. See
// bench/README.md.
//
//	go run ./bench/tenants [-projects 10000] [-idle 20s] [-json out.json]
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/otelcol-svc/otelcol-svc/bench/internal/benchkit"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// Goals a data plane serving many tenants must meet.
const (
	goalIdleCores   = 0.1 // "a small fraction of a core", collector and NATS together
	goalRestartSecs = 60.0
	goalHotP99Ratio = 1.2
)

// prof is set by -pprof.
var prof *profiler

type config struct {
	Projects    int     `json:"projects"`
	Idle        string  `json:"idle"`
	Settle      string  `json:"settle"`
	HotRate     float64 `json:"hot_rate"`
	HotDuration string  `json:"hot_duration"`
	HotRounds   int     `json:"hot_rounds"`
	Concurrency int     `json:"concurrency"`
}

type report struct {
	Config     config          `json:"config"`
	Commit     string          `json:"commit"`
	Command    string          `json:"command"`
	CPUs       int             `json:"cpus"`
	LoadBefore string          `json:"loadavg_before"`
	Profiled   bool            `json:"profiled"` // a -pprof run: the profile costs CPU, so do not average it with others
	Runs       []*run          `json:"runs"`     // the 1-project reference, then N projects
	API        *viaAPI         `json:"control_plane,omitempty"`
	Accounts   []accountsRun   `json:"nats_accounts,omitempty"`
	Goals      map[string]bool `json:"goals"`
}

// run is everything measured in one environment.
type run struct {
	Projects int          `json:"projects"`
	Create   createResult `json:"create"`
	Idle     idle         `json:"idle"`
	Restart  restart      `json:"restart"`
	Hot      hot          `json:"hot"`
	Webhooks int64        `json:"webhook_calls"`
}

func main() {
	n := flag.Int("projects", 10000, "projects to create")
	idleFor := flag.Duration("idle", 20*time.Second, "length of the idle measurement")
	settle := flag.Duration("settle", 45*time.Second, "wait after the projects are ready before the idle measurement: longer than SVC_CONSUMER_IDLE_TIMEOUT (30 s), after which consumers woken by the readiness events stop pulling")
	hotRate := flag.Float64("hot-rate", 200, "events/s of the hot project")
	hotFor := flag.Duration("hot-duration", 15*time.Second, "length of the hot project's measured parts in each environment")
	hotRounds := flag.Int("hot-rounds", 3, "the hot project's measurement alternates between the environments in this many rounds (each after a 1 s warm-up)")
	conc := flag.Int("concurrency", 64, "concurrent mirror writes and readiness requests")
	apiN := flag.Int("api-projects", 100, "projects to create through the control plane API (PostgreSQL) in an environment of their own; 0: skip")
	timeout := flag.Duration("ready-timeout", 15*time.Minute, "how long a readiness round may take before it is reported incomplete")
	jsonOut := flag.String("json", "", "also write the figures to this file as JSON")
	label := flag.String("commit", "", "what to report as the commit (default: git describe of the checkout)")
	accounts := flag.String("accounts", "", "also measure nats-server alone with the projects' streams and consumers spread over this many NATS accounts, restarted; several counts separated by commas, e.g. 1,16")
	natsOnly := flag.Bool("nats-only", false, "with -accounts: only that phase, without the collector")
	profDir := flag.String("pprof", "", "write profiles to this directory: both processes' heaps when idle and their CPU while they restart")
	flag.Parse()
	if *n < 1 || *idleFor <= 0 || *hotRate <= 0 || *hotFor <= 0 || *conc < 1 || *timeout <= 0 || *apiN < 0 || *hotRounds < 1 {
		fmt.Fprintln(os.Stderr, "bench/tenants: -projects, -idle, -hot-rate, -hot-duration, -hot-rounds, -concurrency and -ready-timeout must be positive")
		os.Exit(2)
	}
	var ks []int
	if *accounts != "" {
		var err error
		if ks, err = parseAccounts(*accounts); err != nil {
			fmt.Fprintln(os.Stderr, "bench/tenants:", err)
			os.Exit(2)
		}
	} else if *natsOnly {
		fmt.Fprintln(os.Stderr, "bench/tenants: -nats-only needs -accounts")
		os.Exit(2)
	}

	r := benchkit.NewRunner("bench/tenants")
	if *profDir != "" {
		if err := os.MkdirAll(*profDir, 0o755); err != nil {
			r.Fatal(err)
		}
		prof = &profiler{dir: *profDir}
	}
	// Ctrl-C still kills both processes and removes the temporary directories.
	r.ExitOnInterrupt()

	rep := &report{Config: config{Projects: *n, Idle: idleFor.String(), Settle: settle.String(), HotRate: *hotRate,
		HotDuration: hotFor.String(), HotRounds: *hotRounds, Concurrency: *conc}, Commit: *label, CPUs: runtime.NumCPU(), LoadBefore: benchkit.LoadAvg(),
		Profiled: prof != nil}
	if rep.Commit == "" {
		rep.Commit = commit()
	}
	rep.Command = strings.Join(append([]string{"go run ./bench/tenants"}, os.Args[1:]...), " ")
	natsBin := buildNATS(r)
	for _, k := range ks {
		fmt.Fprintf(os.Stderr, "[nats-server alone, %d accounts] creating %d projects' streams and consumers...\n", k, *n)
		a := serverOnly(r, natsBin, *n, k, *conc)
		fmt.Fprintf(os.Stderr, "[nats-server alone, %d accounts] created in %.1f s, RSS %.1f MiB; restarted: healthy after %.2f s (%.2f cores)\n",
			k, a.CreateSeconds, a.IdleRSSMiB, a.RestartSeconds, a.RestartCPUCores)
		rep.Accounts = append(rep.Accounts, a)
		r.Cleanups()
	}
	if *natsOnly {
		r.Exit()
		fmt.Fprintf(os.Stdout, "\notelcol-svc tenants benchmark, commit %s (%d CPUs; load average before the run: %s)\n%s\n", rep.Commit, rep.CPUs, rep.LoadBefore, rep.Command)
		printAccounts(os.Stdout, rep.Accounts)
		benchkit.WriteReport("bench/tenants", *jsonOut, rep)
		return
	}
	fmt.Fprintln(os.Stderr, "building otelcol-svc...")
	bin := testenv.Binary(r)
	r.AtExit(func() { _ = os.RemoveAll(filepath.Dir(bin)) })

	rep.Runs = measure(r, natsBin, *n, *conc, *settle, *idleFor, *hotRate, *hotFor, *hotRounds, *timeout)
	r.Cleanups() // the processes and their stores go before the control plane's environment
	if *apiN > 0 {
		fmt.Fprintf(os.Stderr, "[control plane] creating %d projects through the API...\n", *apiN)
		a := controlPlane(r, natsBin, *apiN, *conc, *timeout)
		rep.API = &a
		fmt.Fprintf(os.Stderr, "[control plane] %.1f projects/s, every project consuming after %.1f s (complete: %v)\n",
			a.PerSec, a.Ready.ConsumingSeconds, a.Ready.Complete)
		r.Cleanups()
	}
	r.Exit()
	rep.goals()
	rep.print(os.Stdout)
	printAccounts(os.Stdout, rep.Accounts)
	benchkit.WriteReport("bench/tenants", *jsonOut, rep)
}

// measure runs the 1-project reference and the N-project environment side by side, each
// phase on one then the other, and the hot project's rounds alternating between them, so
// that both see the same conditions on a machine shared with other work.
func measure(r *benchkit.Runner, natsBin string, n, conc int, settle, idleFor time.Duration, hotRate float64, hotFor time.Duration, rounds int, timeout time.Duration) []*run {
	envs := []*env{newEnv(r, natsBin, conc), newEnv(r, natsBin, conc)}
	runs := []*run{{Projects: 1}, {Projects: n}}
	say := func(i int, format string, args ...any) {
		fmt.Fprintf(os.Stderr, "[%d projects] "+format+"\n", append([]any{runs[i].Projects}, args...)...)
	}
	for i, e := range envs {
		say(i, "nats-server pid %d, otelcol-svc pid %d; creating projects...", e.nats.pid(), e.col.Pid())
		runs[i].Create = e.create(runs[i].Projects, timeout)
		c := runs[i].Create
		say(i, "written in %.1f s (%.0f/s); every project accepting after %.1f s, consuming after %.1f s (complete: %v; refusals %v)",
			c.WriteSeconds, c.WritesPerSec, c.FirstReadying.AcceptingSeconds, c.FirstReadying.ConsumingSeconds, c.FirstReadying.Complete, c.FirstReadying.Refusals)
	}
	fmt.Fprintf(os.Stderr, "settling %s...\n", settle)
	time.Sleep(settle)
	for i, e := range envs {
		runs[i].Idle = e.idle(idleFor)
		d := runs[i].Idle
		say(i, "idle %s: collector %.3f cores %.1f MiB, nats %.3f cores %.1f MiB, %.0f NATS msgs/s, %d streams, %d consumers, %d files, %.1f MiB",
			idleFor, d.CollectorCores, d.CollectorRSS.RSS, d.NATSCores, d.NATSRSS.RSS, d.NATSMsgsPerSec, d.Streams, d.Consumers, d.StoreFiles, d.StoreDiskMiB)
	}
	for i, e := range envs {
		say(i, "restarting both processes...")
		runs[i].Restart, runs[i].Idle.Goroutines = e.restart(2, timeout)
		rs := runs[i].Restart
		say(i, "%d goroutines before; nats ready %.1f s, collector healthy %.1f s, accepting %.1f s, consuming %.1f s (complete: %v; refusals %v)",
			runs[i].Idle.Goroutines, rs.NATSReadySeconds, rs.CollectorHealthySeconds, rs.Ready.AcceptingSeconds, rs.Ready.ConsumingSeconds, rs.Ready.Complete, rs.Ready.Refusals)
	}
	fmt.Fprintf(os.Stderr, "hot project: %.0f events/s for %s in each environment, in %d alternating rounds...\n", hotRate, hotFor, rounds)
	for range rounds {
		for i, e := range envs {
			e.hotRound(&runs[i].Hot, hotRate, hotFor/time.Duration(rounds))
		}
	}
	for i, e := range envs {
		runs[i].Hot.summarize()
		h := runs[i].Hot
		say(i, "hot: p50 %.2f ms, p99 %.2f ms, %d sent, %d refused, %d lost", h.EndToEnd.P50, h.EndToEnd.P99, h.Sent, h.Refused, h.Lost)
		runs[i].Webhooks = e.ag.webhooks.Load()
	}
	return runs
}

func (rep *report) goals() {
	rep.Goals = map[string]bool{}
	if len(rep.Runs) < 2 {
		return
	}
	ref, big := rep.Runs[0], rep.Runs[1]
	rep.Goals["idle_cores_small"] = big.Idle.CollectorCores+big.Idle.NATSCores < goalIdleCores
	rep.Goals["restart_ready_within_60s"] = big.Restart.Ready.Complete && big.Restart.Ready.ConsumingSeconds <= goalRestartSecs
	rep.Goals["hot_p99_within_1_2x"] = ref.Hot.EndToEnd.Count > 0 && big.Hot.EndToEnd.Count > 0 &&
		big.Hot.EndToEnd.P99 <= goalHotP99Ratio*ref.Hot.EndToEnd.P99 && big.Hot.Lost == 0
}

func met(b bool) string {
	if b {
		return "met"
	}
	return "MISSED"
}

func (rep *report) print(w io.Writer) {
	ref, big := rep.Runs[0], rep.Runs[len(rep.Runs)-1]
	fmt.Fprintf(w, "\notelcol-svc tenants benchmark, commit %s (%d CPUs; load average before the run: %s)\n", rep.Commit, rep.CPUs, rep.LoadBefore)
	if rep.Profiled {
		fmt.Fprintln(w, "PROFILED (-pprof): profiling costs both processes CPU; do not average these figures with unprofiled runs")
	}
	fmt.Fprintf(w, "%s\n", rep.Command)
	fmt.Fprintf(w, "nats-server and otelcol-svc (configs/embedded.yaml, NATS_URL set) as two processes. Each project: an agent\n")
	fmt.Fprintf(w, "endpoint and one enabled webhook destination, written straight into the configuration mirror (NATS KV)\n")
	fmt.Fprintf(w, "as the control plane does, without its SQL. The collector creates each project's streams and consumers\n")
	fmt.Fprintf(w, "when it sees the project; one event per project is then ingested and must reach the project's agent.\n")

	c := big.Create
	fmt.Fprintf(w, "\n(1) Creation of %d projects, %d at a time\n", big.Projects, rep.Config.Concurrency)
	fmt.Fprintf(w, "    %-52s %10.1f s %10.0f projects/s\n", "mirror writes (project + key)", c.WriteSeconds, c.WritesPerSec)
	fmt.Fprintf(w, "    %-52s %10.1f s   %d of %d\n", "until every project accepted its event (2xx)", c.FirstReadying.AcceptingSeconds, c.FirstReadying.Accepted, big.Projects)
	fmt.Fprintf(w, "    %-52s %10.1f s   %d of %d", "until every project's agent had it", c.FirstReadying.ConsumingSeconds, c.FirstReadying.Consumed, big.Projects)
	if c.ReadyPerSec > 0 {
		fmt.Fprintf(w, "  (%.0f projects/s, creation to ready)", c.ReadyPerSec)
	}
	fmt.Fprintln(w)
	refusals(w, c.FirstReadying.Refusals)
	fmt.Fprintf(w, "      CPU meanwhile, cores: collector %.2f, nats-server %.2f, this benchmark %.2f, other processes %.2f\n",
		c.CPU.Collector, c.CPU.NATS, c.CPU.Bench, c.CPU.Other)

	fmt.Fprintf(w, "\n(2) Idle (%s, after %s settling)    %14s %14s %14s\n", rep.Config.Idle, rep.Config.Settle, "1 project", fmt.Sprintf("%d projects", big.Projects), "per 1000 more")
	// Per 1,000 projects, as the difference to the 1-project reference: per project, most
	// figures would round to zero.
	row := func(name, format string, a, b float64) {
		per := ""
		if big.Projects > 1 {
			per = fmt.Sprintf(format, (b-a)*1000/float64(big.Projects-1))
		}
		fmt.Fprintf(w, "    %-36s %14s %14s %14s\n", name, fmt.Sprintf(format, a), fmt.Sprintf(format, b), per)
	}
	ri, bi := ref.Idle, big.Idle
	row("collector CPU, cores", "%.4f", ri.CollectorCores, bi.CollectorCores)
	row("nats-server CPU, cores", "%.4f", ri.NATSCores, bi.NATSCores)
	row("collector RSS, MiB", "%.2f", ri.CollectorRSS.RSS, bi.CollectorRSS.RSS)
	row("  of which its live Go heap, MiB", "%.2f", ri.CollectorHeapMiB, bi.CollectorHeapMiB)
	if bi.CollectorLiveHeapMiB > 0 {
		row("  its heap after a GC (-pprof), MiB", "%.2f", ri.CollectorLiveHeapMiB, bi.CollectorLiveHeapMiB)
	}
	row("nats-server RSS, MiB", "%.2f", ri.NATSRSS.RSS, bi.NATSRSS.RSS)
	if bi.NATSLiveHeapMiB > 0 {
		row("  its heap after a GC (-pprof), MiB", "%.2f", ri.NATSLiveHeapMiB, bi.NATSLiveHeapMiB)
	}
	row("collector goroutines", "%.1f", float64(ri.Goroutines), float64(bi.Goroutines))
	row("NATS messages/s (in + out)", "%.2f", ri.NATSMsgsPerSec, bi.NATSMsgsPerSec)
	row("JetStream API calls/s", "%.2f", ri.JSAPIPerSec, bi.JSAPIPerSec)
	row("NATS subscriptions", "%.1f", float64(ri.Subscriptions), float64(bi.Subscriptions))
	row("streams", "%.1f", float64(ri.Streams), float64(bi.Streams))
	row("consumers", "%.1f", float64(ri.Consumers), float64(bi.Consumers))
	row("files in the NATS store", "%.1f", float64(ri.StoreFiles), float64(bi.StoreFiles))
	row("disk used by the store (du), MiB", "%.3f", ri.StoreDiskMiB, bi.StoreDiskMiB)
	row("JetStream reserved storage, MiB", "%.1f", ri.ReservedMiB, bi.ReservedMiB)
	fmt.Fprintf(w, "    (this process, the agent: %.3f / %.3f cores; other processes %.2f / %.2f; steal %.2f / %.2f)\n",
		ri.BenchCores, bi.BenchCores, ri.OtherCores, bi.OtherCores, ri.StealCores, bi.StealCores)
	fmt.Fprintf(w, "    %-52s %14s   %-10s %s\n", "collector + nats-server CPU idle", fmt.Sprintf("%.3f cores", bi.CollectorCores+bi.NATSCores),
		fmt.Sprintf("< %.1f", goalIdleCores), met(rep.Goals["idle_cores_small"]))

	fmt.Fprintf(w, "\n(3) Restart: collector crashed (SIGQUIT, for its goroutine count), nats-server stopped (SIGTERM), both started\n")
	fmt.Fprintf(w, "    %-36s %14s %14s\n", "seconds from the start of nats-server", "1 project", fmt.Sprintf("%d projects", big.Projects))
	fmt.Fprintf(w, "    %-36s %14.2f %14.2f\n", "nats-server healthy", ref.Restart.NATSReadySeconds, big.Restart.NATSReadySeconds)
	fmt.Fprintf(w, "    %-36s %14.2f %14.2f\n", "collector healthy", ref.Restart.CollectorHealthySeconds, big.Restart.CollectorHealthySeconds)
	fmt.Fprintf(w, "    %-36s %14.2f %14.2f\n", "every project accepting", ref.Restart.Ready.AcceptingSeconds, big.Restart.Ready.AcceptingSeconds)
	fmt.Fprintf(w, "    %-36s %14.2f %14.2f   %d of %d consumed\n", "every project consuming", ref.Restart.Ready.ConsumingSeconds, big.Restart.Ready.ConsumingSeconds,
		big.Restart.Ready.Consumed, big.Projects)
	refusals(w, big.Restart.Ready.Refusals)
	fmt.Fprintf(w, "    %-36s %14s %14s   %-10s %s\n", "ready", "", fmt.Sprintf("%.1f s", big.Restart.Ready.ConsumingSeconds), fmt.Sprintf("<= %.0f s", goalRestartSecs),
		met(rep.Goals["restart_ready_within_60s"]))

	fmt.Fprintf(w, "\n(4) Hot project: ingest -> agent, %.0f events/s for %s (one POST /v1/events each), the others idle;\n", rep.Config.HotRate, rep.Config.HotDuration)
	fmt.Fprintf(w, "    in %d rounds alternating between the environments, each after a %s warm-up\n", rep.Config.HotRounds, hotWarmup)
	fmt.Fprintf(w, "    %-24s %6s %8s %8s %8s %8s %5s %5s   %s\n", "", "count", "p50 ms", "p90 ms", "p99 ms", "max ms", "lost", "dup", "cores: collector / nats")
	for _, ru := range []*run{ref, big} {
		h := ru.Hot
		fmt.Fprintf(w, "    %-24s %6d %8.2f %8.2f %8.2f %8.2f %5d %5d   %.2f / %.2f\n", fmt.Sprintf("with %d project(s)", ru.Projects),
			h.EndToEnd.Count, h.EndToEnd.P50, h.EndToEnd.P90, h.EndToEnd.P99, h.EndToEnd.Max, h.Lost, h.Duplicate, h.CollectorCores, h.NATSCores)
	}
	if ref.Hot.EndToEnd.P99 > 0 {
		fmt.Fprintf(w, "    %-52s %14.2f   %-10s %s\n", "p99 ratio", big.Hot.EndToEnd.P99/ref.Hot.EndToEnd.P99, fmt.Sprintf("<= %.1f", goalHotP99Ratio),
			met(rep.Goals["hot_p99_within_1_2x"]))
	}
	if a := rep.API; a != nil {
		fmt.Fprintf(w, "\n(5) The control plane's path: %d projects through its API (PostgreSQL), %d at a time, in an environment of their own\n", a.Projects, rep.Config.Concurrency)
		fmt.Fprintf(w, "    POST /projects, PUT .../pipeline, POST .../sinks (webhook), POST .../keys per project\n")
		fmt.Fprintf(w, "    %-52s %10.1f s %10.1f projects/s\n", "all created", a.Seconds, a.PerSec)
		fmt.Fprintf(w, "    %-52s %10.1f ms p50, %.1f ms p99\n", "the four calls of one project", a.Project.P50, a.Project.P99)
		fmt.Fprintf(w, "    %-52s %10.1f s   %d of %d\n", "until every project's agent had its event", a.Ready.ConsumingSeconds, a.Ready.Consumed, a.Projects)
		refusals(w, a.Ready.Refusals)
	}
	other, steal := 0.0, 0.0
	for _, ru := range rep.Runs {
		other, steal = max(other, ru.Idle.OtherCores, ru.Hot.OtherCores), max(steal, ru.Idle.StealCores, ru.Hot.StealCores)
	}
	if d := benchkit.Disturbed(other, steal); d != "" {
		fmt.Fprintf(w, "\n  %s\n", d)
	}
}

func refusals(w io.Writer, m map[string]int) {
	if len(m) == 0 {
		return
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s x%d", k, m[k])
	}
	fmt.Fprintf(w, "      answers retried on the way: %s\n", strings.Join(parts, ", "))
}

func commit() string {
	cmd := exec.Command("git", "describe", "--always", "--dirty")
	cmd.Dir = testenv.RepoRoot()
	out, err := cmd.Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}
