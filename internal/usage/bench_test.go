package usage

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// BenchmarkReserve is the metering cost of one ingest request of 50 records, from many
// goroutines over three meters (three receivers) on one account, against the no-op
// reference in the same run.
func BenchmarkReserve(b *testing.B) {
	ctx := context.Background()
	n := testenv.StartNATS(b)
	open := func(cfg Config) []Gate {
		var gs []Gate
		for range 3 {
			_, js := testenv.Connect(b, n.URL())
			m, err := Open(ctx, js, cfg)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = m.Close(ctx) })
			gs = append(gs, m)
		}
		return gs
	}
	run := func(b *testing.B, gates []Gate, account string) {
		var next atomic.Int64
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			g := gates[next.Add(1)%int64(len(gates))]
			for pb.Next() {
				r, err := g.Reserve(ctx, account, "p", 50)
				if err != nil {
					b.Error(err)
					return
				}
				r.Commit()
			}
		})
	}
	b.Run("nop", func(b *testing.B) { run(b, []Gate{Nop{}, Nop{}, Nop{}}, "acct") })
	b.Run("jetstream", func(b *testing.B) {
		// A limit no run reaches, so every request is accepted, as while ingest is
		// measured; it is enforced like any limit (leases are a share of what is left).
		run(b, open(Config{DefaultLimit: 1 << 50}), "acct-bench")
	})
	b.Run("exact", func(b *testing.B) {
		// Leases off: every request is a KV compare-and-set, as in the last few hundred
		// records of a quota. Shows the cost leases avoid.
		run(b, open(Config{DefaultLimit: 1 << 50, MinLease: 1 << 62}), "acct-exact")
	})
}
