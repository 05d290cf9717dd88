package atomicbatch

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/otelcol-svc/otelcol-svc/exporter/jetstreamexporter/internal/fastbatch"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// BenchmarkPublishModes compares what an atomic batch costs against a fast batch and
// per-record async publishes, 8 publishers × 100-record requests, alternating the three in
// every round so that all see the same machine. Two stream kinds, because nats-server
// stages an atomic batch in a file store of its own on an R1 file stream (fsynced,
// created per batch under the stream's lock) and in memory on a replicated one:
//
//	go test -run '^$' -bench PublishModes ./exporter/jetstreamexporter/internal/atomicbatch/
//
// It reports records/s of each mode and the ratios atomic/fast and atomic/async.
func BenchmarkPublishModes(b *testing.B) {
	b.Run("R1", func(b *testing.B) {
		srv := testenv.StartNATS(b)
		benchModes(b, srv.URL(), 1)
	})
	b.Run("R3", func(b *testing.B) {
		cl := testenv.StartNATSCluster(b, 3)
		cl.WaitReady(60 * time.Second)
		benchModes(b, cl.URL(), 3)
	})
}

func benchModes(b *testing.B, url string, replicas int) {
	const workers, perWorker, size = 8, 40, 100
	nc, js := testenv.Connect(b, url)
	ctx := context.Background()
	l := streams.DefaultLimits()
	l.Replicas = replicas
	cfg := streams.RawConfig("modes", l)
	cfg.AllowAtomicPublish, cfg.AllowBatchPublish = true, true
	if _, err := js.CreateStream(ctx, cfg); err != nil {
		b.Fatal(err)
	}
	ab, err := New(nc)
	if err != nil {
		b.Fatal(err)
	}
	fb, err := fastbatch.New(nc, 5*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	slots := make(chan struct{}, InFlight)
	recs := abRecords("r", size, func(int) nats.Header { return nats.Header{streams.HeaderSignal: []string{"log"}} })
	modes := []struct {
		name string
		fn   func() error
	}{
		{"atomic", func() error {
			// As the exporter does: InFlight batches per stream, the others queued.
			slots <- struct{}{}
			defer func() { <-slots }()
			return ab.Publish(ctx, cfg.Subjects[0], recs)
		}},
		{"fast", func() error {
			bt := fb.Begin(cfg.Subjects[0])
			defer fb.End(bt)
			for _, r := range recs {
				if err := bt.Add(ctx, r.Data, r.Header); err != nil {
					return err
				}
			}
			return bt.Commit(ctx)
		}},
		{"async", func() error {
			fs := make([]jetstream.PubAckFuture, 0, len(recs))
			for _, r := range recs {
				f, err := js.PublishMsgAsync(&nats.Msg{Subject: cfg.Subjects[0], Data: r.Data, Header: r.Header})
				if err != nil {
					return err
				}
				fs = append(fs, f)
			}
			for _, f := range fs {
				select {
				case <-f.Ok():
				case err := <-f.Err():
					return err
				}
			}
			return nil
		}},
	}
	elapsed := map[string]time.Duration{}
	b.ResetTimer()
	for range b.N {
		for _, m := range modes {
			start := time.Now()
			var wg sync.WaitGroup
			for range workers {
				wg.Go(func() {
					for range perWorker {
						if err := m.fn(); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			elapsed[m.name] += time.Since(start)
		}
	}
	rate := func(name string) float64 {
		return float64(b.N*workers*perWorker*size) / elapsed[name].Seconds()
	}
	for _, m := range modes {
		b.ReportMetric(rate(m.name), m.name+"-records/s")
	}
	b.ReportMetric(rate("atomic")/rate("fast"), "atomic/fast")
	b.ReportMetric(rate("atomic")/rate("async"), "atomic/async")
}
