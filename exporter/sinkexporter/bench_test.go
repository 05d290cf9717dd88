package sinkexporter

import (
	"context"
	"strconv"
	"testing"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelinedata"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/principal"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
)

// BenchmarkHotPath is what the delivery log costs a sink delivery (a local webhook
// answering at once, the worst case for the log's share), with the log off and on in the
// same run. Compare the pair's ns/op.
func BenchmarkHotPath(b *testing.B) {
	e := newEnv(b)
	a := newAgent(b, nil)
	e.putProject(b, sinkProject("bs", mirror.Sink{ID: "s_hook", Kind: "webhook", URL: a.srv.URL}))
	for _, on := range []bool{false, true} {
		name := "log-off"
		if on {
			name = "log-on"
		}
		r := e.start(b, func(c *Config) { c.DeliveryLog.Enabled = on })
		b.Run("sink/"+name, func(b *testing.B) {
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				n++
				// Each result its own output message, so each is its own delivery.
				ld, lrs := pipelinedata.New()
				pipelinedata.Append(lrs, pipelinedata.Item{Body: []byte(`{"text":"checkout is failing","severity":"high"}`),
					Kind: pipelinedata.KindResult, Seq: uint64(n), SinkID: "s_hook", RequestID: "req_1", MsgID: "out:req_1:" + strconv.Itoa(n)})
				if err := r.exp.ConsumeLogs(principal.NewContext(context.Background(), principal.Principal{ProjectID: "bs"}), ld); err != nil {
					b.Fatal(err)
				}
			}
		})
		_ = r.exp.Shutdown(context.Background())
	}
}
