package console

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/streams"
)

// auditRecords returns the project's records on the audit stream once the console has
// nothing left to publish.
func (s *logStack) auditRecords(t *testing.T, project string) []streams.AuditRecord {
	t.Helper()
	require.Eventually(t, func() bool { return len(s.api.audit.slots) == 0 }, 10*time.Second, 5*time.Millisecond)
	ctx := context.Background()
	st, err := s.js.Stream(ctx, streams.AuditStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	require.NoError(t, err)
	info, err := st.Info(ctx)
	require.NoError(t, err)
	var out []streams.AuditRecord
	for seq := info.State.FirstSeq; seq > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := st.GetMsg(ctx, seq)
		require.NoError(t, err)
		if m.Subject != streams.AuditSubject(project) {
			continue
		}
		var r streams.AuditRecord
		require.NoError(t, json.Unmarshal(m.Data, &r))
		out = append(out, r)
	}
	return out
}

// Reads with a project key or a console token are recorded on the audit stream under the
// project read, once per credential, surface and hour however often it reads; another
// project's reads are never filed under it.
func TestConsoleReadsAreAuditedOncePerHour(t *testing.T) {
	s := startLogStack(t)
	s.seed(t)
	hour := time.Now().UTC().Truncate(time.Hour)
	for i := 0; i < 3; i++ {
		a := s.get(t, projA+"/deliveries", s.key(projA))
		require.Equal(t, http.StatusOK, a.status, "%s", a.body)
	}
	a := s.get(t, projA+"/deliveries", s.token(t, "viewer", projA))
	require.Equal(t, http.StatusOK, a.status, "%s", a.body)
	a = s.get(t, projB+"/deliveries", s.key(projB))
	require.Equal(t, http.StatusOK, a.status, "%s", a.body)

	recs := s.auditRecords(t, projA)
	require.Len(t, recs, 2, "one per credential and hour: %+v", recs)
	assert.Equal(t, streams.AuditKeyRead, recs[0].Action)
	assert.Equal(t, "ka", recs[0].Actor)
	assert.Equal(t, "deliveries", recs[0].Surface)
	assert.Equal(t, "127.0.0.1", recs[0].Addr)
	assert.Equal(t, hour, recs[0].At.UTC(), "the hour it stands for")
	assert.Equal(t, "user:viewer", recs[1].Actor)
	assert.Equal(t, "console", recs[1].Scope)

	b := s.auditRecords(t, projB)
	require.Len(t, b, 1)
	assert.Equal(t, "kb", b[0].Actor)
	assert.Zero(t, s.api.AuditDropped())
}

// A replay is recorded with who asked (the console token's subject) and from where.
func TestReplayIsAudited(t *testing.T) {
	s := startLogStack(t)
	s.seed(t)
	a := s.post(t, projA, `{"ids":["req_call1"]}`, s.token(t, "owner", projA))
	require.Equal(t, http.StatusAccepted, a.status, "%s", a.body)
	var r replayResult
	require.NoError(t, json.Unmarshal(a.body, &r))

	recs := s.auditRecords(t, projA)
	require.Len(t, recs, 1, "%+v", recs)
	assert.Equal(t, streams.AuditReplay, recs[0].Action)
	assert.Equal(t, "user:owner", recs[0].Actor)
	assert.Equal(t, r.ReplayID, recs[0].Target)
	assert.Equal(t, "127.0.0.1", recs[0].Addr)
	assert.EqualValues(t, 1, recs[0].Details["deliveries"])
	assert.Equal(t, "req_call1", recs[0].Details["delivery_id"])
	assert.Empty(t, s.auditRecords(t, projB))
}

// A person's incident action is recorded on the audit stream: who, from where, which
// incident and what it became; never under another project.
func TestIncidentActionIsAudited(t *testing.T) {
	s := startLogStack(t)
	inc := openIncident(t, incidentStore(t, s.js), projA, "db-down", time.Now().UTC())
	ans := s.act(t, projA, inc.ID, "acknowledge", "", s.token(t, "owner", projA))
	require.Equal(t, http.StatusOK, ans.status, "%s", ans.body)

	var acts []streams.AuditRecord
	for _, r := range s.auditRecords(t, projA) {
		if strings.HasPrefix(r.Action, streams.AuditIncidentPrefix) {
			acts = append(acts, r)
		}
	}
	require.Len(t, acts, 1)
	assert.Equal(t, "incident.acknowledge", acts[0].Action)
	assert.Equal(t, "user:owner", acts[0].Actor)
	assert.Equal(t, inc.ID, acts[0].Target)
	assert.Equal(t, "127.0.0.1", acts[0].Addr)
	assert.Equal(t, "acknowledged", acts[0].Details["status"])
	assert.True(t, streams.IsAuditAction(acts[0].Action), "the control plane takes it")
	assert.Empty(t, s.auditRecords(t, projB))
}
