package main

import (
	"bytes"
	"fmt"
	"github.com/otelcol-svc/otelcol-svc/bench/internal/benchkit"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/records"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
)

// result is what one timed phase measured. A "batch" is one request's records: one
// HTTP request in the ingest phase, one group of async publishes in the reference.
type result struct {
	Records   int64           // records confirmed (200 answers / JetStream acks)
	Batches   int64           // batches confirmed
	Elapsed   time.Duration   // from the start until the last worker finished
	Latencies []time.Duration // per confirmed batch
	Failures  map[string]int  // what went wrong, by kind, with a count
}

// merge adds the figures of another round of the same phase.
func (r result) merge(o result) result {
	r.Records += o.Records
	r.Batches += o.Batches
	r.Elapsed += o.Elapsed
	r.Latencies = append(r.Latencies, o.Latencies...)
	slices.Sort(r.Latencies)
	if r.Failures == nil {
		r.Failures = map[string]int{}
	}
	for k, v := range o.Failures {
		r.Failures[k] += v
	}
	return r
}

func (r result) rate() float64 { return float64(r.Records) / r.Elapsed.Seconds() }

// percentile is the nearest-rank percentile of sorted latencies.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*p+0.999999) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// run starts conc workers that each call batch in a loop until d has passed; a batch in
// flight at the deadline completes and counts. batch returns the records it got
// confirmed, or a failure description.
func run(conc int, d time.Duration, batch func(worker, i int) (int, string)) result {
	var mu sync.Mutex
	res := result{Failures: map[string]int{}}
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(d)
	for w := 0; w < conc; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var n, batches int64
			lat := make([]time.Duration, 0, 4096)
			fails := map[string]int{}
			for i := 0; time.Now().Before(deadline); i++ {
				t0 := time.Now()
				got, fail := batch(w, i)
				if fail != "" {
					fails[fail]++
					continue
				}
				lat = append(lat, time.Since(t0))
				n += int64(got)
				batches++
			}
			mu.Lock()
			defer mu.Unlock()
			res.Records += n
			res.Batches += batches
			res.Latencies = append(res.Latencies, lat...)
			for k, v := range fails {
				res.Failures[k] += v
			}
		}()
	}
	wg.Wait()
	res.Elapsed = time.Since(start)
	slices.Sort(res.Latencies)
	return res
}

// pick spreads workers over the distinct requests so that they do not send the same
// one at the same time.
func pick(reqs []request, worker, conc, i int) request { return reqs[(worker+i*conc)%len(reqs)] }

// reference publishes the flat records straight to JetStream the way the exporter does
// for one request: every record of a batch with PublishMsgAsync (same subject shape,
// same Svc-Signal header, same client options), then wait for all acks.
func reference(js jetstream.JetStream, project string, reqs []request, conc int, d time.Duration) result {
	subject := streams.RawSubject(project)
	stall := jetstream.WithStallWait(publishTimeout)
	return run(conc, d, func(worker, i int) (int, string) {
		recs := pick(reqs, worker, conc, i).records
		futures := make([]jetstream.PubAckFuture, 0, len(recs))
		for _, rec := range recs {
			// A fresh message each time: PublishMsgAsync sets its reply subject.
			msg := &nats.Msg{Subject: subject, Data: rec, Header: nats.Header{streams.HeaderSignal: []string{records.SignalLog}}}
			f, err := js.PublishMsgAsync(msg, stall)
			if err != nil {
				return 0, "publish: " + err.Error()
			}
			futures = append(futures, f)
		}
		timer := time.NewTimer(publishTimeout)
		defer timer.Stop()
		for _, f := range futures {
			select {
			case <-f.Ok():
			case err := <-f.Err():
				return 0, "ack: " + err.Error()
			case <-timer.C:
				return 0, "ack: timeout"
			}
		}
		return len(recs), ""
	})
}

// sender posts OTLP/HTTP protobuf requests to the collector.
type sender struct {
	client *http.Client
	url    string
	key    string
}

func newSender(base, key string, conns int) *sender {
	tr := &http.Transport{
		MaxIdleConns:        conns * 2,
		MaxIdleConnsPerHost: conns * 2, // the default (2) would close and reopen connections
		IdleConnTimeout:     time.Minute,
		DisableCompression:  true,
	}
	return &sender{client: &http.Client{Transport: tr, Timeout: 30 * time.Second}, url: base + "/v1/logs", key: key}
}

// post sends one request and returns "" on a 200, else a description of the failure
// (the status and the OTLP Status message the collector answered).
func (s *sender) post(body []byte) string {
	req, err := http.NewRequest(http.MethodPost, s.url, bytes.NewReader(body))
	if err != nil {
		return err.Error()
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Set("X-API-Key", s.key)
	resp, err := s.client.Do(req)
	if err != nil {
		return "transport: " + err.Error()
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body) // drained, so the connection is reused
		return ""
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	var st spb.Status
	msg := strconv.Quote(string(b))
	if proto.Unmarshal(b, &st) == nil && st.Message != "" {
		msg = st.Message
	}
	return fmt.Sprintf("%d %s", resp.StatusCode, msg)
}

// ingest is the timed OTLP/HTTP phase.
func ingest(s *sender, reqs []request, conc int, d time.Duration) result {
	return run(conc, d, func(worker, i int) (int, string) {
		r := pick(reqs, worker, conc, i)
		if fail := s.post(r.body); fail != "" {
			return 0, fail
		}
		return len(r.records), ""
	})
}

// rssResult is what the paced phase measured.
type rssResult struct {
	Idle, Peak, Final     mem
	Sent, Failed, Skipped int64
	Elapsed               time.Duration
	Failures              map[string]int
}

// mem is a reading of a process's resident memory (benchkit.ReadMem).
type mem = benchkit.Mem

// paced sends one request every batch/rate seconds for d, whatever the answers take
// (each request in its own goroutine, at most maxInFlight at once; a tick that finds
// them all busy is skipped and counted), and samples the collector's memory every
// 200 ms. Peak is the sample with the highest VmRSS.
func paced(s *sender, reqs []request, pid int, rate float64, d time.Duration) (rssResult, error) {
	const maxInFlight = 256
	var res rssResult
	idle, err := benchkit.ReadMem(pid)
	if err != nil {
		return res, err
	}
	res.Idle, res.Peak = idle, idle

	var mu sync.Mutex // guards res.Peak, res.Failed and res.Failures
	stopSampler := make(chan struct{})
	samplerDone := make(chan struct{})
	go func() {
		defer close(samplerDone)
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stopSampler:
				return
			case <-t.C:
				if m, err := benchkit.ReadMem(pid); err == nil {
					mu.Lock()
					if m.RSS > res.Peak.RSS {
						res.Peak = m
					}
					mu.Unlock()
				}
			}
		}
	}()

	res.Failures = map[string]int{}
	sem := make(chan struct{}, maxInFlight)
	var wg sync.WaitGroup
	interval := time.Duration(float64(time.Second) * float64(len(reqs[0].records)) / rate)
	tick := time.NewTicker(interval)
	start := time.Now()
	for i := 0; time.Since(start) < d; i++ {
		<-tick.C
		select {
		case sem <- struct{}{}:
		default:
			res.Skipped++
			continue
		}
		res.Sent++
		wg.Add(1)
		go func(body []byte) {
			defer wg.Done()
			defer func() { <-sem }()
			if fail := s.post(body); fail != "" {
				mu.Lock()
				res.Failed++
				res.Failures[fail]++
				mu.Unlock()
			}
		}(reqs[i%len(reqs)].body)
	}
	tick.Stop()
	wg.Wait()
	res.Elapsed = time.Since(start)
	close(stopSampler)
	<-samplerDone
	if res.Final, err = benchkit.ReadMem(pid); err != nil {
		return res, err
	}
	if res.Final.RSS > res.Peak.RSS {
		res.Peak = res.Final
	}
	return res, nil
}

// cpuUseOf turns CPU spent during elapsed into cores.
func cpuUseOf(s benchkit.CPUSnap, elapsed time.Duration) cpuUse {
	sec := elapsed.Seconds()
	c, g := s.Collector.Seconds()/sec, s.Self.Seconds()/sec
	return cpuUse{Collector: c, Generator: g, Other: max(0, s.Busy.Seconds()/sec-c-g), Steal: s.Steal.Seconds() / sec}
}

// cpuUse is the CPU spent during a phase, in cores (CPU seconds per second).
type cpuUse struct {
	Collector float64 `json:"collector_cores"`
	Generator float64 `json:"generator_cores"`
	Other     float64 `json:"other_cores"` // the rest of the machine: should be ~0
	Steal     float64 `json:"steal_cores"` // taken by the hypervisor: should be ~0
}
