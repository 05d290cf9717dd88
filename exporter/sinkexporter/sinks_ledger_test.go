package sinkexporter

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/deliverylog"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
)

// A sink dead letter the ledger cannot count is not
// settled: the exporter fails the result, so the receiver does not ack it and it is
// delivered (and dead-lettered, counted then) again. Before, it was acked anyway and
// showed as delivered in figures the ledger said were exact. Here the ledger's bucket
// is gone when the second result is dead-lettered.
func TestSinkDeadLetterTheLedgerCannotCountIsNotSettled(t *testing.T) {
	e := newEnv(t)
	hook := newAgent(t, nil)
	e.putProject(t, sinkProject("dlc", mirror.Sink{ID: "s_int", Kind: "webhook", URL: hook.srv.URL}))
	// Internal addresses are refused: every result is dead-lettered at once.
	r := e.start(t, func(c *Config) { c.AllowCIDRs = "" })

	require.NoError(t, consumeResult(r, "dlc", "s_int", `{"text":"x"}`), "dead-lettered and counted: settled")
	require.NoError(t, e.js.DeleteKeyValue(context.Background(), deliverylog.LedgerBucket))
	err := consumeResult(r, "dlc", "s_int", `{"text":"y"}`)
	require.Error(t, err, "a dead letter not counted must not be acked")
	assert.Contains(t, err.Error(), "delivered again")
	assert.Empty(t, hook.requests())
}
