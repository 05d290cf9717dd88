package delivery

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// BenchmarkProbesAcrossProcesses measures what a failing target receives per probe
// interval from benchProcs processes, each with deliveries waiting for its open circuit:
// sharing through svc-targets against the reference of the same processes pacing alone
// (no NATS), measured in the same run in alternating rounds. The goal is one probe per
// interval in all: a ratio of 1/benchProcs.
//
// The R1 variant shares through one nats-server, R3 through a 3-node cluster with the
// bucket replicated 3 times (the scale-out default, where the lease races answer
// differently).
//
//	go test -run '^$' -bench ProbesAcrossProcesses -benchtime 1x ./internal/delivery/
func BenchmarkProbesAcrossProcesses(b *testing.B) {
	b.Run("R1", func(b *testing.B) { benchProbesAcrossProcesses(b, testenv.StartNATS(b).URL(), 1) })
	b.Run("R3", func(b *testing.B) { benchProbesAcrossProcesses(b, testenv.StartNATSCluster(b, 3).URL(), 3) })
}

func benchProbesAcrossProcesses(b *testing.B, url string, replicas int) {
	const (
		benchProcs = 3
		waiting    = 4
		interval   = time.Second
		warmup     = 1500 * time.Millisecond
		window     = 6 * time.Second
		rounds     = 3
	)
	var shared, alone float64
	for range b.N {
		for r := range rounds {
			modes := []bool{true, false}
			if r%2 == 1 {
				modes = []bool{false, true}
			}
			for _, share := range modes {
				got := probesPerInterval(b, url, replicas, fmt.Sprintf("b%d_%t", r, share), share, benchProcs, waiting, interval, warmup, window)
				b.Logf("round %d shared=%t: %.2f requests per interval", r+1, share, got)
				if share {
					shared += got
				} else {
					alone += got
				}
			}
		}
	}
	b.ReportMetric(shared/float64(rounds*b.N), "shared-per-interval")
	b.ReportMetric(alone/float64(rounds*b.N), "alone-per-interval")
	b.ReportMetric(shared/alone, "ratio")
}

func probesPerInterval(b *testing.B, url string, replicas int, project string, share bool, procs, waiting int, interval, warmup, window time.Duration) float64 {
	var reqs atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		reqs.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var engines []*Engine
	for range procs {
		s := DefaultSettings()
		s.AllowCIDRs = "127.0.0.0/8"
		s.Retry = RetryConfig{InitialInterval: time.Millisecond, MaxInterval: 5 * time.Millisecond, MaxElapsedTime: time.Hour}
		s.DeliveryLog.Enabled = false
		s.FailureNotices.Enabled = false
		s.Target.Circuit = CircuitConfig{Failures: 1, ProbeInterval: interval}
		s.DeadLetterStream.Replicas = replicas
		e := New(Options{Settings: s, Name: "bench", Logger: zap.NewNop(), Telemetry: nopTelemetry{}})
		if share {
			nc, js := testenv.Connect(b, url)
			if err := e.Start(nil, nc, js); err != nil {
				b.Fatal(err)
			}
			for e.share.bucket() == nil {
				time.Sleep(time.Millisecond)
			}
		} else if err := e.Start(nil, nil, nil); err != nil {
			b.Fatal(err)
		}
		engines = append(engines, e)
		for range waiting {
			wg.Add(1)
			go func() {
				defer wg.Done()
				e.Deliver(ctx, Request{Who: "agent", Project: project, Target: srv.URL, Body: []byte(`{}`)})
			}()
		}
	}
	time.Sleep(warmup)
	from := reqs.Load()
	time.Sleep(window)
	got := reqs.Load() - from
	cancel()
	wg.Wait()
	for _, e := range engines {
		e.Shutdown(context.Background())
	}
	return float64(got) / (float64(window) / float64(interval))
}
