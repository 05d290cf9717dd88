package console

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/deliverylog"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
)

// An incident-mode project's ledger shows its incident figures and how many events one
// incident call stood for; a project without incident calls has no such ratio.
func TestLedgerShowsIncidentFiguresAndEventsPerCall(t *testing.T) {
	s := startLogStack(t)
	ctx := context.Background()
	require.NoError(t, streams.Ensure(ctx, s.js, streams.RawConfig(projA, streams.DefaultLimits())))
	l, err := deliverylog.OpenLedger(ctx, s.js, time.Hour)
	require.NoError(t, err)
	l.Add(projA, deliverylog.Counters{IncidentEvents: 10, IncidentsOpened: 2, IncidentCalls: 3})
	require.NoError(t, l.Close(ctx))

	a := s.get(t, projA+"/ledger", s.token(t, "member", projA))
	require.Equal(t, http.StatusOK, a.status, "%s", a.body)
	var got map[string]any
	require.NoError(t, json.Unmarshal(a.body, &got))
	assert.EqualValues(t, 10, got["incident_events"])
	assert.EqualValues(t, 2, got["incidents_opened"])
	assert.EqualValues(t, 3, got["incident_calls"])
	assert.EqualValues(t, 3.33, got["events_per_call"])
	assert.Contains(t, got, "balanced")
	assert.Contains(t, got, "received")

	a = s.get(t, projB+"/ledger", s.key(projB))
	require.Equal(t, http.StatusOK, a.status, "%s", a.body)
	got = nil
	require.NoError(t, json.Unmarshal(a.body, &got))
	assert.NotContains(t, got, "events_per_call", "no incident call, no ratio")
	assert.EqualValues(t, 0, got["incident_events"])
}
