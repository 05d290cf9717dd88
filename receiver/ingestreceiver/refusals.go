package ingestreceiver

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/principal"
	"github.com/otelcol-svc/otelcol-svc/internal/usage"
)

// Records refused by a limit are counted in the account's usage (refused_by_reason),
// where the refusal is decided: the quota, the rate limit and the exporter's record
// size by the JetStream exporter's metering, the limits below by this receiver. Both add
// in memory and write the usage bucket once a second (usage.RefusalCounter), so a client
// hammering past a limit costs no write per request. Agent results are not records of the
// month and are not counted.

// refusalFlushInterval is how often the receiver's refusal counts go to KV.
const refusalFlushInterval = time.Second

// tenantShareSetting names the per-account share of max_inflight_bytes in busy's answer;
// that answer is the account's limit ("limits"), the whole budget's is the receiver's.
const tenantShareSetting = "max_inflight_bytes_per_account"

// refusalReason is the usage reason of an answer this receiver decided itself, "" for
// answers that are not an account's limit (bad input, the receiver busy as a whole).
func refusalReason(e *apierror.Error) string {
	switch {
	case e == nil:
		return ""
	case e.Code == apierror.PayloadTooLarge:
		return usage.ReasonTooLarge
	case e.Status == http.StatusServiceUnavailable && strings.Contains(e.Message, tenantShareSetting):
		return usage.ReasonLimits
	}
	return ""
}

// countRefusal counts e's refusal of a raw-records request in its account's usage and
// returns e. n is the request's records when known; a request refused before its body
// was parsed counts as 1.
func (r *ingestReceiver) countRefusal(ctx context.Context, e *apierror.Error, n int) *apierror.Error {
	if reason := refusalReason(e); reason != "" {
		p, _ := principal.FromContext(ctx)
		r.refusals.Add(p.AccountID, p.ProjectID, reason, int64(max(n, 1)), 0)
	}
	return e
}

// startRefusals binds the refusal counter to the usage bucket in the background (the
// meter creates it, with the deployment's replicas), then flushes it each second until
// Shutdown. Counts wait in memory meanwhile.
func (r *ingestReceiver) startRefusals(js jetstream.JetStream) {
	if js == nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.stopRefusals = cancel
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		// The ledger's waits (250 ms doubling to its maximum), for as long as it takes.
		waits := &backoff.ExponentialBackOff{InitialInterval: ledgerRetryInitial, Multiplier: 2, MaxInterval: ledgerRetryMax}
		if _, err := backoff.Retry(ctx, func() (struct{}, error) {
			octx, cancel := context.WithTimeout(ctx, ledgerOpenTimeout)
			defer cancel()
			return struct{}{}, r.refusals.Open(octx, js, 0)
		}, backoff.WithBackOff(waits), backoff.WithMaxElapsedTime(0)); err != nil {
			return // shut down before the bucket could be bound
		}
		r.refusals.Run(ctx, refusalFlushInterval, func(err error) {
			r.settings.Logger.Warn("could not count refused records in the usage bucket; retrying", zap.Error(err))
		})
	}()
}
