package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/mirrorcache"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/validationresponder"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// backlogAgent stands in for a project's agent: it answers 200 and keeps how many records
// each call carried (legacy mode: a JSON array); GET /calls tells the calls and records.
type backlogAgent struct {
	mu    sync.Mutex
	calls []int
}

func (a *backlogAgent) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && r.URL.Path == "/calls" { // for the browser test
		got := a.received()
		_ = json.NewEncoder(w).Encode(map[string]int{"calls": len(got), "records": sum(got)})
		return
	}
	body, _ := io.ReadAll(io.LimitReader(r.Body, 4<<20))
	var records []json.RawMessage
	n := -1
	if json.Unmarshal(body, &records) == nil {
		n = len(records)
	}
	a.mu.Lock()
	a.calls = append(a.calls, n)
	a.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"status": "accepted"}`)
}

func (a *backlogAgent) received() []int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]int(nil), a.calls...)
}

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}

// sendEvents posts n events in one batch with a project key and waits until the raw
// stream holds want records.
func sendEvents(t *testing.T, receiver, key string, js jetstream.JetStream, pid string, first, n int, want uint64) {
	t.Helper()
	var b strings.Builder
	b.WriteString("[")
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"n": %d, "_event_type": "order.failed"}`, first+i)
	}
	b.WriteString("]")
	// A key just created reaches the receiver through the mirror within a moment; until
	// then it is refused with 401, which stores nothing, so the send is tried again.
	var status int
	var raw []byte
	require.Eventually(t, func() bool {
		req, err := http.NewRequest("POST", receiver+"/v1/events/batch", strings.NewReader(b.String()))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-API-Key", key)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		raw, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		status = resp.StatusCode
		return status != http.StatusUnauthorized
	}, 10*time.Second, 50*time.Millisecond, "the new key reaches the receiver: %s", raw)
	require.Equal(t, http.StatusAccepted, status, "%s", raw)
	require.Eventually(t, func() bool {
		st, err := js.Stream(context.Background(), streams.RawStream(pid))
		if err != nil {
			return false
		}
		info, err := st.Info(context.Background())
		return err == nil && info.State.Msgs >= want
	}, 10*time.Second, 20*time.Millisecond, "the receiver stores the events")
}

// startBacklogStack is a stack whose in-process data-plane responder also previews
// backlogs, from the stack's NATS and a data-plane copy of the mirror (mirrorcache), as
// every collector's does. (startStack's answers pipeline checks only; two responders in
// one queue group would answer previews by turns.)
func startBacklogStack(t *testing.T, db map[string]string) *stack {
	t.Helper()
	n := testenv.StartNATS(t)
	nc, js := testenv.Connect(t, n.URL())
	cache := mirrorcache.NewCache(zap.NewNop())
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go cache.Run(ctx, js)
	svc, err := validationresponder.Start(nc, validationresponder.WithBacklogs(js, cache, validationresponder.OptionsFromEnv()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = svc.Stop() })
	require.NoError(t, nc.Flush())
	env := map[string]string{"NATS_URL": n.URL(), "SVC_JWT_SECRET": testJWTSecret}
	for k, v := range db {
		env[k] = v
	}
	return &stack{nats: n, cp: testenv.StartControlPlane(t, env), db: db}
}

// mirrorBacklog reads the project's mirror entry's backlog as the data plane does.
func mirrorBacklogOf(t *testing.T, js jetstream.JetStream, pid string) *mirror.Backlog {
	t.Helper()
	kv, err := js.KeyValue(context.Background(), mirror.BucketProjects)
	require.NoError(t, err)
	var p mirror.Project
	require.True(t, get(t, kv, pid, &p), "the project is in the mirror")
	return p.Backlog
}

func num(t *testing.T, r reply, k string) int {
	t.Helper()
	f, ok := r.Body[k].(float64)
	require.True(t, ok, "%s is a number in %s", k, r.Raw)
	return int(f)
}

// Send 25 events, then set an agent URL: no call within 5 s; a
// preview of the last 25 says 25 records and 3 calls (batch size 10); started, the agent
// gets exactly those 3 calls with the 25 records, and the backlog reads done. The request
// survives the mirror's rebuild, is not sent twice, and the pipeline keeps sending new
// events as they come. The collector runs every data-plane role (configs/embedded.yaml).
func TestBacklogSendsWhatItAnnounced(t *testing.T) {
	agent := &backlogAgent{}
	srv := httptest.NewServer(agent)
	t.Cleanup(srv.Close)
	n := testenv.StartNATS(t)
	// The collector's own responder checks pipelines and previews backlogs.
	col := testenv.StartCollector(t, testenv.CollectorOptions{Config: "configs/embedded.yaml",
		Env: map[string]string{"NATS_URL": n.URL(), "SVC_STREAM_REPLICAS": "1", "SVC_OUTBOUND_ALLOW": "127.0.0.1/32"}})
	dataDir := t.TempDir()
	cp := testenv.StartControlPlane(t, map[string]string{"NATS_URL": n.URL(), "SVC_JWT_SECRET": testJWTSecret,
		"SVC_DATA_DIR": dataDir, "SVC_OUTBOUND_ALLOW": "127.0.0.1/32", "SVC_PUBLIC_RECEIVER_URL": col.HTTP})
	s := &stack{nats: n, cp: cp}
	_, js := testenv.Connect(t, n.URL())

	owner, _ := s.signup(t, "backlog-owner@example.com")
	member, _ := s.signup(t, "backlog-member@example.com")
	pid := call(t, cp.URL, "POST", "/api/v1/projects", owner, map[string]string{"name": "orders"}).str("id")
	p := "/api/v1/projects/" + pid
	require.Equal(t, http.StatusCreated, call(t, cp.URL, "POST", p+"/members", owner, map[string]string{"email": "backlog-member@example.com"}).Status)
	key := call(t, cp.URL, "POST", p+"/keys", owner, map[string]string{"name": "k"}).str("key")
	require.NotEmpty(t, key)

	// The URL is set right after the events are stored: the pipeline starts after the raw
	// stream's last record when the URL is saved, so none of them is taken.
	sendEvents(t, col.HTTP, key, js, pid, 1, 25, 25)
	r := call(t, cp.URL, "PUT", p+"/pipeline", owner, map[string]any{"agent_endpoint_url": srv.URL + "/agent"})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Raw)
	assert.Never(t, func() bool { return len(agent.received()) > 0 }, 5*time.Second, 50*time.Millisecond,
		"setting the agent URL sends none of the 25 stored events")

	// A member may see what it would cost.
	r = call(t, cp.URL, "POST", p+"/pipeline/backlog", member, map[string]any{"last": 25, "preview": true})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Raw)
	assert.Equal(t, true, r.Body["preview"])
	assert.Equal(t, 25, num(t, r, "records"))
	assert.Equal(t, 25, num(t, r, "matched"), "the empty trigger matches every record")
	assert.Equal(t, 3, num(t, r, "calls"), "batches of 10, 10 and 5")
	assert.Equal(t, 1, num(t, r, "first_seq"))
	assert.Equal(t, 25, num(t, r, "last_seq"))
	assert.NotEmpty(t, r.str("from"))
	assert.NotEmpty(t, r.str("to"))
	// The MCP tool counts the same.
	cs, err := mcpSession(t, cp.URL, member)
	require.NoError(t, err)
	out, errText := tool(t, cs, "process_backlog", map[string]any{"project_id": pid, "last": 25, "preview": true})
	require.Empty(t, errText)
	assert.EqualValues(t, 3, out["calls"])
	assert.EqualValues(t, 25, out["records"])
	// ... but may not send it.
	r = call(t, cp.URL, "POST", p+"/pipeline/backlog", member, map[string]any{"last": 25})
	assert.Equal(t, http.StatusForbidden, r.Status, "%s", r.Raw)
	assert.Equal(t, "forbidden", r.code())
	_, errText = tool(t, cs, "process_backlog", map[string]any{"project_id": pid, "last": 25})
	assert.Contains(t, errText, "forbidden")
	assert.Empty(t, agent.received())

	// A start that expects another number than the range makes is refused.
	r = call(t, cp.URL, "POST", p+"/pipeline/backlog", owner, map[string]any{"last": 25, "expect_calls": 2})
	assert.Equal(t, http.StatusConflict, r.Status, "%s", r.Raw)
	assert.Equal(t, "preview_changed", r.code())

	r = call(t, cp.URL, "POST", p+"/pipeline/backlog", owner, map[string]any{"last": 25, "expect_calls": 3})
	require.Equal(t, http.StatusAccepted, r.Status, "%s", r.Raw)
	bl := r.Body["backlog"].(map[string]any)
	id, _ := bl["id"].(string)
	assert.Regexp(t, `^bl_[0-9a-f]{16}$`, id)
	assert.Equal(t, "queued", bl["state"])
	assert.EqualValues(t, 25, bl["records"])
	assert.EqualValues(t, 3, bl["calls"])
	assert.EqualValues(t, 1, bl["first_seq"])
	assert.EqualValues(t, 25, bl["last_seq"])
	assert.NotEmpty(t, bl["requested_at"])

	require.Eventually(t, func() bool { return sum(agent.received()) >= 25 }, 20*time.Second, 50*time.Millisecond,
		"the backlog reaches the agent")
	require.Eventually(t, func() bool {
		r = call(t, cp.URL, "GET", p+"/pipeline/backlog", member, nil)
		b, _ := r.Body["backlog"].(map[string]any)
		return r.Status == http.StatusOK && b != nil && b["state"] == "done"
	}, 20*time.Second, 100*time.Millisecond, "the backlog reads done")
	b := r.Body["backlog"].(map[string]any)
	assert.Equal(t, id, b["id"])
	assert.EqualValues(t, 25, b["processed"])
	assert.ElementsMatch(t, []int{10, 10, 5}, agent.received(), "exactly the 3 calls announced, with the 25 records")
	// MCP shows the same run, and refuses a request that names no range.
	out, errText = tool(t, cs, "process_backlog", map[string]any{"project_id": pid, "status": true})
	require.Empty(t, errText)
	mcpRun, _ := out["backlog"].(map[string]any)
	require.NotNil(t, mcpRun, "%v", out)
	assert.Equal(t, id, mcpRun["id"])
	assert.Equal(t, "done", mcpRun["state"])
	_, errText = tool(t, cs, "process_backlog", map[string]any{"project_id": pid, "preview": true})
	assert.Contains(t, errText, "invalid_body")

	// The request is in the project's mirror entry, with the numbers announced, after
	// another change publishes the project and after the control plane rebuilds the
	// mirror from its database.
	mb := mirrorBacklogOf(t, js, pid)
	require.NotNil(t, mb)
	require.Equal(t, http.StatusCreated, call(t, cp.URL, "POST", p+"/keys", owner, map[string]string{"name": "k2"}).Status)
	require.Equal(t, http.StatusOK, call(t, cp.URL, "PUT", p+"/pipeline", owner, map[string]any{"agent_endpoint_url": srv.URL + "/agent", "batch_size": 10}).Status)
	mb = mirrorBacklogOf(t, js, pid)
	require.NotNil(t, mb, "a pipeline save keeps the backlog in the mirror entry")
	kv, err := js.KeyValue(context.Background(), mirror.BucketProjects)
	require.NoError(t, err)
	cp.Kill()
	entry, err := kv.Get(context.Background(), pid)
	require.NoError(t, err)
	var stripped mirror.Project
	require.NoError(t, json.Unmarshal(entry.Value(), &stripped))
	stripped.Backlog, stripped.Version = nil, stripped.Version-1 // an older entry, as a lost write would leave
	raw, _ := json.Marshal(stripped)
	_, err = kv.Put(context.Background(), pid, raw)
	require.NoError(t, err)
	cp.Start()
	require.Eventually(t, func() bool {
		var got mirror.Project
		return get(t, kv, pid, &got) && got.Backlog != nil
	}, 20*time.Second, 100*time.Millisecond, "the control plane's rebuild of the mirror brings the backlog back")
	mb = mirrorBacklogOf(t, js, pid)
	assert.Equal(t, mirror.Backlog{ID: id, FirstSeq: 1, LastSeq: 25, Records: 25, Calls: 3, RequestedAt: mb.RequestedAt, RequestedBy: mb.RequestedBy}, *mb)
	assert.NotEmpty(t, mb.RequestedBy)

	// New events go to the agent as they come, and no backlog is sent again.
	sendEvents(t, col.HTTP, key, js, pid, 26, 1, 26)
	require.Eventually(t, func() bool { return sum(agent.received()) >= 26 }, 20*time.Second, 50*time.Millisecond, "a new event reaches the agent")
	got := agent.received()
	assert.Equal(t, 26, sum(got), "calls %v", got)
	assert.Equal(t, 1, got[len(got)-1], "the new event alone")
}

// Every refused request stores nothing; members preview but do not start; another
// tenant's project is not found; a project without an agent URL or with nothing to send
// is told so.
func TestBacklogRefusals(t *testing.T) {
	databases(t, func(t *testing.T, db map[string]string) {
		s := startBacklogStack(t, db)
		cp := s.cp.URL
		owner, _ := s.signup(t, "bl-owner@example.com")
		admin, _ := s.signup(t, "bl-admin@example.com")
		member, _ := s.signup(t, "bl-member@example.com")
		stranger, _ := s.signup(t, "bl-stranger@example.com")
		pid := call(t, cp, "POST", "/api/v1/projects", owner, map[string]string{"name": "a"}).str("id")
		other := call(t, cp, "POST", "/api/v1/projects", stranger, map[string]string{"name": "b"}).str("id")
		p := "/api/v1/projects/" + pid
		for email, role := range map[string]string{"bl-admin@example.com": "admin", "bl-member@example.com": "member"} {
			require.Equal(t, http.StatusCreated, call(t, cp, "POST", p+"/members", owner, map[string]string{"email": email, "role": role}).Status)
		}
		_, js := testenv.Connect(t, s.nats.URL())

		future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
		for _, body := range []any{
			map[string]any{}, map[string]any{"preview": true}, map[string]any{"last": 0}, map[string]any{"last": -3},
			map[string]any{"last": 10001}, map[string]any{"last": 1.5}, map[string]any{"last": "5"},
			map[string]any{"last": 5, "since": "2026-01-01T00:00:00Z"}, map[string]any{"since": future},
			map[string]any{"since": "yesterday"}, map[string]any{"since": "2026-01-01"}, map[string]any{"last": 5, "extra": 1},
			map[string]any{"last": 5, "preview": "yes"}, map[string]any{"since": nil}, []any{},
		} {
			for _, preview := range []bool{false, true} {
				if m, ok := body.(map[string]any); ok && preview {
					if _, has := m["preview"]; !has {
						m = maps(m)
						m["preview"] = true
						body = m
					}
				}
				r := call(t, cp, "POST", p+"/pipeline/backlog", owner, body)
				assert.Equal(t, http.StatusBadRequest, r.Status, "%v: %s", body, r.Raw)
				assert.Equal(t, "invalid_body", r.code(), "%v: %s", body, r.Raw)
				assert.NotEmpty(t, r.message())
			}
		}
		r := call(t, cp, "GET", p+"/pipeline/backlog", owner, nil)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Raw)
		assert.Nil(t, r.Body["backlog"], "nothing stored: %s", r.Raw)
		assert.Contains(t, string(r.Raw), `"backlog":null`)

		// Preview: any member; another tenant: not found, whatever they send.
		for _, tok := range []string{owner, admin, member} {
			r = call(t, cp, "POST", p+"/pipeline/backlog", tok, map[string]any{"last": 100, "preview": true})
			require.Equal(t, http.StatusOK, r.Status, "%s", r.Raw)
			assert.Equal(t, 0, num(t, r, "records"), "an empty stream")
			assert.Equal(t, 0, num(t, r, "calls"))
			assert.Nil(t, r.Body["from"])
		}
		for _, req := range []struct {
			method string
			body   any
		}{{"GET", nil}, {"POST", map[string]any{"last": 5, "preview": true}}, {"POST", map[string]any{"last": 5}}} {
			r = call(t, cp, req.method, p+"/pipeline/backlog", stranger, req.body)
			assert.Equal(t, http.StatusNotFound, r.Status, "%s %v: %s", req.method, req.body, r.Raw)
			assert.Equal(t, "not_found", r.code())
		}
		r = call(t, cp, "GET", "/api/v1/projects/"+other+"/pipeline/backlog", owner, nil)
		assert.Equal(t, http.StatusNotFound, r.Status)

		// Starting: owners and admins; with an agent URL; with something to send.
		r = call(t, cp, "POST", p+"/pipeline/backlog", member, map[string]any{"last": 5})
		assert.Equal(t, http.StatusForbidden, r.Status, "%s", r.Raw)
		assert.Equal(t, "forbidden", r.code())
		r = call(t, cp, "POST", p+"/pipeline/backlog", admin, map[string]any{"last": 5})
		assert.Equal(t, http.StatusConflict, r.Status, "%s", r.Raw)
		assert.Equal(t, "no_agent_url", r.code())
		require.Equal(t, http.StatusOK, call(t, cp, "PUT", p+"/pipeline", owner, map[string]any{"agent_endpoint_url": "https://agent.example.com/hook"}).Status)
		r = call(t, cp, "POST", p+"/pipeline/backlog", admin, map[string]any{"since": "2020-01-01T00:00:00Z"})
		assert.Equal(t, http.StatusConflict, r.Status, "%s", r.Raw)
		assert.Equal(t, "nothing_to_process", r.code())

		r = call(t, cp, "GET", p+"/pipeline/backlog", member, nil)
		assert.Contains(t, string(r.Raw), `"backlog":null`, "no refusal stored anything")
		assert.Nil(t, mirrorBacklogOf(t, js, pid))
		assert.NotContains(t, string(mustGet(t, js, pid)), `"backlog":{`)

		// Three records stored (published as a receiver does) while the project had no
		// agent URL (those stored after it was set are the live pipeline's, never a
		// backlog's): a start is queued, with the preview's numbers in the mirror entry,
		// and while it is (no pipeline role runs here to take it) another start is refused.
		require.Equal(t, http.StatusOK, call(t, cp, "PUT", p+"/pipeline", owner, map[string]any{"agent_endpoint_url": ""}).Status)
		for i := range 3 {
			_, err := js.Publish(context.Background(), streams.RawSubject(pid), []byte(fmt.Sprintf(`{"n": %d}`, i)))
			require.NoError(t, err)
		}
		require.Equal(t, http.StatusOK, call(t, cp, "PUT", p+"/pipeline", owner, map[string]any{"agent_endpoint_url": "https://agent.example.com/hook"}).Status)
		r = call(t, cp, "POST", p+"/pipeline/backlog", member, map[string]any{"last": 3, "preview": true})
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Raw)
		require.Equal(t, 3, num(t, r, "records"))
		require.Equal(t, 1, num(t, r, "calls"))
		r = call(t, cp, "POST", p+"/pipeline/backlog", admin, map[string]any{"last": 3})
		require.Equal(t, http.StatusAccepted, r.Status, "%s", r.Raw)
		id := r.Body["backlog"].(map[string]any)["id"].(string)
		mb := mirrorBacklogOf(t, js, pid)
		require.NotNil(t, mb)
		assert.Equal(t, id, mb.ID)
		assert.Equal(t, 3, mb.Records)
		assert.Equal(t, 1, mb.Calls)
		r = call(t, cp, "GET", p+"/pipeline/backlog", member, nil)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Raw)
		assert.Equal(t, "queued", r.Body["backlog"].(map[string]any)["state"])
		r = call(t, cp, "POST", p+"/pipeline/backlog", owner, map[string]any{"last": 3})
		assert.Equal(t, http.StatusConflict, r.Status, "%s", r.Raw)
		assert.Equal(t, "backlog_running", r.code())
		assert.Equal(t, id, mirrorBacklogOf(t, js, pid).ID, "the refused start changed nothing")
		r = call(t, cp, "GET", "/api/v1/projects/"+pid+"/pipeline/backlog", stranger, nil)
		assert.Equal(t, http.StatusNotFound, r.Status)
		assert.NotContains(t, string(r.Raw), id)
	})
}

// Without a data-plane process to count, preview and start are "retry later" (503 with
// Retry-After), as a pipeline save is, and nothing is stored.
func TestBacklogWithoutADataPlane(t *testing.T) {
	n := testenv.StartNATS(t)
	cp := testenv.StartControlPlane(t, map[string]string{"NATS_URL": n.URL(), "SVC_JWT_SECRET": testJWTSecret, "SVC_DATA_DIR": t.TempDir()})
	s := &stack{nats: n, cp: cp}
	owner, _ := s.signup(t, "bl-alone@example.com")
	p := "/api/v1/projects/" + call(t, cp.URL, "POST", "/api/v1/projects", owner, map[string]string{"name": "a"}).str("id")
	for _, body := range []map[string]any{{"last": 5, "preview": true}, {"since": "2026-01-01T00:00:00Z", "preview": true}} {
		r := call(t, cp.URL, "POST", p+"/pipeline/backlog", owner, body)
		assert.Equal(t, http.StatusServiceUnavailable, r.Status, "%s", r.Raw)
		assert.Equal(t, "unavailable", r.code())
		assert.NotEmpty(t, r.Header.Get("Retry-After"))
		assert.Contains(t, r.message(), "data plane")
	}
	r := call(t, cp.URL, "GET", p+"/pipeline/backlog", owner, nil)
	assert.Contains(t, string(r.Raw), `"backlog":null`)
}

func maps(m map[string]any) map[string]any {
	out := make(map[string]any, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	return out
}

func mustGet(t *testing.T, js jetstream.JetStream, pid string) []byte {
	t.Helper()
	kv, err := js.KeyValue(context.Background(), mirror.BucketProjects)
	require.NoError(t, err)
	e, err := kv.Get(context.Background(), pid)
	require.NoError(t, err)
	return e.Value()
}
