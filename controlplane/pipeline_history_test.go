package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// historyStack is a control plane whose pipeline checks are answered by a running
// receiver collector (its configmirror extension serves them, with JetStream to read the
// project's records), not by the in-process checker of startStack.
func historyStack(t *testing.T, db map[string]string) (*stack, *testenv.Collector) {
	t.Helper()
	n := testenv.StartNATS(t)
	env := map[string]string{"NATS_URL": n.URL(), "SVC_JWT_SECRET": testJWTSecret, "SVC_OUTBOUND_ALLOW": "127.0.0.1/32"}
	for k, v := range db {
		env[k] = v
	}
	s := &stack{nats: n, cp: testenv.StartControlPlane(t, env), db: db}
	return s, s.receiver(t)
}

func warningsOf(t *testing.T, r reply) []map[string]any {
	t.Helper()
	raw, ok := r.Body["warnings"].([]any)
	require.True(t, ok, "the answer has warnings: %s", r.Raw)
	out := make([]map[string]any, 0, len(raw))
	for _, w := range raw {
		out = append(out, w.(map[string]any))
	}
	return out
}

// A misspelt field and a number compared with a string are warned
// about at the field's position, in the save and check answers, from the project's
// records; the pipeline is saved anyway.
func TestPipelineFieldWarnings(t *testing.T) {
	databases(t, func(t *testing.T, db map[string]string) {
		s, col := historyStack(t, db)
		cp := s.cp.URL
		owner, _ := s.signup(t, "warn-owner@example.com")
		pid := call(t, cp, "POST", "/api/v1/projects", owner, map[string]string{"name": "warn"}).str("id")
		p := "/api/v1/projects/" + pid
		key := call(t, cp, "POST", p+"/keys", owner, map[string]string{"name": "k"}).str("key")
		require.NotEmpty(t, key)

		// A project without records: nothing to compare with, no warning.
		r := call(t, cp, "POST", p+"/pipeline/validate", owner, map[string]any{"trigger": "severty_number >= 17"})
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Raw)
		assert.Equal(t, true, r.Body["valid"])
		assert.Empty(t, warningsOf(t, r))

		for i := range 3 {
			require.Eventually(t, func() bool {
				req, _ := http.NewRequest("POST", col.HTTP+"/v1/events", strings.NewReader(fmt.Sprintf(`{"severityNumber": %d, "service": "checkout"}`, 17+i)))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("X-API-Key", key)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					return false
				}
				resp.Body.Close()
				return resp.StatusCode == http.StatusAccepted
			}, 10*time.Second, 50*time.Millisecond, "the receiver takes the new key")
		}

		// The misspelt field is saved, with a warning at its place (line 2, column 5).
		trigger := "service == \"checkout\" and\n    severty_number >= 17"
		var saved reply
		require.Eventually(t, func() bool { // the empty catalog above is kept for 10 s at most
			saved = call(t, cp, "PUT", p+"/pipeline", owner, map[string]any{"trigger": trigger})
			return saved.Status == http.StatusOK && len(warningsOf(t, saved)) > 0
		}, 15*time.Second, 250*time.Millisecond, "a save after records arrived warns")
		ws := warningsOf(t, saved)
		require.Len(t, ws, 1, "%s", saved.Raw)
		assert.Equal(t, "trigger", ws[0]["field"])
		assert.Equal(t, map[string]any{"line": float64(2), "column": float64(5)}, ws[0]["position"])
		assert.Contains(t, ws[0]["message"], "no field named severty_number in the project's last 3 records; did you mean severity_number?")
		assert.Equal(t, trigger, call(t, cp, "GET", p+"/pipeline", owner, nil).str("trigger"), "saved anyway")

		// A number field compared with a string, in the check as the dashboard types.
		r = call(t, cp, "POST", p+"/pipeline/validate", owner, map[string]any{"trigger": `severity_number >= "high"`})
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Raw)
		assert.Equal(t, true, r.Body["valid"])
		ws = warningsOf(t, r)
		require.Len(t, ws, 1, "%s", r.Raw)
		assert.Equal(t, map[string]any{"line": float64(1), "column": float64(1)}, ws[0]["position"])
		assert.Contains(t, ws[0]["message"], "compared with a string, but severity_number is a number in the project's records")

		// A correct trigger: valid, no warning.
		r = call(t, cp, "POST", p+"/pipeline/validate", owner, map[string]any{"trigger": `severity_number >= 17 and service == "checkout"`})
		assert.Empty(t, warningsOf(t, r), "%s", r.Raw)

		// PATCH changes only what it carries, and warns as PUT does.
		r = call(t, cp, "PATCH", p+"/pipeline", owner, map[string]any{"group_key": "servce"})
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Raw)
		assert.Equal(t, trigger, r.str("trigger"))
		ws = warningsOf(t, r)
		require.Len(t, ws, 2, "%s", r.Raw)
		assert.Equal(t, "group_key", ws[1]["field"])
		assert.Contains(t, ws[1]["message"], "no field named servce in the project's last 3 records; did you mean service?")

		// Someone else's project: 404, and nothing about its fields.
		other, _ := s.signup(t, "warn-other@example.com")
		r = call(t, cp, "POST", p+"/pipeline/validate", other, map[string]any{"trigger": "severty_number >= 17"})
		assert.Equal(t, http.StatusNotFound, r.Status)
		r = call(t, cp, "PUT", p+"/pipeline", other, map[string]any{"trigger": "severty_number >= 17"})
		assert.Equal(t, http.StatusNotFound, r.Status)
	})
}

func versionNumber(t *testing.T, r reply, k string) int {
	t.Helper()
	f, ok := r.Body[k].(float64)
	require.True(t, ok, "%s in %s", k, r.Raw)
	return int(f)
}

// The pipeline's version counts changes of the pipeline only; each
// version is kept with who saved it, shown, and restored as a new version by owners and
// admins. The agent URL going from empty to set is recorded in
// the mirror entry.
func TestPipelineVersionsAndHistory(t *testing.T) {
	databases(t, func(t *testing.T, db map[string]string) {
		s, _ := historyStack(t, db)
		cp := s.cp.URL
		owner, _ := s.signup(t, "hist-owner@example.com")
		admin, _ := s.signup(t, "hist-admin@example.com")
		member, _ := s.signup(t, "hist-member@example.com")
		stranger, _ := s.signup(t, "hist-stranger@example.com")
		pid := call(t, cp, "POST", "/api/v1/projects", owner, map[string]string{"name": "hist"}).str("id")
		p := "/api/v1/projects/" + pid
		require.Equal(t, http.StatusCreated, call(t, cp, "POST", p+"/members", owner, map[string]string{"email": "hist-admin@example.com", "role": "admin"}).Status)

		g := call(t, cp, "GET", p+"/pipeline", owner, nil)
		assert.Equal(t, 1, versionNumber(t, g, "pipeline_version"))
		assert.Equal(t, "hist-owner@example.com", g.str("saved_by"))
		projectVersion := versionNumber(t, g, "version")

		r := call(t, cp, "PUT", p+"/pipeline", owner, map[string]any{"trigger": `severity_number >= 17`})
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Raw)
		assert.Equal(t, 2, versionNumber(t, r, "pipeline_version"))

		// Destinations and members change the project, not its pipeline.
		require.Equal(t, http.StatusCreated, call(t, cp, "POST", p+"/members", owner, map[string]string{"email": "hist-member@example.com", "role": "member"}).Status)
		require.Equal(t, http.StatusCreated, call(t, cp, "POST", p+"/sinks", owner, map[string]any{"kind": "webhook", "url": "https://hooks.example.com/x"}).Status)
		g = call(t, cp, "GET", p+"/pipeline", owner, nil)
		assert.Equal(t, 2, versionNumber(t, g, "pipeline_version"))
		assert.Greater(t, versionNumber(t, g, "version"), projectVersion+2, "the project's own version still counts every change")
		// Saving the same pipeline is no new version.
		r = call(t, cp, "PUT", p+"/pipeline", owner, map[string]any{"trigger": `severity_number >= 17`})
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Raw)
		assert.Equal(t, 2, versionNumber(t, r, "pipeline_version"))

		// The admin saves version 3, with an agent URL where there was none.
		agent := "http://127.0.0.1:9/agent"
		before := time.Now().Add(-time.Second)
		r = call(t, cp, "PUT", p+"/pipeline", admin, map[string]any{"trigger": `severity_number >= 21`, "agent_endpoint_url": agent})
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Raw)
		assert.Equal(t, 3, versionNumber(t, r, "pipeline_version"))
		assert.Equal(t, "hist-admin@example.com", r.str("saved_by"))
		_, js := testenv.Connect(t, s.nats.URL())
		kv, err := js.KeyValue(t.Context(), mirror.BucketProjects)
		require.NoError(t, err)
		var entry mirror.Project
		require.True(t, get(t, kv, pid, &entry))
		assert.WithinRange(t, entry.AgentSince, before, time.Now().Add(time.Second), "the mirror says since when the agent is called")
		since := entry.AgentSince
		// Changing the URL keeps it; only going from none to one starts it again.
		require.Equal(t, http.StatusOK, call(t, cp, "PUT", p+"/pipeline", admin, map[string]any{"trigger": `severity_number >= 21`, "agent_endpoint_url": agent + "2"}).Status)
		require.True(t, get(t, kv, pid, &entry))
		assert.True(t, since.Equal(entry.AgentSince), "%v != %v", since, entry.AgentSince)

		// History: newest first, who saved each.
		h := call(t, cp, "GET", p+"/pipeline/versions", member, nil)
		require.Equal(t, http.StatusOK, h.Status, "%s", h.Raw)
		var who []string
		var nums []int
		for _, v := range h.Body["versions"].([]any) {
			m := v.(map[string]any)
			who = append(who, fmt.Sprint(m["saved_by"]))
			nums = append(nums, int(m["version"].(float64)))
		}
		assert.Equal(t, []int{4, 3, 2, 1}, nums)
		assert.Equal(t, []string{"hist-admin@example.com", "hist-admin@example.com", "hist-owner@example.com", "hist-owner@example.com"}, who)
		page := call(t, cp, "GET", p+"/pipeline/versions?limit=2", owner, nil)
		assert.Len(t, page.Body["versions"], 2)
		assert.Equal(t, float64(3), page.Body["next_before"])
		page = call(t, cp, "GET", p+"/pipeline/versions?limit=2&before=3", owner, nil)
		assert.Len(t, page.Body["versions"], 2)
		assert.Nil(t, page.Body["next_before"])

		v2 := call(t, cp, "GET", p+"/pipeline/versions/2", member, nil)
		require.Equal(t, http.StatusOK, v2.Status, "%s", v2.Raw)
		assert.Equal(t, `severity_number >= 17`, v2.Body["pipeline"].(map[string]any)["trigger"])
		assert.Equal(t, http.StatusNotFound, call(t, cp, "GET", p+"/pipeline/versions/99", owner, nil).Status)

		// A member cannot restore; someone else's user does not see the project.
		r = call(t, cp, "POST", p+"/pipeline/versions/2/restore", member, nil)
		assert.Equal(t, http.StatusForbidden, r.Status, "%s", r.Raw)
		assert.Equal(t, "forbidden", r.code())
		for _, path := range []string{"/pipeline/versions", "/pipeline/versions/2"} {
			assert.Equal(t, http.StatusNotFound, call(t, cp, "GET", p+path, stranger, nil).Status, path)
		}
		assert.Equal(t, http.StatusNotFound, call(t, cp, "POST", p+"/pipeline/versions/2/restore", stranger, nil).Status)
		assert.Equal(t, 4, versionNumber(t, call(t, cp, "GET", p+"/pipeline", owner, nil), "pipeline_version"), "refused restores change nothing")

		// The owner restores version 2: a new version 5, equal to 2, saved by the owner.
		r = call(t, cp, "POST", p+"/pipeline/versions/2/restore", owner, nil)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Raw)
		assert.Equal(t, 5, versionNumber(t, r, "pipeline_version"))
		assert.Equal(t, "hist-owner@example.com", r.str("saved_by"))
		g = call(t, cp, "GET", p+"/pipeline", owner, nil)
		v5 := call(t, cp, "GET", p+"/pipeline/versions/5", owner, nil)
		assert.Equal(t, v2.Body["pipeline"], v5.Body["pipeline"])
		assert.Equal(t, float64(2), v5.Body["restored_from"])
		assert.Equal(t, `severity_number >= 17`, g.str("trigger"))
		assert.Equal(t, "", g.str("agent_endpoint_url"))
	})
}
