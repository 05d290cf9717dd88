package containers

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// dashboardScript is the app's script in the built dashboard's page.
var dashboardScript = regexp.MustCompile(`<script[^>]*\ssrc="(/assets/[^"]+\.js)"`)

// deploy/compose/embedded.yaml is `make run` in containers: the README's five-minute
// walk against it, from signup to the chat message, with a local agent and a local
// stand-in for Slack (allowed through SVC_OUTBOUND_ALLOW, as the README's make run).
func TestComposeEmbeddedReadmeWalk(t *testing.T) {
	images(t)
	t.Parallel()
	port := func() string { return strconv.Itoa(testenv.FreePort(t)) }
	recv, grpc, health, metrics, natsPort, cpPort := port(), port(), port(), port(), port(), port()
	receiver, cp := "http://127.0.0.1:"+recv, "http://127.0.0.1:"+cpPort

	// The customer's side: an agent that summarises the records it is sent and posts the
	// summary back with the call's request id, and a chat channel.
	type agentCall struct {
		requestID string
		bodies    []string
	}
	var mu sync.Mutex
	var calls []agentCall
	var chat []string
	var key string
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var recs []struct {
			Body string `json:"body"`
		}
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &recs); err != nil {
			t.Errorf("the agent call is not a JSON array of records: %v: %s", err, b)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		c := agentCall{requestID: r.Header.Get("X-Request-Id")}
		for _, rec := range recs {
			c.bodies = append(c.bodies, rec.Body)
		}
		mu.Lock()
		calls = append(calls, c)
		k := key
		mu.Unlock()
		text := strconv.Itoa(len(c.bodies)) + " error in checkout: " + strings.Join(c.bodies, "; ")
		status, out := postResult(receiver+"/internal/agent-output", k, c.requestID,
			map[string]any{"request_id": c.requestID, "payload": map[string]any{"text": text}})
		if status != http.StatusAccepted {
			t.Errorf("the receiver refused the agent's result: %d %s", status, out)
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"accepted"}`))
	}))
	t.Cleanup(agent.Close)
	slack := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		chat = append(chat, string(b))
		mu.Unlock()
	}))
	t.Cleanup(slack.Close)

	began := time.Now()
	c := composeUp(t, "embedded.yaml", map[string]string{
		"SVC_RECEIVER_LISTEN":     "127.0.0.1:" + recv,
		"SVC_OTLP_GRPC_LISTEN":    "127.0.0.1:" + grpc,
		"SVC_HEALTH_LISTEN":       "127.0.0.1:" + health,
		"SVC_METRICS_HOST":        "127.0.0.1",
		"SVC_METRICS_PORT":        metrics,
		"SVC_NATS_PORT":           natsPort,
		"SVC_CONTROLPLANE_LISTEN": "127.0.0.1:" + cpPort,
		"SVC_DASHBOARD_ORIGIN":    cp,
		"SVC_PUBLIC_URL":          cp,
		"SVC_PUBLIC_RECEIVER_URL": receiver,
		"SVC_OUTBOUND_ALLOW":      "127.0.0.0/8",
		"SVC_JWT_SECRET":          secret(),
	})
	// Ready as make run says it: the collector's health check and the control plane's
	// /readyz (NATS reached, configuration mirror published).
	waitOK(t, 90*time.Second, "http://127.0.0.1:"+health+"/", cp+"/readyz")
	t.Logf("embedded default ready %s after docker-compose up", time.Since(began).Round(100*time.Millisecond))
	waitOK(t, 10*time.Second, "http://127.0.0.1:"+metrics+"/metrics")
	// The built dashboard is in the control plane's image: its page loads the app's
	// script from /assets/, which the image serves. Without npm, dist holds only the page
	// saying how to build it (no script), which is allowed outside CI.
	status, page := call(t, "GET", cp+"/", nil, nil)
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, string(page), "<html")
	if script := dashboardScript.FindSubmatch(page); script != nil {
		status, js := call(t, "GET", cp+string(script[1]), nil, nil)
		require.Equal(t, http.StatusOK, status, "the dashboard's script %s", script[1])
		require.NotEmpty(t, js, "the dashboard's script %s", script[1])
	} else if os.Getenv("CI") == "true" {
		t.Fatalf("the control plane serves no built dashboard (no /assets/ script; make web builds it, CI=true: not skipped):\n%s", page)
	} else {
		t.Logf("dashboard check skipped: the image holds the placeholder page (controlplane/web/dist was not built: no npm?)")
	}

	p := setUp(t, cp,
		map[string]any{
			"trigger":            `severity_number >= 17 and resource_attributes["service.name"] == "checkout"`,
			"agent_endpoint_url": agent.URL + "/",
		},
		map[string]any{"kind": "chat", "url": slack.URL + "/slack", "format": "slack"})
	mu.Lock()
	key = p.Key
	mu.Unlock()
	waitKeyAccepted(t, receiver, p.Key)

	status, out := call(t, "POST", receiver+"/v1/logs", json.RawMessage(`{
	  "resourceLogs": [{"resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "checkout"}}]},
	    "scopeLogs": [{"logRecords": [
	      {"severityNumber": 17, "severityText": "ERROR", "body": {"stringValue": "payment provider timed out"}},
	      {"severityNumber": 9, "body": {"stringValue": "all good"}}]}]}]}`), map[string]string{"X-API-Key": p.Key})
	require.Equal(t, http.StatusOK, status, "%s", out)

	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(chat) > 0
	}, 30*time.Second, 50*time.Millisecond, "the chat stand-in never received the agent's result")
	mu.Lock()
	gotCalls, gotChat := slices.Clone(calls), slices.Clone(chat)
	mu.Unlock()
	require.Len(t, gotCalls, 1, "one agent call: the error log; the info log does not match the trigger")
	assert.Equal(t, []string{"payment provider timed out"}, gotCalls[0].bodies)
	assert.NotEmpty(t, gotCalls[0].requestID)
	require.Len(t, gotChat, 1)
	var msg struct{ Text string }
	require.NoError(t, json.Unmarshal([]byte(gotChat[0]), &msg), "%s", gotChat[0])
	// The agent's text, then a link to the delivery in the dashboard where the control
	// plane serves it (SVC_PUBLIC_URL reached the collector in its container).
	first, link, _ := strings.Cut(msg.Text, "\n")
	assert.Equal(t, "1 error in checkout: payment provider timed out", first)
	assert.True(t, strings.HasPrefix(link, "<"+cp+"/projects/"+p.ID+"/deliveries?"), "link %q", link)

	// The state is on the named volumes: after both containers restart, the account,
	// its project and its key are still there.
	restarted := time.Now()
	out2, err := c.run("restart", "collector", "controlplane")
	require.NoError(t, err, out2)
	waitOK(t, 90*time.Second, "http://127.0.0.1:"+health+"/", cp+"/readyz")
	t.Logf("ready again %s after docker-compose restart", time.Since(restarted).Round(100*time.Millisecond))
	api(t, "GET", cp+"/api/v1/projects/"+p.ID, p.Token, nil, http.StatusOK)
	waitKeyAccepted(t, receiver, p.Key)
}

// postResult posts the agent's result as the SDKs do, with the project's key and the
// request id (from the agent's handler: no require there).
func postResult(url, key, requestID string, body any) (int, string) {
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-API-Key", key)
	req.Header.Set("X-Request-Id", requestID)
	resp, err := client.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}
