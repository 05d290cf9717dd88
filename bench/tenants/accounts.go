package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/otelcol-svc/otelcol-svc/bench/internal/benchkit"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
)

// The server-only phase (-accounts): nats-server alone, holding N projects' streams and
// consumers as the collector creates them (raw and output stream, a pipeline and a
// destination consumer), spread over K NATS accounts, and restarted. nats-server checks
// a stream's subjects against every other stream of its account when it creates or
// recovers it (jsAccount.subjectsOverlap, no index), so recovering n streams in one
// account costs O(n²): this phase measures what spreading projects over accounts would
// give before any component is taught to, and what a stream and a consumer cost.
type accountsRun struct {
	Accounts        int     `json:"accounts"`
	Projects        int     `json:"projects"`
	CreateSeconds   float64 `json:"create_seconds"`
	IdleRSSMiB      float64 `json:"idle_rss_mib"`
	RestartSeconds  float64 `json:"restart_healthy_seconds"`
	RestartCPUCores float64 `json:"restart_cpu_cores"`
	RestartedRSSMiB float64 `json:"restarted_rss_mib"`
}

// parseAccounts reads -accounts: account counts separated by commas, e.g. "1,16".
func parseAccounts(s string) ([]int, error) {
	var ks []int
	for _, f := range strings.Split(s, ",") {
		k, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || k < 1 || k > 1000 {
			return nil, fmt.Errorf("-accounts: %q is not a number of accounts from 1 to 1000", f)
		}
		ks = append(ks, k)
	}
	return ks, nil
}

// accountsConfig is a nats-server configuration with k accounts, each with JetStream and
// one user (u<i>, password p): loopback only, for this benchmark.
func accountsConfig(k int) string {
	var b strings.Builder
	b.WriteString("accounts {\n")
	for i := range k {
		fmt.Fprintf(&b, "  T%d { jetstream: enabled, users: [{user: u%d, password: p}] }\n", i, i)
	}
	b.WriteString("}\n")
	return b.String()
}

// accountOf spreads projects over k accounts by their index; the ids are p00000...
func accountOf(i, k int) int { return i % k }

func serverOnly(r *benchkit.Runner, natsBin string, n, k, conc int) accountsRun {
	res := accountsRun{Accounts: k, Projects: n}
	conf := filepath.Join(r.TempDir(), "accounts.conf")
	if err := os.WriteFile(conf, []byte(accountsConfig(k)), 0o644); err != nil {
		r.Fatal(err)
	}
	ns := &natsServer{bin: natsBin, conf: conf}
	ns.init(r)
	ns.start(r)
	jss := make([]jetstream.JetStream, k)
	for i := range jss {
		nc, err := nats.Connect(ns.url(), nats.UserInfo("u"+strconv.Itoa(i), "p"), nats.Timeout(time.Minute))
		if err != nil {
			r.Fatal(err)
		}
		r.Cleanup(nc.Close)
		if jss[i], err = jetstream.New(nc, jetstream.WithDefaultTimeout(5*time.Minute)); err != nil {
			r.Fatal(err)
		}
	}
	var next, failed atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	t0 := time.Now()
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				if err := createProject(ctx, jss[accountOf(i, k)], fmt.Sprintf("p%05d", i)); err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err)
				}
			}
		}()
	}
	wg.Wait()
	res.CreateSeconds = time.Since(t0).Seconds()
	if f := failed.Load(); f > 0 {
		r.Fatalf("%d accounts: %d of %d projects not created, e.g. %v", k, f, n, firstErr.Load())
	}
	mem, err := benchkit.ReadMem(ns.pid())
	if err != nil {
		r.Fatal(err)
	}
	res.IdleRSSMiB = mem.RSS
	for _, js := range jss {
		js.Conn().Close()
	}
	ns.stop()
	stop := make(chan struct{})
	var profiled *sync.WaitGroup
	if prof != nil {
		profiled = prof.cpuUntil(ns.profileURL(), fmt.Sprintf("nats-only-%dp-%dacc-restart", n, k), stop)
	}
	t1 := time.Now()
	ns.start(r)
	res.RestartSeconds = time.Since(t1).Seconds()
	// CPU of the new process: all of it was spent starting.
	res.RestartCPUCores = benchkit.ReadCPU(ns.pid()).Collector.Seconds() / res.RestartSeconds
	close(stop)
	if profiled != nil {
		profiled.Wait()
	}
	if mem, err = benchkit.ReadMem(ns.pid()); err == nil {
		res.RestartedRSSMiB = mem.RSS
	}
	ns.kill()
	return res
}

// createProject creates what the collector creates for a project with an agent and one
// destination: both streams, and a durable consumer on each with the receiver's settings.
func createProject(ctx context.Context, js jetstream.JetStream, id string) error {
	for _, cfg := range []jetstream.StreamConfig{streams.RawConfig(id, streams.DefaultLimits()), streams.OutputConfig(id, streams.DefaultLimits())} {
		s, err := js.CreateStream(ctx, cfg)
		if err != nil {
			return fmt.Errorf("stream %s: %w", cfg.Name, err)
		}
		if _, err := s.CreateConsumer(ctx, jetstream.ConsumerConfig{Durable: "c", AckPolicy: jetstream.AckExplicitPolicy,
			AckWait: 30 * time.Second, MaxDeliver: -1, MaxAckPending: 40, DeliverPolicy: jetstream.DeliverNewPolicy}); err != nil {
			return fmt.Errorf("consumer on %s: %w", cfg.Name, err)
		}
	}
	return nil
}

func printAccounts(w io.Writer, runs []accountsRun) {
	if len(runs) == 0 {
		return
	}
	fmt.Fprintf(w, "\n(6) nats-server alone: %d projects' streams and consumers (2 + 2 each) spread over K accounts, restarted\n", runs[0].Projects)
	fmt.Fprintf(w, "    %8s %12s %14s %18s %14s %14s\n", "accounts", "create s", "idle RSS MiB", "restart healthy s", "restart cores", "RSS after MiB")
	for _, a := range runs {
		fmt.Fprintf(w, "    %8d %12.1f %14.1f %18.2f %14.2f %14.1f\n", a.Accounts, a.CreateSeconds, a.IdleRSSMiB, a.RestartSeconds, a.RestartCPUCores, a.RestartedRSSMiB)
	}
	if ref := runs[0]; len(runs) > 1 && ref.RestartSeconds > 0 {
		for _, a := range runs[1:] {
			fmt.Fprintf(w, "    restart with %d accounts / with %d: %.2f\n", a.Accounts, ref.Accounts, a.RestartSeconds/ref.RestartSeconds)
		}
	}
}
