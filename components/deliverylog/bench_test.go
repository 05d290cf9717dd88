package deliverylog

import (
	"context"
	"testing"

	"github.com/otelcol-svc/otelcol-svc/components/testenv"
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
