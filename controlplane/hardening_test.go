package main

import (
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// consoleRead is a console read of the project's recent events on the receiver, as the
// dashboard makes it with a console token: the status and the error code.
func consoleRead(t *testing.T, receiver, pid, token string) (int, string) {
	t.Helper()
	r := call(t, receiver, "GET", "/console/v1/projects/"+pid+"/events", token, nil)
	return r.Status, r.code()
}

// TestRemovedMembersConsoleTokenFailsWithinASecond: a console token lives ten minutes,
// but the membership it was issued under ends it: removal by an admin, leaving, and
// project deletion each stop it within a second.
func TestRemovedMembersConsoleTokenFailsWithinASecond(t *testing.T) {
	databases(t, func(t *testing.T, db map[string]string) {
		s := startStack(t, db)
		col := s.receiver(t)
		cp := s.cp.URL
		owner, _ := s.signup(t, "owner@example.com")
		member, memberID := s.signup(t, "member@example.com")
		leaver, leaverID := s.signup(t, "leaver@example.com")
		pid := call(t, cp, "POST", "/api/v1/projects", owner, map[string]string{"name": "revoke"}).str("id")
		p := "/api/v1/projects/" + pid
		for _, e := range []string{"member@example.com", "leaver@example.com"} {
			require.Equal(t, http.StatusCreated, call(t, cp, "POST", p+"/members", owner, map[string]string{"email": e}).Status)
		}
		consoleToken := func(login string) string {
			r := call(t, cp, "POST", p+"/console-token", login, nil)
			require.Equal(t, http.StatusOK, r.Status, "%s", r.Raw)
			return r.str("token")
		}
		memberTok, leaverTok, ownerTok := consoleToken(member), consoleToken(leaver), consoleToken(owner)
		for _, tok := range []string{memberTok, leaverTok, ownerTok} {
			require.Eventually(t, func() bool { st, _ := consoleRead(t, col.HTTP, pid, tok); return st == http.StatusOK },
				10*time.Second, 20*time.Millisecond, "a member's console token reads the project")
		}
		// gone polls until the token is refused as a stranger's, and fails the test when
		// that takes more than revocationSlack from when the control plane answered (the
		// contract says a second; the latency is logged, see revocationSlack).
		gone := func(tok, what string) {
			t.Helper()
			start := time.Now()
			for {
				st, code := consoleRead(t, col.HTTP, pid, tok)
				if st == http.StatusNotFound {
					assert.Equal(t, "not_found", code)
					t.Logf("%s: refused after %s", what, time.Since(start).Round(time.Millisecond))
					return
				}
				require.Equal(t, http.StatusOK, st, what)
				require.Less(t, time.Since(start), revocationSlack, "%s: the token still reads the project", what)
				time.Sleep(5 * time.Millisecond)
			}
		}

		require.Equal(t, http.StatusNoContent, call(t, cp, "DELETE", p+"/members/"+memberID, owner, nil).Status)
		gone(memberTok, "removed by the owner")
		require.Equal(t, http.StatusNoContent, call(t, cp, "DELETE", p+"/members/"+leaverID, leaver, nil).Status)
		gone(leaverTok, "left the project")
		st, _ := consoleRead(t, col.HTTP, pid, ownerTok)
		assert.Equal(t, http.StatusOK, st, "the owner's token is untouched")
		assert.Equal(t, http.StatusNotFound, call(t, cp, "POST", p+"/console-token", member, nil).Status, "no new token for a removed member")

		// Added again: the old token stays dead (it names the earlier membership), a new
		// one works.
		require.Equal(t, http.StatusCreated, call(t, cp, "POST", p+"/members", owner, map[string]string{"email": "member@example.com"}).Status)
		fresh := consoleToken(member)
		require.Eventually(t, func() bool { st, _ := consoleRead(t, col.HTTP, pid, fresh); return st == http.StatusOK },
			time.Second, 10*time.Millisecond, "a member added again reads with a new token")
		st, code := consoleRead(t, col.HTTP, pid, memberTok)
		assert.Equal(t, http.StatusUnauthorized, st)
		assert.Equal(t, "invalid_token", code)

		// A restart re-publishes the mirror from the database: memberships survive it.
		s.cp.Kill()
		s.cp.Start()
		require.Eventually(t, func() bool {
			return call(t, cp, "GET", "/readyz", "", nil).Status == http.StatusOK
		}, 10*time.Second, 20*time.Millisecond)
		st, _ = consoleRead(t, col.HTTP, pid, fresh)
		assert.Equal(t, http.StatusOK, st, "after a control plane restart")

		require.Equal(t, http.StatusNoContent, call(t, cp, "DELETE", p, owner, nil).Status)
		gone(ownerTok, "project deleted")
	})
}

// TestMembersSeeNoDestinationSecrets: owners and admins configure destinations and see
// them whole; a read-only member sees header names without any value, and no webhook URL
// secrets, in the API and in MCP.
func TestMembersSeeNoDestinationSecrets(t *testing.T) {
	s := startStack(t, map[string]string{"SVC_DATA_DIR": t.TempDir()})
	cp := s.cp.URL
	owner, _ := s.signup(t, "owner@example.com")
	admin, _ := s.signup(t, "admin@example.com")
	member, _ := s.signup(t, "member@example.com")
	pid := call(t, cp, "POST", "/api/v1/projects", owner, map[string]string{"name": "secrets"}).str("id")
	p := "/api/v1/projects/" + pid
	require.Equal(t, http.StatusCreated, call(t, cp, "POST", p+"/members", owner, map[string]string{"email": "admin@example.com", "role": "admin"}).Status)
	require.Equal(t, http.StatusCreated, call(t, cp, "POST", p+"/members", owner, map[string]string{"email": "member@example.com"}).Status)

	secrets := []string{"Bearer s3cr3t-bearer", "apikey-0001", "tok-0002", "sig-0003", "pw-0004", "cookie-0005", "q-0006",
		"T0000/B0000/slackpath", "1234/discordpath", "teamspath-0007", "pass-0008", "access-0009", "cert-0010", "tenant-0011"}
	webhook := map[string]any{"kind": "webhook", "url": "https://hooks.example.com/in/abc?token=q-0006", "headers": map[string]string{
		"Authorization": "Bearer s3cr3t-bearer", "X-Api-Key": "apikey-0001", "X-Custom-Token": "tok-0002",
		"X-Hub-Signature": "sig-0003", "X-Password": "pw-0004", "Cookie": "cookie-0005",
		// Credentials under names no list of secret-looking words catches.
		"X-Pass": "pass-0008", "X-Access": "access-0009", "X-Cert": "cert-0010", "X-Tenant": "tenant-0011",
	}}
	r := call(t, cp, "POST", p+"/sinks", owner, webhook)
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Raw)
	webhookID := r.str("id")
	for _, u := range []string{"https://hooks.slack.com/services/T0000/B0000/slackpath", "https://discord.com/api/webhooks/1234/discordpath", "https://acme.webhook.office.com/webhookb2/teamspath-0007"} {
		r := call(t, cp, "POST", p+"/sinks", owner, map[string]any{"kind": "chat", "url": u})
		require.Equal(t, http.StatusCreated, r.Status, "%s", r.Raw)
	}
	require.Equal(t, http.StatusOK, call(t, cp, "PUT", p+"/pipeline", owner, map[string]any{"agent_endpoint_url": "https://agent.example.com/hook?key=q-0006"}).Status)

	// Owners and admins see everything they configured.
	for who, tok := range map[string]string{"owner": owner, "admin": admin} {
		raw := string(call(t, cp, "GET", p+"/sinks", tok, nil).Raw)
		for _, sec := range secrets {
			assert.Contains(t, raw, sec, who)
		}
	}
	list := call(t, cp, "GET", p+"/sinks", member, nil)
	require.Equal(t, http.StatusOK, list.Status)
	one := call(t, cp, "GET", p+"/sinks/"+webhookID, member, nil)
	require.Equal(t, http.StatusOK, one.Status)
	pipeline := call(t, cp, "GET", p+"/pipeline", member, nil)
	for what, raw := range map[string][]byte{"list": list.Raw, "one sink": one.Raw, "pipeline": pipeline.Raw} {
		for _, sec := range secrets {
			assert.NotContains(t, string(raw), sec, "a member's %s shows a secret", what)
		}
	}
	h := one.Body["headers"].(map[string]any)
	assert.Len(t, h, 10, "a member sees every header's name")
	for name, v := range h {
		assert.Equal(t, "[redacted]", v, "a member sees no header's value (%s)", name)
	}
	assert.Equal(t, "https://hooks.example.com/in/abc?[redacted]", one.str("url"))
	var urls []string
	for _, sk := range list.Body["sinks"].([]any) {
		urls = append(urls, sk.(map[string]any)["url"].(string))
	}
	assert.Contains(t, urls, "https://hooks.slack.com/[redacted]", "a chat webhook shows its host only")
	assert.Equal(t, "https://agent.example.com/hook?[redacted]", pipeline.str("agent_endpoint_url"))

	// MCP shows a member the pipeline as the API does.
	cs, err := mcpSession(t, cp, member)
	require.NoError(t, err)
	out, errText := tool(t, cs, "get_pipeline", map[string]any{"project_id": pid})
	require.Empty(t, errText)
	assert.Equal(t, "https://agent.example.com/hook?[redacted]", out["agent_endpoint_url"])
	cs, err = mcpSession(t, cp, owner)
	require.NoError(t, err)
	out, errText = tool(t, cs, "get_pipeline", map[string]any{"project_id": pid})
	require.Empty(t, errText)
	assert.Equal(t, "https://agent.example.com/hook?key=q-0006", out["agent_endpoint_url"], "the owner sees what they set")
}

// TestOutboundURLsCheckedWhenSaved: an agent or destination URL that points at this
// machine, a private network or the metadata endpoint, in any spelling, is refused when
// saved (400 naming SVC_OUTBOUND_ALLOW), nothing of it is stored, and an operator's
// SVC_OUTBOUND_ALLOW lets it through.
func TestOutboundURLsCheckedWhenSaved(t *testing.T) {
	s := startStack(t, map[string]string{"SVC_DATA_DIR": t.TempDir()})
	cp := s.cp.URL
	owner, _ := s.signup(t, "owner@example.com")
	pid := call(t, cp, "POST", "/api/v1/projects", owner, map[string]string{"name": "ssrf"}).str("id")
	p := "/api/v1/projects/" + pid
	require.Equal(t, http.StatusOK, call(t, cp, "PUT", p+"/pipeline", owner, map[string]any{"agent_endpoint_url": "https://agent.example.com/hook"}).Status)
	sink := call(t, cp, "POST", p+"/sinks", owner, map[string]any{"kind": "webhook", "url": "https://hooks.example.com/x"})
	require.Equal(t, http.StatusCreated, sink.Status)

	bad := []string{
		"http://169.254.169.254/", "http://169.254.169.254/latest/meta-data/", "http://localhost:8080/agent",
		"http://127.0.0.1/", "http://2130706433/", "http://0x7f.1/", "http://0177.0.0.1/", "http://127.1/",
		"http://127.0.0.1./", "http://[::1]/", "http://[::ffff:127.0.0.1]/", "http://[2002:a9fe:a9fe::1]/",
		"http://[::a9fe:a9fe]/", "http://[64:ff9b::a9fe:a9fe]/", "http://10.0.0.1/", "http://192.168.1.1/",
		"http://198.18.0.1/", "http://192.0.0.1/", "http://[fd00:ec2::254]/", "http://1.2.3.999/",
	}
	for _, u := range bad {
		r := call(t, cp, "PUT", p+"/pipeline", owner, map[string]any{"agent_endpoint_url": u})
		assert.Equal(t, http.StatusBadRequest, r.Status, "agent %s", u)
		assert.Equal(t, "invalid_pipeline", r.code(), u)
		assert.True(t, strings.HasPrefix(r.message(), "agent_endpoint_url: "), "%s: %s", u, r.message())
		if !strings.Contains(u, "999") {
			assert.Contains(t, r.message(), "SVC_OUTBOUND_ALLOW", u)
		}
		r = call(t, cp, "POST", p+"/sinks", owner, map[string]any{"kind": "chat", "url": u})
		assert.Equal(t, http.StatusBadRequest, r.Status, "sink %s", u)
		assert.True(t, strings.HasPrefix(r.message(), "url: "), "%s: %s", u, r.message())
		r = call(t, cp, "PATCH", p+"/sinks/"+sink.str("id"), owner, map[string]any{"url": u})
		assert.Equal(t, http.StatusBadRequest, r.Status, "sink PATCH %s", u)
	}
	r := call(t, cp, "PUT", p+"/pipeline", owner, map[string]any{"agent_endpoint_url": "http://169.254.169.254/"})
	assert.Equal(t, "agent_endpoint_url: destination refused: 169.254.169.254 is a cloud metadata address; allow it with SVC_OUTBOUND_ALLOW (an operator setting, read by the control plane and the collector)", r.message())
	r = call(t, cp, "PUT", p+"/pipeline", owner, map[string]any{"agent_endpoint_url": "http://localhost:8080/agent"})
	assert.Contains(t, r.message(), "localhost resolves to", "a name is refused for where it resolves")

	// Nothing of a refused request was stored.
	assert.Equal(t, "https://agent.example.com/hook", call(t, cp, "GET", p+"/pipeline", owner, nil).str("agent_endpoint_url"))
	sinks := call(t, cp, "GET", p+"/sinks", owner, nil).Body["sinks"].([]any)
	require.Len(t, sinks, 1)
	assert.Equal(t, "https://hooks.example.com/x", sinks[0].(map[string]any)["url"])

	// MCP set_pipeline checks the same, and changes nothing.
	cs, err := mcpSession(t, cp, owner)
	require.NoError(t, err)
	_, errText := tool(t, cs, "set_pipeline", map[string]any{"project_id": pid, "agent_endpoint_url": "http://169.254.169.254/", "batch_size": 3})
	assert.Contains(t, errText, "invalid_pipeline: agent_endpoint_url: destination refused")
	assert.Contains(t, errText, "SVC_OUTBOUND_ALLOW")
	pl := call(t, cp, "GET", p+"/pipeline", owner, nil)
	assert.Equal(t, "https://agent.example.com/hook", pl.str("agent_endpoint_url"))
	assert.EqualValues(t, 10, pl.Body["batch_size"])

	// An operator allows this machine, for an agent beside the service.
	s2 := startStack(t, map[string]string{"SVC_DATA_DIR": t.TempDir(), "SVC_OUTBOUND_ALLOW": "127.0.0.0/8"})
	owner2, _ := s2.signup(t, "owner@example.com")
	p2 := "/api/v1/projects/" + call(t, s2.cp.URL, "POST", "/api/v1/projects", owner2, map[string]string{"name": "local"}).str("id")
	for _, u := range []string{"http://localhost:8080/agent", "http://127.0.0.1:9000/", "http://2130706433/"} {
		r := call(t, s2.cp.URL, "PUT", p2+"/pipeline", owner2, map[string]any{"agent_endpoint_url": u})
		assert.Equal(t, http.StatusOK, r.Status, "%s: %s", u, r.Raw)
	}
	r = call(t, s2.cp.URL, "PUT", p2+"/pipeline", owner2, map[string]any{"agent_endpoint_url": "http://169.254.169.254/"})
	assert.Equal(t, http.StatusBadRequest, r.Status, "the allow list opens only what it names")
}

// from is an HTTP client whose connections come from a given loopback address, so one
// test can be several clients.
func from(addr string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(addr)}, Timeout: 5 * time.Second}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: d.DialContext}}
}

// TestLoginLimitSlowsTheAttackerNotTheVictim: wrong passwords for someone's email lock
// out the address they come from, for that account; the owner logs in from elsewhere.
// Signups are limited per address.
func TestLoginLimitSlowsTheAttackerNotTheVictim(t *testing.T) {
	s := startStack(t, map[string]string{"SVC_DATA_DIR": t.TempDir()})
	cp := s.cp.URL
	s.signup(t, "victim@example.com")
	attacker, victim := from("127.0.0.2"), from("127.0.0.3")
	login := func(c *http.Client, password string) reply {
		return callWith(t, c, cp, "POST", "/api/v1/auth/login", "", map[string]string{"email": "victim@example.com", "password": password})
	}
	for i := 0; i < 10; i++ {
		r := login(attacker, "guess "+strconv.Itoa(i))
		require.Equal(t, http.StatusUnauthorized, r.Status, "guess %d", i)
	}
	r := login(attacker, "guess 11")
	assert.Equal(t, http.StatusTooManyRequests, r.Status)
	assert.Equal(t, "rate_limited", r.code())
	wait, err := strconv.Atoi(r.Header.Get("Retry-After"))
	require.NoError(t, err, "Retry-After %q", r.Header.Get("Retry-After"))
	assert.True(t, wait > 0 && wait <= 900, "Retry-After %d", wait)
	assert.Contains(t, r.message(), "try again in "+strconv.Itoa(wait)+" s")
	r = login(attacker, "correct horse battery")
	assert.Equal(t, http.StatusTooManyRequests, r.Status, "the guessing address stays locked for this account")

	r = login(victim, "correct horse battery")
	assert.Equal(t, http.StatusOK, r.Status, "the victim, from their own address, logs in: %s", r.Raw)
	r = callWith(t, attacker, cp, "POST", "/api/v1/auth/signup", "", map[string]string{"email": "other@example.com", "password": "correct horse battery"})
	assert.Equal(t, http.StatusCreated, r.Status, "the lock is for the account guessed at, not the address's every request")

	// Signups: ten an hour per address (the attacker's one above counts).
	signup := func(c *http.Client, i int) reply {
		return callWith(t, c, cp, "POST", "/api/v1/auth/signup", "", map[string]string{"email": "user" + strconv.Itoa(i) + "@example.com", "password": "correct horse battery"})
	}
	for i := 0; i < 9; i++ {
		require.Equal(t, http.StatusCreated, signup(attacker, i).Status, "signup %d", i)
	}
	r = signup(attacker, 99)
	assert.Equal(t, http.StatusTooManyRequests, r.Status)
	assert.Equal(t, "rate_limited", r.code())
	assert.Contains(t, r.message(), "too many signups from your address; try again in ")
	assert.Equal(t, http.StatusCreated, signup(victim, 100).Status, "another address signs up")
}
