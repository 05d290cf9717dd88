package console

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelinecfg"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
)

type incidentDryRun struct {
	Mode      string            `json:"mode"`
	Evaluated int               `json:"evaluated"`
	Matched   int               `json:"matched"`
	Incidents *int              `json:"incidents"`
	Calls     []json.RawMessage `json:"calls"`
}

type incidentCallBody struct {
	Incident struct {
		ID          string `json:"id"`
		Fingerprint string `json:"fingerprint"`
		Title       string `json:"title"`
		Status      string `json:"status"`
	} `json:"incident"`
	Reason string            `json:"reason"`
	Events []json.RawMessage `json:"events"`
	Window []json.RawMessage `json:"window"`
}

// Incident mode over the project's stored records: the answer says how many incidents
// would open and the calls their lifecycle makes (opening, and the resolution by
// resolve_when), with the events and context of each fingerprint.
func TestDryRunIncidentMode(t *testing.T) {
	c := startConsole(t)
	recs := []string{
		`{"svc":"checkout","level":"error","msg":"timeout"}`,
		`{"svc":"checkout","level":"info","msg":"retrying"}`,
		`{"svc":"cart","level":"error","msg":"disk full"}`,
		`{"svc":"checkout","level":"error","msg":"timeout again"}`,
		`{"svc":"checkout","level":"info","msg":"recovered"}`,
	}
	c.fill(t, "p1", len(recs), func(i int) string { return recs[i] }, noSource)
	a := postJSON(t, dryRunURL(c.url, "p1"), `{"pipeline": {"mode": "incident",
		"trigger": "event[\"level\"] == \"error\"", "fingerprint": "event[\"svc\"]",
		"resolve_when": "event[\"msg\"] == \"recovered\"", "group_wait": "0s"}}`, map[string]string{"X-API-Key": "key-p1"})
	require.Equal(t, http.StatusOK, a.status, "%s", a.body)
	var r incidentDryRun
	require.NoError(t, json.Unmarshal(a.body, &r), "%s", a.body)
	assert.Equal(t, "incident", r.Mode)
	assert.Equal(t, 5, r.Evaluated)
	assert.Equal(t, 3, r.Matched)
	require.NotNil(t, r.Incidents, "%s", a.body)
	assert.Equal(t, 2, *r.Incidents)

	var got []string
	var bodies []incidentCallBody
	for _, raw := range r.Calls {
		var b incidentCallBody
		require.NoError(t, json.Unmarshal(raw, &b), "%s", raw)
		bodies = append(bodies, b)
		got = append(got, b.Incident.Fingerprint+":"+b.Reason)
	}
	// The stored times are a few milliseconds apart: each record's moment comes after
	// the opening calls due (group_wait 0) before it; checkout resolves at its
	// "recovered", cart 30 minutes after its last event.
	assert.Equal(t, []string{"checkout:opened", "cart:opened", "checkout:resolved", "cart:resolved"}, got)
	assert.Equal(t, "timeout", bodies[0].Incident.Title)
	require.Len(t, bodies[0].Events, 1)
	assert.Len(t, bodies[0].Window, 1, "checkout's context so far: its own event")
	require.Len(t, bodies[2].Events, 1, "the event since the opening call")
	assert.JSONEq(t, recs[3], string(bodies[2].Events[0]))
	assert.Len(t, bodies[2].Window, 4, "every checkout record: the context filter is empty")
	assert.Equal(t, "resolved", bodies[2].Incident.Status)

	// Legacy mode says nothing of incidents.
	a = postJSON(t, dryRunURL(c.url, "p1"), `{"pipeline": {"trigger": "event[\"level\"] == \"error\""}}`, map[string]string{"X-API-Key": "key-p1"})
	require.Equal(t, http.StatusOK, a.status)
	assert.NotContains(t, string(a.body), `"incidents"`)
}

// A bad incident setting is the control plane's 400 invalid_pipeline, naming the field.
func TestDryRunRefusesBadIncidentSettings(t *testing.T) {
	c := startConsole(t)
	key := map[string]string{"X-API-Key": "key-p1"}
	for body, field := range map[string]string{
		`{"pipeline": {"mode": "incidents"}}`:                                "mode",
		`{"pipeline": {"mode": "legacy", "window_enabled": true}}`:           "mode",
		`{"pipeline": {"mode": "incident", "group_wait": "2h"}}`:             "group_wait",
		`{"pipeline": {"mode": "incident", "group_interval": "soon"}}`:       "group_interval",
		`{"pipeline": {"mode": "incident", "resolve_after": "0s"}}`:          "resolve_after",
		`{"pipeline": {"mode": "incident", "reopen_within": "8760h"}}`:       "reopen_within",
		`{"pipeline": {"mode": "incident", "fingerprint": "event[\"svc\""}}`: "fingerprint",
		`{"pipeline": {"mode": "incident", "resolve_when": "body =="}}`:      "resolve_when",
	} {
		a := postJSON(t, dryRunURL(c.url, "p1"), body, key)
		require.Equal(t, http.StatusBadRequest, a.status, "%s: %s", body, a.body)
		var e struct {
			Error struct {
				Code    string `json:"code"`
				Message string `json:"message"`
				Field   string `json:"field"`
			} `json:"error"`
		}
		require.NoError(t, json.Unmarshal(a.body, &e), "%s", a.body)
		assert.Equal(t, "invalid_pipeline", e.Error.Code, body)
		assert.Equal(t, field, e.Error.Field, body)
		assert.Contains(t, e.Error.Message, field+": ", body)
	}
}

// Over chosen stored times: with no new event for resolve_after, the incident resolves
// and the next error opens the fingerprint's next incident.
func TestDryRunIncidentResolveAfter(t *testing.T) {
	comp, err := pipelinecfg.Compile(mirror.Pipeline{Mode: mirror.ModeIncident, ResolveAfter: "1m", GroupWait: "10s"})
	require.NoError(t, err)
	base := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	var recs []storedRecord
	for i, at := range []time.Duration{0, 20 * time.Second, 5 * time.Minute} {
		recs = append(recs, storedRecord{seq: uint64(i + 1), time: base.Add(at), signal: "event", data: []byte(fmt.Sprintf(`{"n":%d}`, i))})
	}
	ans := evaluate(context.Background(), comp, recs, dryRunLimits{evalTime: time.Minute, callBytes: 1 << 20, recordBytes: 1 << 20, errors: 10})
	require.NotNil(t, ans.Incidents)
	assert.Equal(t, 2, *ans.Incidents)
	var reasons []string
	for _, raw := range ans.Calls {
		var b incidentCallBody
		require.NoError(t, json.Unmarshal(raw, &b))
		reasons = append(reasons, b.Incident.ID[len(b.Incident.ID)-1:]+":"+b.Reason)
	}
	// 1: opened at 10s, resolved at 1m20s (no event for 1m since 20s) with its call;
	// 2: opened at 5m10s, resolved at 6m.
	assert.Equal(t, []string{"1:opened", "1:resolved", "2:opened", "2:resolved"}, reasons)
}
