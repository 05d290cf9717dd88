package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// auditEvents reads a project's (or, with path "/api/v1/audit", the account's) audit log.
func auditEvents(t *testing.T, cp, path, token string) []map[string]any {
	t.Helper()
	r := call(t, cp, "GET", path, token, nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Raw)
	var out []map[string]any
	for _, e := range r.Body["events"].([]any) {
		out = append(out, e.(map[string]any))
	}
	return out
}

func findAction(evs []map[string]any, action string) map[string]any {
	for _, e := range evs {
		if e["action"] == action {
			return e
		}
	}
	return nil
}

// TestAuditLog: changing the pipeline, rotating the signing secret, changing a
// destination's secrets and removing a member each appear in the project's audit log
// with who (email, credential) and when, newest first, with before and after for the
// configuration and no secret anywhere in it; admins read the log, a member gets 403; it
// exports as JSON lines; the account log holds the account's own changes.
func TestAuditLog(t *testing.T) {
	databases(t, func(t *testing.T, db map[string]string) {
		s := startStack(t, db)
		cp := s.cp.URL
		owner, ownerID := s.signup(t, "owner@example.com")
		admin, _ := s.signup(t, "admin@example.com")
		member, memberID := s.signup(t, "member@example.com")
		pid := call(t, cp, "POST", "/api/v1/projects", owner, map[string]string{"name": "audited"}).str("id")
		p := "/api/v1/projects/" + pid
		start := time.Now().Add(-time.Second)
		for email, role := range map[string]string{"admin@example.com": "admin", "member@example.com": "member"} {
			r := call(t, cp, "POST", p+"/members", owner, map[string]string{"email": email, "role": role})
			require.Equal(t, http.StatusCreated, r.Status, "%s", r.Raw)
		}

		r := call(t, cp, "PUT", p+"/pipeline", admin, map[string]any{"trigger": `event["status"] == "firing"`})
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Raw)
		oldSecret := r.str("signing_secret")
		r = call(t, cp, "POST", p+"/pipeline/rotate-secret", owner, nil)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Raw)
		newSecret := r.str("signing_secret")
		require.NotEqual(t, oldSecret, newSecret)
		sink := call(t, cp, "POST", p+"/sinks", owner, map[string]any{"kind": "webhook", "url": "https://hooks.example.com/T1/B2/hook-secret-path",
			"headers": map[string]string{"Authorization": "Bearer header-secret-1"}})
		require.Equal(t, http.StatusCreated, sink.Status, "%s", sink.Raw)
		r = call(t, cp, "PATCH", p+"/sinks/"+sink.str("id"), owner, map[string]any{"headers": map[string]string{"Authorization": "Bearer header-secret-2"}, "enabled": false})
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Raw)
		key := call(t, cp, "POST", p+"/keys", owner, map[string]any{"name": "ci"})
		require.Equal(t, http.StatusCreated, key.Status, "%s", key.Raw)
		// A change refused changes nothing and records nothing.
		r = call(t, cp, "PUT", p+"/pipeline", member, map[string]any{"trigger": "true"})
		require.Equal(t, http.StatusForbidden, r.Status, "%s", r.Raw)

		// A member cannot read the log, in the contract's error shape; a stranger does
		// not learn the project exists.
		r = call(t, cp, "GET", p+"/audit", member, nil)
		require.Equal(t, http.StatusForbidden, r.Status, "%s", r.Raw)
		assert.Equal(t, "forbidden", r.code())
		stranger, _ := s.signup(t, "stranger@example.com")
		assert.Equal(t, http.StatusNotFound, call(t, cp, "GET", p+"/audit", stranger, nil).Status)

		r = call(t, cp, "DELETE", p+"/members/"+memberID, admin, nil)
		require.Equal(t, http.StatusNoContent, r.Status, "%s", r.Raw)

		evs := auditEvents(t, cp, p+"/audit", admin)
		var got []string
		for _, e := range evs {
			got = append(got, e["action"].(string))
		}
		assert.Equal(t, []string{"member.remove", "key.create", "sink.update", "sink.create", "pipeline.secret.rotate", "pipeline.update",
			"member.add", "member.add", "project.create"}, got, "every change, newest first, nothing for the refused one")

		check := func(action, who string) map[string]any {
			t.Helper()
			e := findAction(evs, action)
			require.NotNil(t, e, action)
			assert.Equal(t, who, e["actor"].(map[string]any)["email"], action)
			at, err := time.Parse(time.RFC3339Nano, e["at"].(string))
			require.NoError(t, err)
			assert.True(t, at.After(start) && at.Before(time.Now().Add(time.Second)), "%s at %s", action, at)
			assert.Equal(t, "login_token", e["credential"].(map[string]any)["kind"], action)
			assert.Equal(t, "127.0.0.1", e["from"], action)
			return e
		}
		rm := check("member.remove", "admin@example.com")
		assert.Equal(t, memberID, rm["target"])
		assert.Equal(t, map[string]any{"from": "member@example.com"}, rm["changes"].(map[string]any)["email"], "who was removed, by email")
		pu := check("pipeline.update", "admin@example.com")
		assert.Equal(t, map[string]any{"from": "", "to": `event["status"] == "firing"`}, pu["changes"].(map[string]any)["trigger"])
		check("pipeline.secret.rotate", "owner@example.com")
		su := check("sink.update", "owner@example.com")
		assert.Equal(t, sink.str("id"), su["target"])
		assert.Equal(t, map[string]any{"from": true, "to": false}, su["changes"].(map[string]any)["enabled"])
		assert.Equal(t, "[redacted] (changed)", su["changes"].(map[string]any)["headers"].(map[string]any)["to"])
		assert.Equal(t, key.str("id"), check("key.create", "owner@example.com")["target"])
		assert.Equal(t, pid, check("project.create", "owner@example.com")["target"])

		// Secrets never: not the signing secrets, the key, a header or the webhook's path.
		r = call(t, cp, "GET", p+"/audit?format=jsonl", owner, nil)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Raw)
		for _, secret := range []string{oldSecret, newSecret, key.str("key"), "header-secret-1", "header-secret-2", "hook-secret-path"} {
			require.NotEmpty(t, secret)
			assert.NotContains(t, string(r.Raw), secret)
			assert.NotContains(t, string(auditRaw(t, cp, p+"/audit", owner)), secret)
		}
		// The export: one JSON object a line, the same records.
		assert.Equal(t, "application/x-ndjson", r.Header.Get("Content-Type"))
		sc := bufio.NewScanner(bytes.NewReader(r.Raw))
		lines := 0
		for sc.Scan() {
			var e map[string]any
			require.NoError(t, json.Unmarshal(sc.Bytes(), &e), sc.Text())
			lines++
		}
		assert.Equal(t, len(evs), lines)
		// ...and the export itself is recorded.
		assert.Equal(t, "audit.export", auditEvents(t, cp, p+"/audit?limit=1", owner)[0]["action"])

		// Pages by cursor, filtered by action.
		page := call(t, cp, "GET", p+"/audit?limit=2&action=sink", owner, nil)
		require.Equal(t, http.StatusOK, page.Status, "%s", page.Raw)
		assert.Len(t, page.Body["events"], 2)
		next := page.str("next_before")
		require.NotEmpty(t, next)
		rest := auditEvents(t, cp, p+"/audit?action=sink&before="+next, owner)
		assert.Empty(t, rest, "two sink records in all")
		assert.Equal(t, http.StatusBadRequest, call(t, cp, "GET", p+"/audit?limit=100000", owner, nil).Status)
		assert.Equal(t, http.StatusBadRequest, call(t, cp, "GET", p+"/audit?before=x", owner, nil).Status)

		// What was chosen, and only that: a new destination without its id and start time
		// (the record's target and the service's), a new source with its name, connector
		// and labels but no key or secret, and code or templates people write (where a
		// literal may be a secret) as a digest that still tells a change.
		sc1 := findAction(evs, "sink.create")["changes"].(map[string]any)
		assert.Equal(t, map[string]any{"to": "webhook"}, sc1["kind"])
		assert.NotContains(t, sc1, "id")
		assert.NotContains(t, sc1, "since")
		src := call(t, cp, "POST", p+"/sources", owner, map[string]any{"name": "alerts", "labels": map[string]string{"svc": "service.name"},
			"text_template": "see https://wiki.example.com/?k=tmpl-secret-9", "verification": map[string]string{"scheme": "github"}})
		require.Equal(t, http.StatusCreated, src.Status, "%s", src.Raw)
		r = call(t, cp, "PUT", p+"/pipeline", owner, map[string]any{"trigger": `event["status"] == "firing"`,
			"transforms": []string{`set(event["token"], "ottl-secret-10")`}})
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Raw)
		raw := string(auditRaw(t, cp, p+"/audit?limit=2", owner))
		for _, secret := range []string{"tmpl-secret-9", "ottl-secret-10", src.str("ingest_key"), src.str("api_key"), src.Body["verification"].(map[string]any)["secret"].(string)} {
			require.NotEmpty(t, secret)
			assert.NotContains(t, raw, secret)
		}
		latest := auditEvents(t, cp, p+"/audit?limit=2", owner)
		require.Equal(t, "source.create", latest[1]["action"])
		scs := latest[1]["changes"].(map[string]any)
		assert.Equal(t, map[string]any{"to": "alerts"}, scs["name"])
		assert.Equal(t, map[string]any{"to": map[string]any{"svc": "service.name"}}, scs["labels"])
		assert.Equal(t, map[string]any{"to": "github"}, scs["verification"])
		assert.Contains(t, scs["text_template"].(map[string]any)["to"], "[as written, #")
		require.Equal(t, "pipeline.update", latest[0]["action"])
		tr := latest[0]["changes"].(map[string]any)["transforms"].(map[string]any)["to"].([]any)
		require.Len(t, tr, 1)
		assert.Contains(t, tr[0], "[as written, #")

		// The account's own log: its access token and logging out everywhere.
		pat := call(t, cp, "POST", "/api/v1/tokens", owner, map[string]any{"name": "script"})
		require.Equal(t, http.StatusCreated, pat.Status, "%s", pat.Raw)
		acc := auditEvents(t, cp, "/api/v1/audit", pat.str("token"))
		require.NotEmpty(t, acc)
		assert.Equal(t, "token.create", acc[0]["action"])
		assert.Equal(t, pat.str("id"), acc[0]["target"])
		assert.NotContains(t, string(auditRaw(t, cp, "/api/v1/audit", owner)), pat.str("token"))
		r = call(t, cp, "POST", "/api/v1/auth/logout-all", pat.str("token"), nil)
		require.Equal(t, http.StatusNoContent, r.Status, "%s", r.Raw)
		login := call(t, cp, "POST", "/api/v1/auth/login", "", map[string]string{"email": "owner@example.com", "password": "correct horse battery"})
		acc = auditEvents(t, cp, "/api/v1/audit", login.str("token"))
		assert.Equal(t, "logout_all", acc[0]["action"])
		assert.Equal(t, "personal_access_token", acc[0]["credential"].(map[string]any)["kind"])
		assert.Equal(t, pat.str("id"), acc[0]["credential"].(map[string]any)["id"])
		assert.Equal(t, ownerID, acc[0]["actor"].(map[string]any)["id"])
		for _, e := range acc {
			assert.False(t, strings.HasPrefix(e["action"].(string), "member."), "a project's records stay out of the account log")
		}
		assert.NotNil(t, findAction(acc, "project.create"), "creating a project is the account's too")
		r = call(t, cp, "DELETE", p, login.str("token"), nil)
		require.Equal(t, http.StatusNoContent, r.Status, "%s", r.Raw)
		del := findAction(auditEvents(t, cp, "/api/v1/audit", login.str("token")), "project.delete")
		require.NotNil(t, del, "the deletion stays in the account's log")
		assert.Equal(t, pid, del["target"])
	})
}

func auditRaw(t *testing.T, cp, path, token string) []byte {
	t.Helper()
	r := call(t, cp, "GET", path, token, nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Raw)
	return r.Raw
}

// TestAuditLogRecordsReplays: a dead letter replayed at the receiver with the owner's
// console token (the dashboard's and agents' way: the control plane never sees the
// request) appears in the project's audit log with who and when, and so does the console
// token handed out to read the deliveries. The collector runs every data-plane role
// (configs/embedded.yaml); the agent answers 404, which dead-letters its call.
func TestAuditLogRecordsReplays(t *testing.T) {
	agent := &agentServer{}
	srv := httptest.NewServer(agent)
	t.Cleanup(srv.Close)
	n := testenv.StartNATS(t)
	col := testenv.StartCollector(t, testenv.CollectorOptions{Config: "configs/embedded.yaml",
		Env: map[string]string{"NATS_URL": n.URL(), "SVC_STREAM_REPLICAS": "1", "SVC_OUTBOUND_ALLOW": "127.0.0.1/32"}})
	cp := testenv.StartControlPlane(t, map[string]string{"NATS_URL": n.URL(), "SVC_JWT_SECRET": testJWTSecret,
		"SVC_DATA_DIR": t.TempDir(), "SVC_OUTBOUND_ALLOW": "127.0.0.1/32", "SVC_PUBLIC_RECEIVER_URL": col.HTTP})
	s := &stack{nats: n, cp: cp}
	_, js := testenv.Connect(t, n.URL())
	owner, ownerID := s.signup(t, "replayer@example.com")
	pid := call(t, cp.URL, "POST", "/api/v1/projects", owner, map[string]string{"name": "replays"}).str("id")
	p := "/api/v1/projects/" + pid
	key := call(t, cp.URL, "POST", p+"/keys", owner, map[string]string{"name": "k"}).str("key")
	r := call(t, cp.URL, "PUT", p+"/pipeline", owner, map[string]any{"agent_endpoint_url": srv.URL + "/agent"})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Raw)
	sendEvents(t, col.HTTP, key, js, pid, 1, 1, 1)

	tok := call(t, cp.URL, "POST", p+"/console-token", owner, nil)
	require.Equal(t, http.StatusOK, tok.Status, "%s", tok.Raw)
	console := col.HTTP + "/console/v1/projects/" + pid
	var dead string
	require.Eventually(t, func() bool {
		r := call(t, console, "GET", "/deliveries", tok.str("token"), nil)
		ds, _ := r.Body["deliveries"].([]any)
		for _, d := range ds {
			if d := d.(map[string]any); d["state"] == "dead_lettered" {
				dead = d["id"].(string)
			}
		}
		return dead != ""
	}, 30*time.Second, 100*time.Millisecond, "the 404 agent's call is dead-lettered")

	before := time.Now().Add(-time.Second)
	r = call(t, console, "POST", "/deliveries/replay", tok.str("token"), map[string]any{"ids": []string{dead}})
	require.Equal(t, http.StatusAccepted, r.Status, "%s", r.Raw)
	require.EqualValues(t, 1, r.Body["replayed"], "%s", r.Raw)
	var rec map[string]any
	require.Eventually(t, func() bool {
		rec = findAction(auditEvents(t, cp.URL, p+"/audit", owner), "deadletter.replay")
		return rec != nil
	}, 10*time.Second, 50*time.Millisecond, "the replay is in the audit log")
	assert.Equal(t, "replayer@example.com", rec["actor"].(map[string]any)["email"])
	assert.Equal(t, ownerID, rec["actor"].(map[string]any)["id"])
	assert.Equal(t, r.str("replay_id"), rec["target"])
	assert.Equal(t, map[string]any{"to": dead}, rec["changes"].(map[string]any)["delivery_id"])
	at, err := time.Parse(time.RFC3339Nano, rec["at"].(string))
	require.NoError(t, err)
	assert.True(t, at.After(before) && at.Before(time.Now().Add(time.Second)), "at %s", at)
	tokRead := findAction(auditEvents(t, cp.URL, p+"/audit", owner), "console.token")
	require.NotNil(t, tokRead, "the console token handed out is recorded as a read")
	assert.Equal(t, "login_token", tokRead["credential"].(map[string]any)["kind"])
}

// TestAuditLogThroughMCP: a change an agent makes with a tool is recorded as one made in
// the API is, naming the agent's credential; audit_list reads the log for an admin and
// refuses a member.
func TestAuditLogThroughMCP(t *testing.T) {
	s := startStack(t, map[string]string{"SVC_DATA_DIR": t.TempDir()})
	cp := s.cp.URL
	owner, _ := s.signup(t, "mcp-owner@example.com")
	member, _ := s.signup(t, "mcp-member@example.com")
	pid := call(t, cp, "POST", "/api/v1/projects", owner, map[string]string{"name": "agentic"}).str("id")
	require.Equal(t, http.StatusCreated, call(t, cp, "POST", "/api/v1/projects/"+pid+"/members", owner,
		map[string]string{"email": "mcp-member@example.com", "role": "member"}).Status)
	pat := call(t, cp, "POST", "/api/v1/tokens", owner, map[string]any{"name": "agent"})
	require.Equal(t, http.StatusCreated, pat.Status, "%s", pat.Raw)

	cs, err := mcpSession(t, cp, pat.str("token"))
	require.NoError(t, err)
	_, errText := tool(t, cs, "set_pipeline", map[string]any{"project_id": pid, "trigger": `event["level"] == "error"`})
	require.Empty(t, errText)
	out, errText := tool(t, cs, "audit_list", map[string]any{"project_id": pid, "limit": 1})
	require.Empty(t, errText)
	evs := out["events"].([]any)
	require.Len(t, evs, 1)
	e := evs[0].(map[string]any)
	assert.Equal(t, "pipeline.update", e["action"])
	assert.Equal(t, "mcp-owner@example.com", e["actor"].(map[string]any)["email"])
	assert.Equal(t, map[string]any{"kind": "personal_access_token", "id": pat.str("id")}, e["credential"])
	assert.Equal(t, "127.0.0.1", e["from"])
	assert.Equal(t, map[string]any{"from": "", "to": `event["level"] == "error"`}, e["changes"].(map[string]any)["trigger"])
	assert.NotEmpty(t, out["next_before"], "a full page names the next")

	ms, err := mcpSession(t, cp, member)
	require.NoError(t, err)
	_, errText = tool(t, ms, "audit_list", map[string]any{"project_id": pid})
	assert.Contains(t, errText, "forbidden")
}

// TestAuditLogAccountEvents: an account's own log shows its creation, the verification
// of its address (from the mailed link, with no login) and an app revoking its grant
// with its own refresh token (RFC 7009, with no login either), each with the address
// it came from.
func TestAuditLogAccountEvents(t *testing.T) {
	databases(t, func(t *testing.T, db map[string]string) {
		s := startMailStack(t, db)
		cp := s.cp.URL
		b := newBrowser(t, cp)
		b.signup("acct@example.com")
		link := s.mailedToken(t, "acct@example.com", "Confirm your email address", "verify-email", 1)
		r := call(t, cp, "POST", "/api/v1/auth/verify-email", "", map[string]string{"token": link})
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Raw)
		redirect := "http://127.0.0.1:9/callback"
		f := &oauthFlow{t: t, cp: cp, clientID: registerOAuthClient(t, cp, redirect), redirect: redirect, state: "st-1"}
		_, refresh := f.tokens(b)
		require.Equal(t, http.StatusOK, postForm(t, cp, "/oauth/revoke", url.Values{"token": {refresh}, "client_id": {f.clientID}}).Status)
		// Unknown tokens change nothing and record nothing.
		require.Equal(t, http.StatusOK, postForm(t, cp, "/oauth/revoke", url.Values{"token": {"ort_nonsense"}}).Status)

		login := call(t, cp, "POST", "/api/v1/auth/login", "", map[string]string{"email": "acct@example.com", "password": "correct horse battery"}).str("token")
		acc := auditEvents(t, cp, "/api/v1/audit", login)
		var got []string
		for _, e := range acc {
			got = append(got, e["action"].(string))
			assert.Equal(t, "acct@example.com", e["actor"].(map[string]any)["email"], e["action"])
			assert.Equal(t, "127.0.0.1", e["from"], e["action"])
		}
		assert.Equal(t, []string{"oauth_grant.revoke", "oauth_grant.create", "email.verify", "account.create"}, got)
		assert.Equal(t, map[string]any{"to": "acct@example.com"}, findAction(acc, "account.create")["changes"].(map[string]any)["email"])
		assert.Equal(t, map[string]any{"to": "acct@example.com"}, findAction(acc, "email.verify")["changes"].(map[string]any)["email_verified"])
		// The grant revoked is the target, and its own token the credential.
		rv := findAction(acc, "oauth_grant.revoke")
		assert.True(t, strings.HasPrefix(rv["target"].(string), "ogr_"), "%v", rv["target"])
		assert.Equal(t, map[string]any{"kind": "oauth_grant", "id": rv["target"]}, rv["credential"])
	})
}
