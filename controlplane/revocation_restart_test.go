package main

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRevocationSurvivesARestartWhileNATSIsDown: a personal access token revoked while
// NATS is unreachable, by a control plane that is then restarted before NATS comes back,
// still ends the console tokens it minted: the restarted control plane publishes the
// revocation with the rest of the configuration, and the receiver refuses the token
// within a second of that. A revocation published before the outage stays in force
// through the restarted control plane's full publish, which prunes what the database
// does not know.
func TestRevocationSurvivesARestartWhileNATSIsDown(t *testing.T) {
	databases(t, func(t *testing.T, db map[string]string) {
		s := startStack(t, db)
		col := s.receiver(t)
		cp := s.cp.URL
		login, _ := s.signup(t, "owner@example.com")
		pid := call(t, cp, "POST", "/api/v1/projects", login, map[string]string{"name": "outage"}).str("id")
		p := "/api/v1/projects/" + pid

		pat := func(name string) (id, consoleToken string) {
			t.Helper()
			r := call(t, cp, "POST", "/api/v1/tokens", login, map[string]any{"name": name})
			require.Equal(t, http.StatusCreated, r.Status, "%s", r.Raw)
			m := call(t, cp, "POST", p+"/console-token", r.str("token"), nil)
			require.Equal(t, http.StatusOK, m.Status, "%s", m.Raw)
			return r.str("id"), m.str("token")
		}
		beforeID, byBefore := pat("revoked before the outage")
		duringID, byDuring := pat("revoked during the outage")
		m := call(t, cp, "POST", p+"/console-token", login, nil)
		require.Equal(t, http.StatusOK, m.Status, "%s", m.Raw)
		byLogin := m.str("token")
		for _, tok := range []string{byBefore, byDuring, byLogin} {
			require.Eventually(t, func() bool { st, _ := consoleRead(t, col.HTTP, pid, tok); return st == http.StatusOK },
				10*time.Second, 20*time.Millisecond, "a console token reads the project")
		}

		require.Equal(t, http.StatusNoContent, call(t, cp, "DELETE", "/api/v1/tokens/"+beforeID, login, nil).Status)
		require.Eventually(t, func() bool { st, _ := consoleRead(t, col.HTTP, pid, byBefore); return st == http.StatusUnauthorized },
			time.Second, 5*time.Millisecond, "a revocation published at once ends the token")

		s.nats.Stop()
		require.Eventually(t, func() bool { return call(t, cp, "GET", "/readyz", "", nil).Status == http.StatusServiceUnavailable },
			10*time.Second, 10*time.Millisecond, "the control plane notices NATS is gone")
		r := call(t, cp, "DELETE", "/api/v1/tokens/"+duringID, login, nil)
		require.Equal(t, http.StatusNoContent, r.Status, "revoking needs only the database: %s", r.Raw)

		// A new control plane over the same database, before NATS is back. A short check
		// interval bounds its retries of the first publish to a second; no prune grace
		// lets its publish delete whatever the database does not know.
		s.cp.Kill()
		s.cp.Env["SVC_MIRROR_CHECK_INTERVAL"] = "1s"
		s.cp.Env["SVC_MIRROR_PRUNE_GRACE"] = "0s"
		s.cp.Start()
		require.Equal(t, http.StatusServiceUnavailable, call(t, cp, "GET", "/readyz", "", nil).Status, "not ready without NATS")

		s.nats.Start(t)
		var synced time.Time
		require.Eventually(t, func() bool {
			if call(t, cp, "GET", "/readyz", "", nil).Status != http.StatusOK {
				return false
			}
			synced = time.Now()
			return true
		}, 30*time.Second, 10*time.Millisecond, "the control plane publishes the configuration once NATS is back")

		for {
			st, code := consoleRead(t, col.HTTP, pid, byDuring)
			if st == http.StatusUnauthorized {
				assert.Equal(t, "invalid_token", code)
				t.Logf("refused %s after the control plane's publish", time.Since(synced).Round(time.Millisecond))
				break
			}
			require.Less(t, time.Since(synced), time.Second,
				"the console token of the credential revoked during the outage still reads the project (status %d)", st)
			time.Sleep(5 * time.Millisecond)
		}
		st, _ := consoleRead(t, col.HTTP, pid, byBefore)
		assert.Equal(t, http.StatusUnauthorized, st, "the revocation from before the outage is still in force")
		st, _ = consoleRead(t, col.HTTP, pid, byLogin)
		assert.Equal(t, http.StatusOK, st, "a console token of a credential never revoked still reads")
	})
}
