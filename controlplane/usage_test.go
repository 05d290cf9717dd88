package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/usage"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// startUsageStack is a stack whose control plane has SVC_FREE_TIER_EVENTS=limit.
func startUsageStack(t *testing.T, db map[string]string, limit int64) *stack {
	t.Helper()
	env := map[string]string{"SVC_FREE_TIER_EVENTS": strconv.FormatInt(limit, 10)}
	for k, v := range db {
		env[k] = v
	}
	return startStack(t, env)
}

// meter is a receiver's usage meter, in this process, on the stack's NATS: it counts
// exactly as the receivers do.
func (s *stack) meter(t *testing.T, limit int64) *usage.Meter {
	t.Helper()
	_, js := testenv.Connect(t, s.nats.URL())
	m, err := usage.Open(context.Background(), js, usage.Config{DefaultLimit: limit, FlushInterval: 20 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close(context.Background()) })
	return m
}

// send reserves and commits requests of size records until n records were offered;
// it returns how many were accepted and how many requests were refused for the quota.
func send(t *testing.T, m *usage.Meter, account, project string, n, size int64) (accepted int64, refused int) {
	t.Helper()
	for offered := int64(0); offered < n; offered += size {
		r, err := m.Reserve(context.Background(), account, project, min(size, n-offered))
		var qe *usage.QuotaError
		if errors.As(err, &qe) {
			refused++
			continue
		}
		require.NoError(t, err)
		r.Commit()
		accepted += min(size, n-offered)
	}
	return accepted, refused
}

// The usage API answers what the receivers' meters counted: the account's month over the
// projects it owns (by name), per day, what is left and the 80%/100% notices; a project's
// month for its members only. Numbers a client cannot misread for an unlimited account.
func TestUsageAPIAgreesWithTheMeter(t *testing.T) {
	databases(t, func(t *testing.T, db map[string]string) {
		const limit = 1000
		s := startUsageStack(t, db, limit)
		cp := s.cp.URL
		owner, ownerID := s.signup(t, "usage-owner@example.com")
		member, _ := s.signup(t, "usage-member@example.com")
		stranger, _ := s.signup(t, "usage-stranger@example.com")
		shop := call(t, cp, "POST", "/api/v1/projects", owner, map[string]string{"name": "shop"}).str("id")
		blog := call(t, cp, "POST", "/api/v1/projects", owner, map[string]string{"name": "blog"}).str("id")
		require.Equal(t, http.StatusCreated, call(t, cp, "POST", "/api/v1/projects/"+shop+"/members", owner, map[string]string{"email": "usage-member@example.com"}).Status)

		// Nothing sent yet: zeros, the limit, everything left.
		r := call(t, cp, "GET", "/api/v1/usage", owner, nil)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Raw)
		assert.Equal(t, usage.Month(time.Now()), r.str("month"))
		assert.EqualValues(t, 0, r.Body["events"])
		assert.EqualValues(t, limit, r.Body["limit"])
		assert.EqualValues(t, limit, r.Body["remaining"])
		assert.Equal(t, false, r.Body["unlimited"])
		assert.Len(t, r.Body["projects"], 2, "owned projects are listed before they have events")
		assert.Equal(t, []any{}, r.Body["notices"])

		m := s.meter(t, limit)
		shopN, refused := send(t, m, ownerID, shop, 300, 50)
		require.Zero(t, refused)
		blogN, refused := send(t, m, ownerID, blog, 800, 50)
		require.Positive(t, refused, "the account went past its limit")
		require.NoError(t, m.Flush(context.Background()))
		total := shopN + blogN

		// Leases settle in the background within a TTL; the per-day counts with Flush.
		var u reply
		require.Eventually(t, func() bool {
			u = call(t, cp, "GET", "/api/v1/usage", owner, nil)
			return u.Status == http.StatusOK && u.Body["events"] == float64(total) && len(u.Body["notices"].([]any)) == 2
		}, 5*time.Second, 20*time.Millisecond, "usage never showed the meter's %d records and two notices: %s", total, u.Raw)
		assert.EqualValues(t, 0, u.Body["pending"])
		assert.EqualValues(t, limit-total, u.Body["remaining"])
		byName := map[string]map[string]any{}
		for _, p := range u.Body["projects"].([]any) {
			pm := p.(map[string]any)
			byName[pm["name"].(string)] = pm
		}
		blogRefused := float64(50 * refused) // each refused request held 50 records
		assert.Equal(t, map[string]any{"id": shop, "name": "shop", "events": float64(shopN), "refused": float64(0)}, byName["shop"])
		assert.Equal(t, map[string]any{"id": blog, "name": "blog", "events": float64(blogN), "refused": blogRefused}, byName["blog"])
		today := time.Now().UTC().Format("2006-01-02")
		assert.Equal(t, []any{map[string]any{"date": today, "events": float64(total)}}, u.Body["days"])
		var pcts []float64
		for _, n := range u.Body["notices"].([]any) {
			nm := n.(map[string]any)
			pcts = append(pcts, nm["percent"].(float64))
			assert.Contains(t, nm["message"], "of this month's 1,000 events used; resets "+usage.ResetAt(time.Now()).Format("2006-01-02"))
		}
		assert.ElementsMatch(t, []float64{80, 100}, pcts)

		// A project's usage: members (not only the owner) see it with the owner's limit.
		for _, tok := range []string{owner, member} {
			p := call(t, cp, "GET", "/api/v1/projects/"+shop+"/usage", tok, nil)
			require.Equal(t, http.StatusOK, p.Status, "%s", p.Raw)
			assert.EqualValues(t, shopN, p.Body["events"])
			assert.EqualValues(t, limit, p.Body["limit"])
			assert.Equal(t, []any{map[string]any{"date": today, "events": float64(shopN)}}, p.Body["days"])
		}
		// Others: 404, exactly as for a project that does not exist.
		for _, c := range []struct{ token, project string }{{stranger, shop}, {member, blog}, {owner, "p_0000000000000000"}} {
			p := call(t, cp, "GET", "/api/v1/projects/"+c.project+"/usage", c.token, nil)
			assert.Equal(t, http.StatusNotFound, p.Status, "%s", p.Raw)
			assert.Equal(t, "project not found", p.message())
		}
		// A member's account usage is their own (they own nothing): none of the owner's.
		mu := call(t, cp, "GET", "/api/v1/usage", member, nil)
		require.Equal(t, http.StatusOK, mu.Status)
		assert.EqualValues(t, 0, mu.Body["events"])
		assert.Equal(t, []any{}, mu.Body["projects"])
		assert.Equal(t, http.StatusUnauthorized, call(t, cp, "GET", "/api/v1/usage", "", nil).Status)

		// A deleted project's records still count for the month, and are shown so.
		require.Equal(t, http.StatusNoContent, call(t, cp, "DELETE", "/api/v1/projects/"+blog, owner, nil).Status)
		u = call(t, cp, "GET", "/api/v1/usage", owner, nil)
		assert.EqualValues(t, total, u.Body["events"])
		assert.Contains(t, u.Body["projects"], map[string]any{"id": blog, "name": nil, "events": float64(blogN), "refused": blogRefused, "deleted": true})

		// Unlimited: no number stands for it.
		out, code := accountsCLI(t, s, "set-limit", "usage-owner@example.com", "0")
		require.Equal(t, 0, code, out)
		u = call(t, cp, "GET", "/api/v1/usage", owner, nil)
		assert.Equal(t, true, u.Body["unlimited"])
		assert.Nil(t, u.Body["limit"])
		assert.Nil(t, u.Body["remaining"])
		assert.Contains(t, string(u.Raw), `"remaining":null`, "remaining is present, as null")
		p := call(t, cp, "GET", "/api/v1/projects/"+shop+"/usage", member, nil)
		assert.Equal(t, true, p.Body["unlimited"])
		assert.Nil(t, p.Body["limit"])
	})
}

// accountsCLI runs `controlplane accounts args...` (the binary the stack runs) with the
// control plane's settings, and returns its output and exit status.
func accountsCLI(t *testing.T, s *stack, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(testenv.BuildPackage(t, "./controlplane"), append([]string{"accounts"}, args...)...)
	cmd.Env = os.Environ()
	for k, v := range s.cp.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return out.String(), exit.ExitCode()
	}
	require.NoError(t, err)
	return out.String(), 0
}

// An operator raises a blocked account with `accounts set-limit`, and every receiver's
// meter takes requests again within a second; `accounts list` shows limits and counts;
// mistakes are refused with a message and an exit status.
func TestAccountsSetLimitAndList(t *testing.T) {
	const limit = 100
	s := startUsageStack(t, map[string]string{"SVC_DATA_DIR": t.TempDir()}, limit)
	cp := s.cp.URL
	owner, ownerID := s.signup(t, "blocked@example.com")
	s.signup(t, "quiet@example.com")
	pid := call(t, cp, "POST", "/api/v1/projects", owner, map[string]string{"name": "busy"}).str("id")

	// Two receivers' meters; the account uses up its month on one of them.
	m1, m2 := s.meter(t, limit), s.meter(t, limit)
	accepted, refused := send(t, m1, ownerID, pid, 120, 10)
	require.EqualValues(t, limit, accepted)
	require.Equal(t, 2, refused)
	_, err := m2.Reserve(context.Background(), ownerID, pid, 1)
	var qe *usage.QuotaError
	require.ErrorAs(t, err, &qe, "the other receiver refuses too")

	out, code := accountsCLI(t, s, "set-limit", "Blocked@Example.com", "150")
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, "blocked@example.com: limit 150 (was default (100))")
	set := time.Now()
	for _, m := range []*usage.Meter{m1, m2} {
		require.Eventually(t, func() bool {
			r, err := m.Reserve(context.Background(), ownerID, pid, 10)
			if err == nil {
				r.Commit()
			}
			return err == nil
		}, time.Second, 5*time.Millisecond, "a receiver still refuses a second after set-limit")
	}
	t.Logf("both meters took requests again %v after set-limit returned", time.Since(set))

	require.NoError(t, m1.Flush(context.Background()))
	require.NoError(t, m2.Flush(context.Background()))
	var listed string
	require.Eventually(t, func() bool {
		out, code := accountsCLI(t, s, "list")
		listed = out
		return code == 0 && listedRow(out, "blocked@example.com") == "blocked@example.com 150 120 1 default (10)"
	}, 5*time.Second, 100*time.Millisecond, "list never showed the new limit and 120 events:\n%s", listed)
	assert.Equal(t, "quiet@example.com default (100) 0 0 default (10)", listedRow(listed, "quiet@example.com"))
	assert.Contains(t, listed, "EVENTS "+usage.Month(time.Now()))

	// Back to the default: the account is blocked again (120 > 100).
	out, code = accountsCLI(t, s, "set-limit", "blocked@example.com", "default")
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, "limit default (100) (was 150)")
	require.Eventually(t, func() bool { return m1.Limit(ownerID) == limit }, time.Second, 5*time.Millisecond)
	out, _ = accountsCLI(t, s, "list")
	assert.Equal(t, "blocked@example.com default (100) 120 1 default (10)", listedRow(out, "blocked@example.com"))

	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"set-limit", "nobody@example.com", "10"}, 1, "no account with the email nobody@example.com"},
		{[]string{"set-limit", "blocked@example.com", "-5"}, 2, `got "-5"`},
		{[]string{"set-limit", "blocked@example.com", "lots"}, 2, `got "lots"`},
		{[]string{"set-limit", "blocked@example.com"}, 2, "set-limit takes an email and a number"},
		{[]string{"set-limit", "not-an-email", "10"}, 2, `"not-an-email" is not an email address`},
		{[]string{"set-limit", "blocked@example.com", "--projects"}, 2, "--projects takes a number"},
		{[]string{"set-limit", "blocked@example.com", "--projects", "-1"}, 2, `got "-1"`},
		{[]string{"set-limit", "nobody@example.com", "--projects", "3"}, 1, "no account with the email nobody@example.com"},
		{[]string{"remove"}, 2, `unknown command "remove"`},
		{nil, 2, "name a command"},
	} {
		out, code := accountsCLI(t, s, c.args...)
		assert.Equal(t, c.code, code, "%v: %s", c.args, out)
		assert.Contains(t, out, c.says, c.args)
	}
	assert.Equal(t, int64(limit), m1.Limit(ownerID), "refused commands changed nothing")
}

// listedRow is the row of email in `accounts list`, its columns joined by one space.
func listedRow(out, email string) string {
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == email {
			return strings.Join(f, " ")
		}
	}
	return ""
}

// A project's own ingest rate limit: owners and admins set it (validated, each error
// naming its field), it is shown with the project and published to the data plane's
// mirror; null returns the project to the deployment's default.
func TestProjectIngestRateLimit(t *testing.T) {
	databases(t, func(t *testing.T, db map[string]string) {
		s := startStack(t, db)
		cp := s.cp.URL
		owner, _ := s.signup(t, "rate-owner@example.com")
		admin, _ := s.signup(t, "rate-admin@example.com")
		member, _ := s.signup(t, "rate-member@example.com")
		stranger, _ := s.signup(t, "rate-stranger@example.com")
		pr := call(t, cp, "POST", "/api/v1/projects", owner, map[string]string{"name": "rated"})
		pid := pr.str("id")
		assert.Contains(t, pr.Body, "ingest_rate_limit")
		assert.Nil(t, pr.Body["ingest_rate_limit"], "a new project has the deployment's default")
		for email, role := range map[string]string{"rate-admin@example.com": "admin", "rate-member@example.com": "member"} {
			require.Equal(t, http.StatusCreated, call(t, cp, "POST", "/api/v1/projects/"+pid+"/members", owner, map[string]string{"email": email, "role": role}).Status)
		}
		_, js := testenv.Connect(t, s.nats.URL())
		kv, err := js.KeyValue(context.Background(), mirror.BucketProjects)
		require.NoError(t, err)
		published := func() (mirror.Project, int64) {
			e, err := kv.Get(context.Background(), pid)
			require.NoError(t, err)
			var p mirror.Project
			require.NoError(t, json.Unmarshal(e.Value(), &p))
			return p, p.Version
		}
		_, v0 := published()

		path := "/api/v1/projects/" + pid
		for _, c := range []struct {
			body  string
			field string
		}{
			{`{"ingest_rate_limit": {"per_second": -1}}`, "ingest_rate_limit.per_second"},
			{`{"ingest_rate_limit": {"per_second": 10, "burst": -5}}`, "ingest_rate_limit.burst"},
			{`{"ingest_rate_limit": {"per_second": 1e12}}`, "ingest_rate_limit.per_second"},
			{`{"ingest_rate_limit": {"burst": 50}}`, "ingest_rate_limit.burst"},
			{`{"ingest_rate_limit": {"per_second": "fast"}}`, "ingest_rate_limit.per_second"},
			{`{"ingest_rate_limit": {"per_second": 10, "burst": 2.5}}`, "ingest_rate_limit.burst"},
			{`{"ingest_rate_limit": {"per_second": 10, "brust": 20}}`, "brust"},
			{`{"ingest_rate_limit": 100}`, "ingest_rate_limit"},
		} {
			r := rawCall(t, cp, "PATCH", path, owner, c.body)
			assert.Equal(t, http.StatusBadRequest, r.Status, "%s: %s", c.body, r.Raw)
			assert.Equal(t, "invalid_body", r.code(), c.body)
			assert.Contains(t, r.message(), c.field, c.body)
		}
		p, v := published()
		assert.Equal(t, v0, v, "refused changes publish nothing")
		assert.Nil(t, p.IngestRate)

		// Roles: members may not, strangers do not see the project.
		r := call(t, cp, "PATCH", path, member, map[string]any{"ingest_rate_limit": map[string]any{"per_second": 5}})
		assert.Equal(t, http.StatusForbidden, r.Status, "%s", r.Raw)
		r = call(t, cp, "PATCH", path, stranger, map[string]any{"ingest_rate_limit": map[string]any{"per_second": 5}})
		assert.Equal(t, http.StatusNotFound, r.Status, "%s", r.Raw)

		// Owner and admin set it; it is shown and published.
		r = call(t, cp, "PATCH", path, admin, map[string]any{"ingest_rate_limit": map[string]any{"per_second": 2.5, "burst": 40}})
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Raw)
		assert.Equal(t, map[string]any{"per_second": 2.5, "burst": float64(40)}, r.Body["ingest_rate_limit"])
		p, _ = published()
		assert.Equal(t, &mirror.IngestRate{PerSecond: 2.5, Burst: 40}, p.IngestRate)
		r = call(t, cp, "PATCH", path, owner, map[string]any{"ingest_rate_limit": map[string]any{"per_second": 100}})
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Raw)
		p, _ = published()
		assert.Equal(t, &mirror.IngestRate{PerSecond: 100}, p.IngestRate, "burst 0: one second's worth, decided by the receiver")

		// A PATCH without the field keeps it; GET shows it.
		r = call(t, cp, "PATCH", path, owner, map[string]any{"name": "renamed"})
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Raw)
		g := call(t, cp, "GET", path, member, nil)
		assert.Equal(t, "renamed", g.str("name"))
		assert.Equal(t, map[string]any{"per_second": float64(100), "burst": float64(0)}, g.Body["ingest_rate_limit"])
		p, _ = published()
		assert.Equal(t, "renamed", p.Name)
		assert.Equal(t, &mirror.IngestRate{PerSecond: 100}, p.IngestRate)

		// null, or per_second 0: the deployment's default again.
		for _, body := range []string{`{"ingest_rate_limit": null}`, `{"ingest_rate_limit": {"per_second": 0}}`} {
			require.Equal(t, http.StatusOK, call(t, cp, "PATCH", path, owner, map[string]any{"ingest_rate_limit": map[string]any{"per_second": 7}}).Status)
			r = rawCall(t, cp, "PATCH", path, owner, body)
			require.Equal(t, http.StatusOK, r.Status, "%s", r.Raw)
			assert.Nil(t, r.Body["ingest_rate_limit"], body)
			p, _ = published()
			assert.Nil(t, p.IngestRate, body)
		}
	})
}

// rawCall is call with a body sent exactly as written.
func rawCall(t *testing.T, base, method, path, token, body string) reply {
	t.Helper()
	return call(t, base, method, path, token, json.RawMessage(body))
}

// MCP's get_usage is the API's answer: the account's without a project, a project's for
// its members.
func TestMCPGetUsage(t *testing.T) {
	s := startUsageStack(t, map[string]string{"SVC_DATA_DIR": t.TempDir()}, 500)
	cp := s.cp.URL
	owner, ownerID := s.signup(t, "mcp-usage@example.com")
	member, _ := s.signup(t, "mcp-usage-member@example.com")
	pid := call(t, cp, "POST", "/api/v1/projects", owner, map[string]string{"name": "metered"}).str("id")
	require.Equal(t, http.StatusCreated, call(t, cp, "POST", "/api/v1/projects/"+pid+"/members", owner, map[string]string{"email": "mcp-usage-member@example.com"}).Status)
	m := s.meter(t, 500)
	accepted, _ := send(t, m, ownerID, pid, 120, 40)
	require.NoError(t, m.Flush(context.Background()))
	require.Eventually(t, func() bool {
		return call(t, cp, "GET", "/api/v1/projects/"+pid+"/usage", owner, nil).Body["events"] == float64(accepted)
	}, 5*time.Second, 20*time.Millisecond)

	cs, err := mcpSession(t, cp, owner)
	require.NoError(t, err)
	got, errText := tool(t, cs, "get_usage", map[string]any{})
	require.Empty(t, errText)
	assert.Equal(t, call(t, cp, "GET", "/api/v1/usage", owner, nil).Body, got)
	assert.EqualValues(t, accepted, got["events"])
	assert.EqualValues(t, 500-accepted, got["remaining"])

	ms, err := mcpSession(t, cp, member)
	require.NoError(t, err)
	got, errText = tool(t, ms, "get_usage", map[string]any{"project_id": pid})
	require.Empty(t, errText)
	assert.Equal(t, call(t, cp, "GET", "/api/v1/projects/"+pid+"/usage", member, nil).Body, got)
	assert.EqualValues(t, accepted, got["events"])
	assert.EqualValues(t, 500, got["limit"])
}
