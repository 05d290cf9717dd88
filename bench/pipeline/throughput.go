package main

import (
	"context"
	"errors"
	"fmt"
	"github.com/otelcol-svc/otelcol-svc/bench/internal/benchkit"
	"os"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/records"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
	"github.com/otelcol-svc/otelcol-svc/internal/webhooksig"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

const (
	tpProject    = "benchpipe"    // consumed by the collector's pipeline role
	tpRefProject = "benchpiperef" // consumed by the reference, in this process
	tpIncProject = "benchpipeinc" // consumed by the collector's pipeline role in incident mode
	streamMax    = 8 << 30        // bytes: the pre-published records must fit

	// The JetStream receiver's settings in configs/pipeline.yaml (durable name, fetch
	// size, ack wait); the reference consumer uses the same.
	durable = "svc-pipeline"
	fetch   = 500
	ackWait = 60 * time.Second

	trigger = "severity_number >= 17"
	// Incident mode groups the matches by service (8 in the workload), so the few calls
	// it makes do not count: what is measured is the cost of the incident processor on
	// every record (evaluation, context storage, the KV state per batch).
	incidentFingerprint = `resource_attributes["service.name"]`
)

type throughputReport struct {
	Records       int64    `json:"records"`          // on each stream
	Distinct      int      `json:"distinct_records"` // published round robin
	RecordBytes   int      `json:"record_bytes_avg"`
	Matches       int64    `json:"trigger_matches_expected"`
	PublishPerSec float64  `json:"prepublish_records_per_sec"` // not timed against a goal
	Reference     consumed `json:"reference"`
	Pipeline      consumed `json:"pipeline"`
	AgentCalls    int64    `json:"agent_calls"`
	AgentRecords  int64    `json:"agent_records"`
	Ratio         float64  `json:"ratio"` // pipeline / reference records/s
	// Incident mode on the same records, drained after the legacy pipeline.
	Incident      *consumed `json:"incident,omitempty"`
	IncidentCalls int64     `json:"incident_calls,omitempty"`
	IncidentRatio float64   `json:"incident_ratio,omitempty"` // incident / legacy pipeline records/s
}

// consumed is one drain of a stream: from the consumer's creation (the server's
// timestamp) until it had nothing pending and nothing waiting for an ack.
type consumed struct {
	RecordsPerSec float64         `json:"records_per_sec"`
	Seconds       float64         `json:"seconds"`
	Redelivered   int             `json:"redelivered"`
	CPU           benchkit.CPUUse `json:"cpu"`
	// CPU time per record: the collector process, and this process (the NATS server, the
	// agent, and for the reference its consumer).
	CollectorUsPerRecord float64 `json:"collector_cpu_us_per_record"`
	BenchUsPerRecord     float64 `json:"bench_cpu_us_per_record"`
}

// consumerConfig is the JetStream receiver's consumer (receiver/jetstreamreceiver).
func consumerConfig() jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable: durable, AckPolicy: jetstream.AckExplicitPolicy, AckWait: ackWait, MaxDeliver: -1,
		MaxAckPending: 4 * fetch, DeliverPolicy: jetstream.DeliverAllPolicy,
	}
}

func throughput(r *benchkit.Runner, n int64, perfDir, pprofFile string, incident bool) *throughputReport {
	ctx := context.Background()
	rep := &throughputReport{Records: n}
	recs, err := flatRecords(30_000)
	if err != nil {
		r.Fatal(err)
	}
	rep.Distinct = len(recs)
	var size int
	for _, rec := range recs {
		size += len(rec)
	}
	rep.RecordBytes = size / len(recs)
	rep.Matches = n / 100 // one ERROR in every 100 records, and n is a multiple of 100

	nt := testenv.StartNATS(r)
	_, js := testenv.Connect(r, nt.URL())
	limits := streams.DefaultLimits()
	limits.MaxBytes = streamMax
	projects := []string{tpProject, tpRefProject}
	if incident {
		projects = append(projects, tpIncProject)
	}
	for _, p := range projects {
		if err := streams.Ensure(ctx, js, streams.RawConfig(p, limits)); err != nil {
			r.Fatal(err)
		}
	}
	// The project's agent URL is taken as set before the records arrive (a pipeline
	// process that was down catches up): a pipeline starts from the records stored since
	// its agent URL was set, and the drain of that backlog is what is measured.
	agentSince := time.Now()
	fmt.Fprintf(os.Stderr, "pre-publishing %d records (%d B each on average) to each of %d streams...\n", n, rep.RecordBytes, len(projects))
	t0 := time.Now()
	for _, p := range projects {
		publish(r, nt.URL(), p, recs, n)
	}
	rep.PublishPerSec = float64(int64(len(projects))*n) / time.Since(t0).Seconds()
	syscall.Sync() // write the streams' pages back now, not during the timed phases

	// The collector runs from the start, idle: the project has no pipeline yet, so its
	// start-up does not fall into a timed phase.
	ag := startAgent(r, false)
	config, pprofAt := "configs/pipeline.yaml", ""
	if pprofFile != "" {
		pprofAt = "127.0.0.1:" + strconv.Itoa(testenv.FreePort(r))
		config = benchkit.PprofConfig(r, config, pprofAt)
	}
	col := testenv.StartCollector(r, testenv.CollectorOptions{Config: config, Env: map[string]string{
		"NATS_URL": nt.URL(), "SVC_OUTBOUND_ALLOW": "127.0.0.0/8", "SVC_STREAM_REPLICAS": "1",
		"SVC_STREAM_MAX_BYTES": strconv.Itoa(streamMax),
	}})
	pid := col.Pid()
	time.Sleep(time.Second)

	fmt.Fprintln(os.Stderr, "reference: plain JetStream pull consumer in this process, pull and ack every record...")
	c0 := benchkit.ReadCPU(pid)
	cons, err := js.CreateOrUpdateConsumer(ctx, streams.RawStream(tpRefProject), consumerConfig())
	if err != nil {
		r.Fatal(err)
	}
	// A missed heartbeat on a loaded machine must not end the reference's consumer (it
	// did, and the run died with the reference stalled): only Stop ends it.
	it, err := cons.Messages(jetstream.PullMaxMessages(fetch), jetstream.WithMessagesErrOnMissingHeartbeat(false))
	if err != nil {
		r.Fatal(err)
	}
	go func() {
		for {
			m, err := it.Next()
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return // stopped
			}
			if err != nil {
				continue
			}
			_ = m.Ack()
		}
	}()
	rep.Reference = drained(r, js, tpRefProject, n, c0, pid)
	it.Stop()
	time.Sleep(time.Second)

	fmt.Fprintf(os.Stderr, "pipeline: otelcol-svc (configs/pipeline.yaml, pid %d), trigger %q, batch_size 10, agent %s...\n", pid, trigger, ag.URL)
	m, err := mirror.Open(ctx, js, 1)
	if err != nil {
		r.Fatal(err)
	}
	stop := benchkit.PerfRecord(r, perfDir, "throughput-pipeline", pid)
	stopProfile := cpuProfile(r, pprofAt, pprofFile)
	c0 = benchkit.ReadCPU(pid)
	err = m.PutProject(ctx, mirror.Project{ID: tpProject, Version: 1, SigningSecret: webhooksig.NewSecret(), AgentSince: agentSince,
		Pipeline: mirror.Pipeline{Trigger: trigger, BatchSize: 10, AgentEndpointURL: ag.URL}})
	if err != nil {
		r.Fatal(err)
	}
	rep.Pipeline = drained(r, js, tpProject, n, c0, pid)
	stop()
	stopProfile()
	rep.AgentCalls, rep.AgentRecords = ag.calls.Load(), ag.records.Load()
	if bad := ag.invalid.Load(); bad > 0 {
		r.Fatalf("%d agent calls were not a JSON array", bad)
	}
	if rep.Reference.RecordsPerSec > 0 {
		rep.Ratio = rep.Pipeline.RecordsPerSec / rep.Reference.RecordsPerSec
	}
	if incident {
		time.Sleep(time.Second)
		inc := startAgent(r, true) // keeps the (few) incident calls' bodies
		fmt.Fprintf(os.Stderr, "incident mode: the same process, fingerprint %s, trigger %q, agent %s...\n", incidentFingerprint, trigger, inc.URL)
		stop := benchkit.PerfRecord(r, perfDir, "throughput-incident", pid)
		stopProfile := cpuProfile(r, pprofAt, incidentProfile(pprofFile))
		c0 = benchkit.ReadCPU(pid)
		err = m.PutProject(ctx, mirror.Project{ID: tpIncProject, Version: 1, SigningSecret: webhooksig.NewSecret(), AgentSince: agentSince,
			Pipeline: mirror.Pipeline{Mode: mirror.ModeIncident, Trigger: trigger, Fingerprint: incidentFingerprint, GroupWait: "0s",
				GroupInterval: "1s", AgentEndpointURL: inc.URL}})
		if err != nil {
			r.Fatal(err)
		}
		c := drained(r, js, tpIncProject, n, c0, pid)
		stop()
		stopProfile()
		rep.Incident, rep.IncidentCalls = &c, inc.calls.Load()
		if rep.Pipeline.RecordsPerSec > 0 {
			rep.IncidentRatio = c.RecordsPerSec / rep.Pipeline.RecordsPerSec
		}
	}
	return rep
}

// publish puts n records on a project's raw stream, round robin over recs, the way the
// receiver's exporter does (async publish, header Svc-Signal: log), and checks that all
// are stored.
func publish(r *benchkit.Runner, url, project string, recs [][]byte, n int64) {
	nc, _ := testenv.Connect(r, url)
	var failed atomic.Int64
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(16384),
		jetstream.WithPublishAsyncErrHandler(func(jetstream.JetStream, *nats.Msg, error) { failed.Add(1) }))
	if err != nil {
		r.Fatal(err)
	}
	subject := streams.RawSubject(project)
	hdr := nats.Header{streams.HeaderSignal: []string{records.SignalLog}} // read-only, shared
	for i := int64(0); i < n; i++ {
		if _, err := js.PublishMsgAsync(&nats.Msg{Subject: subject, Data: recs[i%int64(len(recs))], Header: hdr},
			jetstream.WithStallWait(30*time.Second)); err != nil {
			r.Fatalf("publish: %v", err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(time.Minute):
		r.Fatal("publish: acks still pending after a minute")
	}
	s, err := js.Stream(context.Background(), streams.RawStream(project))
	if err != nil {
		r.Fatal(err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		r.Fatal(err)
	}
	if f := failed.Load(); f > 0 || int64(info.State.Msgs) != n {
		r.Fatalf("publish to %s: %d errors, %d of %d records stored", project, f, info.State.Msgs, n)
	}
	// As the receiver does: idle consumers are not pulled from until woken.
	if err := nc.Publish(streams.WakeSubject(streams.WakeRaw, project), nil); err != nil {
		r.Fatal(err)
	}
}

// drained polls the project's durable consumer until it has delivered and got acks for
// every one of the n records, and measures from the consumer's creation (by the
// collector or by the reference) to then. c0 is the CPU reading at the phase's start.
func drained(r *benchkit.Runner, js jetstream.JetStream, project string, n int64, c0 benchkit.CPUSnap, pid int) consumed {
	ctx := context.Background()
	const poll = 10 * time.Millisecond
	start := time.Now()
	var info *jetstream.ConsumerInfo
	var lastFloor uint64
	lastMove := time.Now()
	for {
		cons, err := js.Consumer(ctx, streams.RawStream(project), durable)
		if err == nil {
			info, err = cons.Info(ctx)
		}
		switch {
		case errors.Is(err, jetstream.ErrConsumerNotFound):
			if time.Since(start) > 30*time.Second {
				r.Fatalf("no consumer %s on %s after 30s", durable, streams.RawStream(project))
			}
		case err != nil:
			r.Fatal(err)
		case info.NumPending == 0 && info.NumAckPending == 0 && info.AckFloor.Stream >= uint64(n):
			end := time.Now()
			c1 := benchkit.ReadCPU(pid)
			el := end.Sub(info.Created)
			cpu := benchkit.Since(c0, c1, end.Sub(start))
			return consumed{
				RecordsPerSec: float64(n) / el.Seconds(), Seconds: el.Seconds(), Redelivered: info.NumRedelivered, CPU: cpu,
				CollectorUsPerRecord: float64((c1.Collector - c0.Collector).Microseconds()) / float64(n),
				BenchUsPerRecord:     float64((c1.Self - c0.Self).Microseconds()) / float64(n),
			}
		case info.AckFloor.Stream != lastFloor:
			lastFloor, lastMove = info.AckFloor.Stream, time.Now()
		case time.Since(lastMove) > 30*time.Second:
			r.Fatalf("consumer of %s stalled: ack floor %d of %d, %d pending, %d awaiting ack",
				project, info.AckFloor.Stream, n, info.NumPending, info.NumAckPending)
		}
		time.Sleep(poll)
	}
}
