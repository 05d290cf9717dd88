package agentexporter

import (
	"context"
	"testing"

	"github.com/otelcol-svc/otelcol-svc/internal/deliverylog"
	"github.com/otelcol-svc/otelcol-svc/internal/pipelinectx"
)

// BenchmarkHotPath is what the delivery log costs a batch of agent calls (a local agent
// answering at once, the worst case for the log's share), with the log off and on in the
// same run. Compare the pairs' ns/op. The sink exporter has the same for a delivery.
func BenchmarkHotPath(b *testing.B) {
	e := newEnv(b)
	a := newAgent(b, nil)
	p := project("bp", a.srv.URL)
	p.Pipeline.BatchSize = 10
	e.putProject(b, p)
	in := records(10)
	for _, on := range []bool{false, true} {
		name := "log-off"
		if on {
			name = "log-on"
		}
		r := e.start(b, func(c *Config) { c.DeliveryLog.Enabled = on })
		b.Run("pipeline/"+name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				ctx := pipelinectx.WithOutcome(context.Background(), deliverylog.NewOutcome())
				if err := consumeCtx(ctx, r, "bp", in); err != nil {
					b.Fatal(err)
				}
			}
		})
		_ = r.exp.Shutdown(context.Background())
	}
}
