package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// A hundred projects on the embedded default with default settings (each with a pipeline
// and a webhook sink, made through the control plane as a user would): every one ingests,
// reaches its agent and its webhook. Before streams stopped reserving their byte limit in
// nats-server's store, the 29th project's streams could not be created.
func TestHundredProjectsOnTheEmbeddedDefault(t *testing.T) {
	const projects = 100
	col := startEmbedded(t, nil)
	// One account owns them all, past the free tier's project limit.
	cp := testenv.StartControlPlane(t, map[string]string{"NATS_URL": col.col.EmbeddedNATSURL(), "SVC_DATA_DIR": t.TempDir(),
		"SVC_OUTBOUND_ALLOW": "127.0.0.0/8", "SVC_MAX_PROJECTS_PER_ACCOUNT": "0"})

	var mu sync.Mutex
	keys := map[string]string{} // project number -> API key
	calls, results := map[string]int{}, map[string]int{}
	// The agent answers each call with a result naming the project, posted back with the
	// call's request id, as an agent does.
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := strings.TrimPrefix(r.URL.Path, "/agent/")
		mu.Lock()
		calls[n]++
		key := keys[n]
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
		reqID := r.Header.Get("X-Request-Id")
		go func() {
			body := fmt.Sprintf(`{"request_id":%q,"payload":{"project":%q}}`, reqID, n)
			req, _ := http.NewRequest("POST", col.col.HTTP+"/internal/agent-output", bytes.NewReader([]byte(body)))
			req.Header.Set("X-API-Key", key)
			req.Header.Set("Content-Type", "application/json")
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
	}))
	t.Cleanup(agent.Close)
	webhook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var got struct{ Project string }
		_ = json.NewDecoder(r.Body).Decode(&got)
		mu.Lock()
		if got.Project == strings.TrimPrefix(r.URL.Path, "/hook/") {
			results[got.Project]++
		}
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(webhook.Close)

	status, signup := api(t, "POST", cp.URL+"/api/v1/auth/signup", "", map[string]string{"email": "many@example.com", "password": "correct horse battery staple"})
	require.Equal(t, http.StatusCreated, status, "%v", signup)
	token := signup["token"].(string)
	for i := 0; i < projects; i++ {
		n := strconv.Itoa(i)
		status, p := api(t, "POST", cp.URL+"/api/v1/projects", token, map[string]string{"name": "project " + n})
		require.Equal(t, http.StatusCreated, status, "project %d: %v", i, p)
		base := cp.URL + "/api/v1/projects/" + p["id"].(string)
		status, k := api(t, "POST", base+"/keys", token, map[string]string{"name": "ingest"})
		require.Equal(t, http.StatusCreated, status, "project %d: %v", i, k)
		status, body := api(t, "PUT", base+"/pipeline", token, map[string]any{"agent_endpoint_url": agent.URL + "/agent/" + n})
		require.Equal(t, http.StatusOK, status, "project %d: %v", i, body)
		status, body = api(t, "POST", base+"/sinks", token, map[string]any{"kind": "webhook", "url": webhook.URL + "/hook/" + n})
		require.Equal(t, http.StatusCreated, status, "project %d: %v", i, body)
		mu.Lock()
		keys[n] = k["key"].(string)
		mu.Unlock()
	}
	for i := 0; i < projects; i++ {
		n := strconv.Itoa(i)
		waitAccepted(t, col.col.HTTP, keys[n])
		r := post(t, col.col.HTTP+"/v1/events", keys[n], "application/json", []byte(`{"project":`+strconv.Quote(n)+`}`), nil)
		require.Equal(t, http.StatusAccepted, r.StatusCode, "project %d: %s", i, r.Body)
	}
	missing := func(m map[string]int) []string {
		mu.Lock()
		defer mu.Unlock()
		var out []string
		for i := 0; i < projects; i++ {
			if m[strconv.Itoa(i)] == 0 {
				out = append(out, strconv.Itoa(i))
			}
		}
		return out
	}
	ok := assert.Eventually(t, func() bool { return len(missing(calls)) == 0 }, 60*time.Second, 50*time.Millisecond)
	if !ok {
		t.Fatalf("projects whose agent was never called: %v", missing(calls))
	}
	require.Eventually(t, func() bool { return len(missing(results)) == 0 }, 60*time.Second, 50*time.Millisecond,
		"projects whose webhook never got the result: %v", func() []string { return missing(results) })
}
