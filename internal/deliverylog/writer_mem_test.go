package deliverylog

import (
	"context"
	"runtime"
	"testing"
	"time"
)

// A writer's buffer costs memory by how many events it can hold, not by their size
// times that: the agent and sink exporters each keep one (Buffer 8192) in every role,
// idle or not, and the GC paces the heap from what is live.
func TestWriterBufferIsNotAHeapOfEvents(t *testing.T) {
	js, _ := startLog(t, StoreConfig{})
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	w := NewWriter(js, WriterConfig{Buffer: 8192})
	runtime.ReadMemStats(&after)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = w.Close(ctx)
	})
	// The in-process NATS server allocates meanwhile too; 8192 events by value were 4.6 MB.
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 2<<20 {
		t.Fatalf("a writer with room for 8192 events allocated %d KiB", grew>>10)
	}
}
