package deliverylog

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// BenchmarkWriterHotPath is what a delivery pays to be logged (Record, Attempt, Finish)
// against a no-op reference in the same run.
func BenchmarkWriterHotPath(b *testing.B) {
	body := make([]byte, 2048)
	b.Run("nop", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = Delivery{ID: "d", Kind: KindSink, RequestBody: body}
		}
	})
	b.Run("jetstream", func(b *testing.B) {
		n := testenv.StartNATS(b)
		_, js := testenv.Connect(b, n.URL())
		if _, err := EnsureStream(context.Background(), js, StoreConfig{}); err != nil {
			b.Fatal(err)
		}
		w := NewWriter(js, WriterConfig{})
		b.Cleanup(func() { _ = w.Close(context.Background()) })
		b.ReportAllocs()
		for b.Loop() {
			w.Record("p", Delivery{ID: "d", Kind: KindSink, RequestBody: body})
			w.Attempt("p", "d", Attempt{StatusCode: 200}, nil)
			w.Finish("p", "d", Final{State: StateDelivered})
		}
		b.ReportMetric(float64(w.Dropped()), "dropped")
	})
}

// BenchmarkListDeadLetters lists the dead letters of a project holding N deliveries with
// 32 KiB bodies (few of them dead-lettered): List, which scans headers only, against
// the same list done the way it was before (every message read whole), in the same run.
// N is DELIVERYLOG_BENCH_N (default 2000; the report that prompted it had 20,000).
func BenchmarkListDeadLetters(b *testing.B) {
	total := 2000
	if v, err := strconv.Atoi(os.Getenv("DELIVERYLOG_BENCH_N")); err == nil && v > 0 {
		total = v
	}
	ctx := context.Background()
	js, s := startLog(b, StoreConfig{})
	w := NewWriter(js, WriterConfig{Buffer: 1 << 14})
	body := make([]byte, 32<<10)
	for i := range total {
		id := fmt.Sprintf("d%06d", i)
		w.Record("p", Delivery{ID: id, Kind: KindAgent, RequestBody: body})
		state := StateDelivered
		if i%1000 == 999 {
			state = StateDeadLettered
		}
		w.Finish("p", id, Final{State: state})
		if i%500 == 499 {
			// Let the writer catch up rather than drop (the bench measures reads).
			for {
				info, err := s.Info(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if info.State.Msgs >= uint64(i+1) || w.Dropped() > 0 {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
	}
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := w.Close(cctx); err != nil {
		b.Fatal(err)
	}
	r := NewReader(s)
	f := Filter{State: StateDeadLettered}.normalized()
	var headersOnly, full time.Duration
	var nh, nf int
	for b.Loop() {
		t0 := time.Now()
		ds, err := r.List(ctx, "p", f)
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		old, err := fullList(ctx, s, "p", f)
		if err != nil {
			b.Fatal(err)
		}
		headersOnly += t1.Sub(t0)
		full += time.Since(t1)
		nh, nf = len(ds), len(old)
	}
	if nh != nf {
		b.Fatalf("headers-only listed %d, full %d", nh, nf)
	}
	iters := float64(b.N)
	b.ReportMetric(float64(headersOnly.Milliseconds())/iters, "ms-headers/op")
	b.ReportMetric(float64(full.Milliseconds())/iters, "ms-full/op")
	b.ReportMetric(float64(full)/float64(headersOnly), "full/headers")
	b.ReportMetric(float64(total-int(w.Dropped())), "deliveries")
}

// fullList is List as it was before the delivery headers: every message of the window
// read whole and decoded, widening the window while too few match.
func fullList(ctx context.Context, s jetstream.Stream, project string, f Filter) ([]Delivery, error) {
	now := time.Now()
	var out []Delivery
	for _, win := range listWindows {
		from := now.Add(-win)
		c, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{SubjectPrefix + "." + project + ".*"},
			DeliverPolicy: jetstream.DeliverByStartTimePolicy, OptStartTime: &from})
		if err != nil {
			return nil, err
		}
		pending := c.CachedInfo().NumPending
		out = out[:0]
		for got := uint64(0); got < pending; {
			batch, err := c.Fetch(int(min(256, pending-got)), jetstream.FetchMaxWait(2*time.Second))
			if err != nil {
				return nil, err
			}
			k := 0
			for m := range batch.Messages() {
				k++
				var d Delivery
				if json.Unmarshal(m.Data(), &d) == nil && f.match(d) {
					d.RequestBody, d.Answer, d.AttemptLog = nil, nil, nil
					out = append(out, d)
				}
			}
			if k == 0 {
				break
			}
			got += uint64(k)
		}
		if len(out) >= f.Limit {
			break
		}
	}
	return out, nil
}
