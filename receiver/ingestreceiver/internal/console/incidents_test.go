package console

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/consoletoken"
	"github.com/otelcol-svc/otelcol-svc/internal/incident"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
)

// incidentSettings open an incident at its first event and keep it open for the test.
var incidentSettings = incident.Settings{GroupWait: time.Hour, GroupInterval: time.Minute, ResolveAfter: 24 * time.Hour}

// openIncident opens (or joins) fingerprint's incident in project as the incident
// processor does, and returns it. Its notices count as published (the processor's part,
// not the console's): the outbox is cleared, and they are not on the output stream.
func openIncident(t *testing.T, st *incident.Store, project, fingerprint string, at time.Time) incident.Incident {
	t.Helper()
	inc := openUnpublished(t, st, project, fingerprint, at)
	require.NoError(t, st.Published(context.Background(), project, inc.ID, incident.MaxSeq(inc.Outbox, inc.ID)))
	inc.Outbox = nil
	return inc
}

// openUnpublished opens fingerprint's incident as a processor does that died before
// publishing its notices: they wait in the outbox.
func openUnpublished(t *testing.T, st *incident.Store, project, fingerprint string, at time.Time) incident.Incident {
	t.Helper()
	res, err := st.Apply(context.Background(), project, incidentSettings, incident.Join{
		Fingerprint: fingerprint, BatchKey: fingerprint + at.String(), Events: 2, Title: "Checkout fails: " + fingerprint, At: at})
	require.NoError(t, err)
	return res.Incident
}

func incidentStore(t *testing.T, js jetstream.JetStream) *incident.Store {
	t.Helper()
	st, err := incident.Open(context.Background(), js, 1)
	require.NoError(t, err)
	return st
}

type incidentList struct {
	Incidents []incident.Summary `json:"incidents"`
}

func (s *logStack) incidents(t *testing.T, query string, headers map[string]string) []incident.Summary {
	t.Helper()
	a := s.get(t, projA+"/incidents"+query, headers)
	require.Equal(t, http.StatusOK, a.status, "%s", a.body)
	var l incidentList
	require.NoError(t, json.Unmarshal(a.body, &l))
	require.NotNil(t, l.Incidents, "an empty list is [], not null: %s", a.body)
	return l.Incidents
}

func ids(list []incident.Summary) []string {
	out := []string{}
	for _, s := range list {
		out = append(out, s.ID)
	}
	return out
}

func (s *logStack) act(t *testing.T, project, id, action, body string, headers map[string]string) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.url+"/console/v1/projects/"+project+"/incidents/"+id+"/"+action, strings.NewReader(body))
	require.NoError(t, err)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return answer{status: resp.StatusCode, header: resp.Header, body: b}
}

// notices returns the incident notices on project's output stream: their
// Svc-Incident-Id headers and bodies, oldest first.
func incidentNotices(t *testing.T, js jetstream.JetStream, project string) []map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, streams.OutputStream(project))
	if err != nil {
		require.ErrorIs(t, err, jetstream.ErrStreamNotFound)
		return nil
	}
	info, err := s.Info(ctx)
	require.NoError(t, err)
	var out []map[string]any
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := s.GetMsg(ctx, seq)
		require.NoError(t, err)
		if m.Header.Get(incident.HeaderIncidentID) == "" {
			continue
		}
		var body map[string]any
		require.NoError(t, json.Unmarshal(m.Data, &body))
		body["header_incident_id"] = m.Header.Get(incident.HeaderIncidentID)
		out = append(out, body)
	}
	return out
}

func TestIncidentsListOpenFirstWithFilters(t *testing.T) {
	s := startLogStack(t)
	// Before any incident was ever opened there is no bucket: an empty list, not an error.
	assert.Empty(t, s.incidents(t, "", s.key(projA)))

	st := incidentStore(t, s.js)
	base := time.Now().UTC().Add(-time.Hour)
	a := openIncident(t, st, projA, "db-down", base)
	b := openIncident(t, st, projA, "disk-full", base.Add(time.Minute))
	c := openIncident(t, st, projA, "cert-expired", base.Add(2*time.Minute))
	openIncident(t, st, projB, "db-down", base)
	_, _, err := st.Act(context.Background(), projA, c.ID, incident.ActionResolve, "user:owner", base.Add(3*time.Minute))
	require.NoError(t, err)
	_, _, err = st.Act(context.Background(), projA, a.ID, incident.ActionAcknowledge, "user:owner", base.Add(4*time.Minute))
	require.NoError(t, err)

	all := s.incidents(t, "", s.token(t, "member", projA))
	require.Len(t, all, 3, "project B's incident is not listed")
	assert.Equal(t, c.ID, all[2].ID, "the resolved one comes after the open ones")
	assert.ElementsMatch(t, []string{a.ID, b.ID}, ids(all[:2]))
	assert.Equal(t, []string{c.ID}, ids(s.incidents(t, "?status=resolved", s.key(projA))))
	assert.Equal(t, []string{b.ID}, ids(s.incidents(t, "?status=open", s.key(projA))), "exactly the status asked")
	assert.Equal(t, []string{a.ID}, ids(s.incidents(t, "?status=acknowledged", s.key(projA))))
	assert.Len(t, s.incidents(t, "?limit=1", s.key(projA)), 1)
	assert.Len(t, s.incidents(t, "?limit=5000", s.key(projA)), 3, "a limit over 200 is cut to 200")

	for q, msg := range map[string]string{"?status=firing": "status must be", "?limit=0": "limit must be", "?limit=x": "limit must be"} {
		ans := s.get(t, projA+"/incidents"+q, s.key(projA))
		assert.Equal(t, http.StatusBadRequest, ans.status, q)
		assert.Equal(t, "invalid_body", ans.code(t), q)
		assert.Contains(t, string(ans.body), msg, q)
	}
	ans := s.get(t, projA+"/incidents", s.key(projB))
	assert.Equal(t, http.StatusNotFound, ans.status, "another project's key opens nothing here")

	// The list item is the contract's summary.
	raw := s.get(t, projA+"/incidents?status=acknowledged", s.key(projA))
	var items struct {
		Incidents []map[string]any `json:"incidents"`
	}
	require.NoError(t, json.Unmarshal(raw.body, &items))
	require.Len(t, items.Incidents, 1)
	for _, k := range []string{"id", "fingerprint", "title", "status", "opened_at", "updated_at", "events", "calls", "acknowledged_by", "last_result", "counts"} {
		assert.Contains(t, items.Incidents[0], k)
	}
	assert.NotContains(t, items.Incidents[0], "resolved_at", "omitted while open")
	assert.Equal(t, "user:owner", items.Incidents[0]["acknowledged_by"])
}

func TestIncidentDetailHasTheTimeline(t *testing.T) {
	s := startLogStack(t)
	unknown := incident.ID(incident.FingerprintHash("never"), 1)
	ans := s.get(t, projA+"/incidents/"+unknown, s.key(projA))
	assert.Equal(t, http.StatusNotFound, ans.status, "no bucket yet: %s", ans.body)

	st := incidentStore(t, s.js)
	inc := openIncident(t, st, projA, "db-down", time.Now().UTC())
	ans = s.get(t, projA+"/incidents/"+inc.ID, s.token(t, "viewer", projA))
	require.Equal(t, http.StatusOK, ans.status, "%s", ans.body)
	var d incident.Detail
	require.NoError(t, json.Unmarshal(ans.body, &d))
	assert.Equal(t, inc.ID, d.ID)
	assert.Equal(t, "db-down", d.Fingerprint)
	require.NotEmpty(t, d.Timeline)
	assert.Equal(t, "opened", d.Timeline[0].Type)
	assert.Contains(t, string(ans.body), `"timeline_dropped":0`)

	for name, id := range map[string]string{
		"unknown":   unknown,
		"malformed": "inc_not-an-id",
		"dotted":    "inc_" + strings.Repeat("a", 32) + "_1.x",
	} {
		ans := s.get(t, projA+"/incidents/"+id, s.key(projA))
		assert.Equal(t, http.StatusNotFound, ans.status, "%s: %s", name, ans.body)
		assert.Equal(t, "not_found", ans.code(t), name)
	}
	ans = s.get(t, projB+"/incidents/"+inc.ID, s.key(projB))
	assert.Equal(t, http.StatusNotFound, ans.status, "project A's incident is not in project B")
}

func TestIncidentActionsByOwnerAndAdmin(t *testing.T) {
	s := startLogStack(t)
	st := incidentStore(t, s.js)
	inc := openIncident(t, st, projA, "db-down", time.Now().UTC())

	ans := s.act(t, projA, inc.ID, "acknowledge", "", s.token(t, "owner", projA))
	require.Equal(t, http.StatusOK, ans.status, "%s", ans.body)
	var d incident.Detail
	require.NoError(t, json.Unmarshal(ans.body, &d))
	assert.Equal(t, incident.StatusAcknowledged, d.Status, "the answer is the detail after the action")
	assert.Equal(t, "user:owner", d.AcknowledgedBy)
	assert.Equal(t, "acknowledged", d.Timeline[len(d.Timeline)-1].Type)
	got, err := st.Get(context.Background(), projA, inc.ID)
	require.NoError(t, err)
	assert.Equal(t, incident.StatusAcknowledged, got.Status, "stored")

	// The destinations are told: a notice on the output stream names the incident.
	var notices []map[string]any
	require.Eventually(t, func() bool { notices = incidentNotices(t, s.js, projA); return len(notices) == 1 }, 5*time.Second, 20*time.Millisecond)
	assert.Equal(t, inc.ID, notices[0]["header_incident_id"])
	assert.Equal(t, "acknowledged", notices[0]["transition"])
	assert.Equal(t, "user:owner", notices[0]["by"])

	ans = s.act(t, projA, inc.ID, "mute", "{}", s.token(t, "admin", projA))
	require.Equal(t, http.StatusOK, ans.status, "%s", ans.body)
	assert.Contains(t, string(ans.body), `"muted_until"`)
	ans = s.act(t, projA, inc.ID, "resolve", " { } ", s.token(t, "admin", projA))
	require.Equal(t, http.StatusOK, ans.status, "%s", ans.body)
	require.NoError(t, json.Unmarshal(ans.body, &d))
	assert.Equal(t, incident.StatusResolved, d.Status)
	require.NotNil(t, d.ResolvedAt)

	for _, action := range []string{"acknowledge", "mute"} {
		ans = s.act(t, projA, inc.ID, action, "", s.token(t, "owner", projA))
		assert.Equal(t, http.StatusConflict, ans.status, "%s: %s", action, ans.body)
		assert.Equal(t, "incident_resolved", ans.code(t), action)
	}
	ans = s.act(t, projA, inc.ID, "reinvestigate", "", s.token(t, "owner", projA))
	require.Equal(t, http.StatusOK, ans.status, "reinvestigating a resolved incident calls the agent again: %s", ans.body)
	got, err = st.Get(context.Background(), projA, inc.ID)
	require.NoError(t, err)
	assert.True(t, got.ReinvestigateRequested)

	for name, id := range map[string]string{"unknown": incident.ID(incident.FingerprintHash("x"), 1), "malformed": "nope"} {
		ans = s.act(t, projA, id, "resolve", "", s.token(t, "owner", projA))
		assert.Equal(t, http.StatusNotFound, ans.status, "%s: %s", name, ans.body)
		assert.Equal(t, "not_found", ans.code(t), name)
	}
	ans = s.act(t, projA, inc.ID, "escalate", "", s.token(t, "owner", projA))
	assert.Equal(t, http.StatusNotFound, ans.status, "no such action: %s", ans.body)
}

// An action is recorded by the email the console token names (the people around the
// on-call know them by it); a token without one (minted before tokens carried it) by the
// user id, as TestIncidentActionsByOwnerAndAdmin shows.
func TestIncidentActionIsByTheTokensEmail(t *testing.T) {
	s := startLogStack(t)
	st := incidentStore(t, s.js)
	inc := openIncident(t, st, projA, "db-down", time.Now().UTC())
	tok, err := consoletoken.Issue(s.priv, consoletoken.Claims{UserID: "admin", ProjectID: projA, Grant: s.grants["admin"], Email: "ana@example.com"}, time.Minute, time.Now())
	require.NoError(t, err)

	ans := s.act(t, projA, inc.ID, "acknowledge", "", map[string]string{"Authorization": "Bearer " + tok})
	require.Equal(t, http.StatusOK, ans.status, "%s", ans.body)
	var d incident.Detail
	require.NoError(t, json.Unmarshal(ans.body, &d))
	assert.Equal(t, "user:ana@example.com", d.AcknowledgedBy)
	assert.Equal(t, "user:ana@example.com", d.Timeline[len(d.Timeline)-1].By)
	var notices []map[string]any
	require.Eventually(t, func() bool { notices = incidentNotices(t, s.js, projA); return len(notices) == 1 }, 5*time.Second, 20*time.Millisecond)
	assert.Equal(t, "user:ana@example.com", notices[0]["by"], "chat destinations say who acknowledged")
}

// An action's notices are published at once and cleared from the incident's outbox, so
// the processor's ticker does not publish them again; a notice another process left there
// unpublished goes first (the Slack root comes from the opened notice), not cleared
// unpublished.
func TestIncidentActionClearsTheOutbox(t *testing.T) {
	s := startLogStack(t)
	st := incidentStore(t, s.js)
	inc := openUnpublished(t, st, projA, "db-down", time.Now().UTC())
	require.Len(t, inc.Outbox, 1, "the opened notice waits")

	ans := s.act(t, projA, inc.ID, "acknowledge", "", s.token(t, "owner", projA))
	require.Equal(t, http.StatusOK, ans.status, "%s", ans.body)
	got, err := st.Get(context.Background(), projA, inc.ID)
	require.NoError(t, err)
	assert.Empty(t, got.Outbox, "published, so cleared")
	notices := incidentNotices(t, s.js, projA)
	require.Len(t, notices, 2)
	assert.Equal(t, "opened", notices[0]["transition"], "the waiting notice first")
	assert.Equal(t, "acknowledged", notices[1]["transition"])
}

// A notice that cannot be published (the output stream refuses it) does not fail the
// action, which is stored: the notice waits in the outbox for the processor's ticker.
func TestIncidentActionWhoseNoticeCannotBePublished(t *testing.T) {
	s := startLogStack(t)
	st := incidentStore(t, s.js)
	inc := openIncident(t, st, projA, "db-down", time.Now().UTC())
	// The project's output stream exists and takes nothing more.
	cfg := streams.OutputConfig(projA, streams.DefaultLimits())
	cfg.MaxMsgs, cfg.Discard = 1, jetstream.DiscardNew
	_, err := s.js.CreateStream(context.Background(), cfg)
	require.NoError(t, err)
	_, err = s.js.Publish(context.Background(), streams.OutputSubject(projA), []byte(`{}`))
	require.NoError(t, err)

	ans := s.act(t, projA, inc.ID, "acknowledge", "", s.token(t, "owner", projA))
	require.Equal(t, http.StatusOK, ans.status, "the action is made: %s", ans.body)
	got, err := st.Get(context.Background(), projA, inc.ID)
	require.NoError(t, err)
	assert.Equal(t, incident.StatusAcknowledged, got.Status)
	require.Len(t, got.Outbox, 1, "its notice waits to be published")
	assert.Equal(t, "acknowledged", got.Outbox[0].Transition)
	assert.Empty(t, incidentNotices(t, s.js, projA))
}

func TestIncidentActionsAreForOwnersAndAdminsOnly(t *testing.T) {
	s := startLogStack(t)
	st := incidentStore(t, s.js)
	inc := openIncident(t, st, projA, "db-down", time.Now().UTC())
	for name, h := range map[string]map[string]string{
		"member token":      s.token(t, "member", projA),
		"viewer token":      s.token(t, "viewer", projA),
		"project API key":   s.key(projA),
		"API key as Bearer": {"Authorization": "Bearer " + s.keyA},
	} {
		for _, action := range IncidentActions {
			ans := s.act(t, projA, inc.ID, action, "", h)
			assert.Equal(t, http.StatusForbidden, ans.status, "%s %s: %s", name, action, ans.body)
			assert.Equal(t, "forbidden", ans.code(t), name)
			assert.Contains(t, string(ans.body), "owner or an admin", name)
			assert.NotContains(t, string(ans.body), "replay", "%s: the message is about incidents", name)
		}
	}
	ans := s.act(t, projA, inc.ID, "resolve", "", nil)
	assert.Equal(t, http.StatusUnauthorized, ans.status, "%s", ans.body)
	ans = s.act(t, projA, inc.ID, "resolve", "", s.token(t, "owner_b", projB))
	assert.Equal(t, http.StatusNotFound, ans.status, "another project's owner: %s", ans.body)

	got, err := st.Get(context.Background(), projA, inc.ID)
	require.NoError(t, err)
	assert.Equal(t, incident.StatusOpen, got.Status, "a refused action changes nothing")
	assert.Empty(t, got.AcknowledgedBy)
	assert.Empty(t, incidentNotices(t, s.js, projA), "and tells no destination")
}

func TestIncidentActionBodyAndMethod(t *testing.T) {
	s := startLogStack(t)
	st := incidentStore(t, s.js)
	inc := openIncident(t, st, projA, "db-down", time.Now().UTC())
	owner := s.token(t, "owner", projA)
	for _, body := range []string{`{"note":"x"}`, `[]`, `null`, `"ack"`, `{`} {
		ans := s.act(t, projA, inc.ID, "acknowledge", body, owner)
		assert.Equal(t, http.StatusBadRequest, ans.status, "%q: %s", body, ans.body)
		assert.Equal(t, "invalid_body", ans.code(t), body)
	}
	ans := s.act(t, projA, inc.ID, "acknowledge", `{"x":"`+strings.Repeat("a", maxActionBody)+`"}`, owner)
	assert.Equal(t, http.StatusRequestEntityTooLarge, ans.status, "%s", ans.body)
	got, err := st.Get(context.Background(), projA, inc.ID)
	require.NoError(t, err)
	assert.Equal(t, incident.StatusOpen, got.Status, "a refused body changes nothing")

	a := do(t, http.MethodGet, s.url+"/console/v1/projects/"+projA+"/incidents/"+inc.ID+"/acknowledge", owner)
	assert.Equal(t, http.StatusMethodNotAllowed, a.status)
	assert.Equal(t, "POST, OPTIONS", a.header.Get("Allow"))
	a = do(t, http.MethodOptions, s.url+"/console/v1/projects/"+projA+"/incidents/"+inc.ID+"/resolve", map[string]string{"Origin": dashboardOrigin})
	assert.Equal(t, http.StatusNoContent, a.status)
	assert.Equal(t, "POST, OPTIONS", a.header.Get("Access-Control-Allow-Methods"))
	a = do(t, http.MethodPost, s.url+"/console/v1/projects/"+projA+"/incidents", owner)
	assert.Equal(t, http.StatusMethodNotAllowed, a.status, "the list is GET only")
}
