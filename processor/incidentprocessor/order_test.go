package incidentprocessor

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelinedata"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/principal"
	"github.com/otelcol-svc/otelcol-svc/internal/deliverylog"
	"github.com/otelcol-svc/otelcol-svc/internal/incident"
	"github.com/otelcol-svc/otelcol-svc/internal/pipelinectx"
)

// A batch hands the receiver its turn once its joins are queued behind the project's
// earlier batches, so the next batch is evaluated while this one's incidents are
// applied (a compare-and-set round trip or two per fingerprint, which one batch after
// another bounded a project's records/s); the applies still follow the stream's order:
// batches that open, resolve and open again one fingerprint's incident, each started
// as soon as the one before handed off (as the receiver does), open one generation per
// opening batch, as they would one batch at a time.
func TestBatchesAreEvaluatedWhileTheOnesBeforeApplyInOrder(t *testing.T) {
	e := newEnv(t)
	a := newAgent(t, nil)
	project := projectID("order")
	e.put(t, incidentProject(project, a.srv.URL, nil))
	in := e.start(t, "")

	const rounds = 12
	type result struct {
		handedOff bool
		err       error
	}
	results := make(chan result, 2*rounds)
	var prev <-chan struct{}
	for i := range 2 * rounds {
		rec := errorEvent("checkout", i)
		if i%2 == 1 {
			rec = okEvent("checkout")
		}
		ld, lrs := pipelinedata.New()
		pipelinedata.Append(lrs, pipelinedata.Item{Body: []byte(rec), Signal: "event", Seq: uint64(i + 1)})
		ctx := pipelinectx.WithOutcome(principal.NewContext(context.Background(), principal.Principal{ProjectID: project, Scope: "pipeline"}), deliverylog.NewOutcome())
		ctx, handedOff := pipelinectx.WithHandoff(ctx)
		returned := make(chan struct{})
		go func() {
			defer close(returned)
			err := in.proc.ConsumeLogs(ctx, ld)
			select {
			case <-handedOff:
				results <- result{handedOff: true, err: err}
			default:
				results <- result{err: err}
			}
		}()
		// The next batch starts once this one handed off or returned.
		select {
		case <-handedOff:
		case <-returned:
		}
		prev = returned
	}
	<-prev
	for range 2 * rounds {
		r := <-results
		require.NoError(t, r.err)
		assert.True(t, r.handedOff, "a batch hands off before it returns")
	}

	store := e.incidents(t)
	fph := incident.FingerprintHash("checkout")
	// The bucket keeps a fingerprint's last 3 archives only: the newest generations.
	for gen := rounds - 3; gen <= rounds; gen++ {
		inc, err := store.Get(context.Background(), project, incident.ID(fph, gen))
		require.NoError(t, err, "generation %d", gen)
		assert.Equal(t, int64(1), inc.Events, "generation %d: its opening batch's event", gen)
		assert.Equal(t, incident.StatusResolved, inc.Status, fmt.Sprintf("generation %d: resolved by the batch after", gen))
	}
	_, err := store.Get(context.Background(), project, incident.ID(fph, rounds+1))
	assert.Error(t, err, "no generation beyond the opening batches")
}
