package agentexporter

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelinedata"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/principal"
	"github.com/otelcol-svc/otelcol-svc/internal/deliverylog"
	"github.com/otelcol-svc/otelcol-svc/internal/pipelinectx"
	"github.com/otelcol-svc/otelcol-svc/processor/triggerprocessor"
	"github.com/otelcol-svc/otelcol-svc/processor/windowprocessor"
)

// cooldownRedisURL is the machine's Redis, database 12 of these tests (projects are fresh
// ids).
func cooldownRedisURL() string {
	if u := os.Getenv("REDIS_URL"); u != "" {
		return u
	}
	return "redis://127.0.0.1:6379/12"
}

// pipeline is the pipeline role's processors in front of r, as configs/pipeline.yaml has
// them: trigger, then window, then the agent exporter; cooldowns in Redis or in memory.
func (e *env) pipeline(t *testing.T, r *running, redis bool) consumer.Logs {
	t.Helper()
	ctx := context.Background()
	wf, tf := windowprocessor.NewFactory(), triggerprocessor.NewFactory()
	wcfg, tcfg := wf.CreateDefaultConfig().(*windowprocessor.Config), tf.CreateDefaultConfig().(*triggerprocessor.Config)
	if redis {
		wcfg.RedisURL, tcfg.RedisURL = cooldownRedisURL(), cooldownRedisURL()
	}
	w, err := wf.CreateLogs(ctx, processortest.NewNopSettings(wf.Type()), wcfg, r.exp)
	require.NoError(t, err)
	tp, err := tf.CreateLogs(ctx, processortest.NewNopSettings(tf.Type()), tcfg, w)
	require.NoError(t, err)
	for _, p := range []processor.Logs{w, tp} {
		require.NoError(t, p.Start(ctx, e.host))
		t.Cleanup(func() { require.NoError(t, p.Shutdown(context.Background())) })
	}
	return tp
}

// triggers sends error records of pod as one pipeline batch numbered from seq on, and
// returns the outcome the receiver would settle with the batch's sequences.
func triggers(t *testing.T, pl consumer.Logs, project, pod string, seq uint64, n int) (*deliverylog.Outcome, []uint64) {
	t.Helper()
	ld, lrs := pipelinedata.New()
	var seqs []uint64
	for i := range n {
		s := seq + uint64(i)
		body := fmt.Sprintf(`{"severityNumber":17,"resourceAttributes":{"k8s.pod.name":%q},"body":"event %d"}`, pod, s)
		pipelinedata.Append(lrs, pipelinedata.Item{Body: []byte(body), Signal: "log", Seq: s})
		seqs = append(seqs, s)
	}
	o := deliverylog.NewOutcome()
	ctx := pipelinectx.WithOutcome(principal.NewContext(context.Background(), principal.Principal{ProjectID: project, Scope: "pipeline"}), o)
	require.NoError(t, pl.ConsumeLogs(ctx, ld))
	return o, seqs
}

// A call the budget refuses does not take its key's cooldown: with cooldown 60 s and the
// minute's one call spent on another pod, a storm of five error records for pod-a makes
// no call and counts all five as suppressed; once the budget frees, the next record of
// pod-a is sent at once (not a minute later) and says all five were suppressed, in the
// window call's body or, in legacy mode, in X-Suppressed-Count.
func TestCallRefusedByTheBudgetGivesItsCooldownBack(t *testing.T) {
	e := newEnv(t)
	for _, mode := range []string{"window", "legacy"} {
		for name, redis := range map[string]bool{"memory": false, "redis": true} {
			t.Run(mode+"/"+name, func(t *testing.T) {
				a := newAgent(t, nil)
				id := fmt.Sprintf("bcd_%s_%s_%d", mode, name, time.Now().UnixNano())
				p := project(id, a.srv.URL)
				p.Pipeline.Trigger = `severity_number >= 17`
				p.Pipeline.DedupKey = `resource_attributes["k8s.pod.name"]`
				p.Pipeline.CooldownSeconds = 60
				p.Pipeline.MaxCallsPerMinute = 1
				p.Pipeline.BatchSize = 1
				if mode == "window" {
					p.Pipeline.WindowEnabled = true
					p.Pipeline.GroupKey = p.Pipeline.DedupKey
				}
				e.putProject(t, p)
				clk := newClock(time.Date(2026, 11, 23, 16, 4, 10, 0, time.UTC))
				r := e.start(t, func(c *Config) { c.now = clk.now })
				pl := e.pipeline(t, r, redis)

				batches := map[*deliverylog.Outcome][]uint64{}
				o, seqs := triggers(t, pl, id, "pod-x", 1, 1)
				batches[o] = seqs
				require.Len(t, a.requests(), 1, "the minute's one call")

				o, seqs = triggers(t, pl, id, "pod-a", 2, 3)
				batches[o] = seqs
				o, seqs = triggers(t, pl, id, "pod-a", 5, 2)
				batches[o] = seqs
				require.Len(t, a.requests(), 1, "the budget is spent: no call for the storm")

				clk.add(time.Minute)
				o, seqs = triggers(t, pl, id, "pod-a", 7, 1)
				batches[o] = seqs
				got := a.requests()
				require.Len(t, got, 2, "the budget frees: pod-a's next record is sent at once")
				last := got[1]
				if mode == "window" {
					var body struct {
						Trigger    json.RawMessage `json:"trigger"`
						Suppressed int64           `json:"suppressed"`
					}
					require.NoError(t, json.Unmarshal(last.body, &body), "%s", last.body)
					assert.Contains(t, string(body.Trigger), `"event 7"`)
					assert.Equal(t, int64(5), body.Suppressed, "every record of the storm was suppressed")
				} else {
					assert.Contains(t, string(last.body), `"event 7"`)
					assert.Equal(t, "5", last.header.Get("X-Suppressed-Count"), "every record of the storm was suppressed")
				}

				c := settle(t, e, id, batches)
				assert.Equal(t, int64(5), c.Suppressed, "the ledger counts the storm as suppressed")
				assert.Equal(t, int64(5), c.Dropped)
				assert.Equal(t, int64(2), c.AgentCalls)
			})
		}
	}
}
