package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/components/testenv"
)

// api calls the control plane's JSON API and decodes the answer.
func api(t *testing.T, method, url, token string, body any) (int, map[string]any) {
	t.Helper()
	b, err := json.Marshal(body)
	require.NoError(t, err)
	h := map[string]string{"Content-Type": "application/json"}
	if token != "" {
		h["Authorization"] = "Bearer " + token
	}
	r := send(t, method, url, b, h)
	var out map[string]any
	_ = json.Unmarshal(r.Body, &out)
	return r.StatusCode, out
}

// The whole loop, as the README's five-minute walk does it: sign up, create a project,
// a key, a pipeline calling the example agent and a Slack-format chat sink; send an OTLP
// error log; the example agent summarises it and posts the result; the sink turns it
// into a chat message.
func TestWholeLoopFromErrorLogToChatMessage(t *testing.T) {
	col := startEmbedded(t, nil)
	cp := testenv.StartControlPlane(t, map[string]string{"NATS_URL": col.col.EmbeddedNATSURL(), "SVC_DATA_DIR": t.TempDir(), "SVC_OUTBOUND_ALLOW": "127.0.0.0/8"})
	chat := startAgent(t)

	status, signup := api(t, "POST", cp.URL+"/api/v1/auth/signup", "", map[string]string{"email": "ops@example.com", "password": "correct horse battery staple"})
	require.Equal(t, http.StatusCreated, status, "%v", signup)
	token := signup["token"].(string)
	status, project := api(t, "POST", cp.URL+"/api/v1/projects", token, map[string]string{"name": "checkout"})
	require.Equal(t, http.StatusCreated, status, "%v", project)
	base := cp.URL + "/api/v1/projects/" + project["id"].(string)
	status, key := api(t, "POST", base+"/keys", token, map[string]string{"name": "loop"})
	require.Equal(t, http.StatusCreated, status, "%v", key)

	agentAddr := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	status, pipeline := api(t, "PUT", base+"/pipeline", token, map[string]any{
		"trigger":            `severity_number >= 17 and resource_attributes["service.name"] == "checkout"`,
		"agent_endpoint_url": "http://" + agentAddr + "/",
	})
	require.Equal(t, http.StatusOK, status, "%v", pipeline)
	status, sink := api(t, "POST", base+"/sinks", token, map[string]any{"kind": "chat", "url": chat.URL + "/slack-hook", "format": "slack"})
	require.Equal(t, http.StatusCreated, status, "%v", sink)

	agent := exec.Command(testenv.BuildPackage(t, "./examples/agent"))
	agent.Env = append(os.Environ(),
		"AGENT_LISTEN="+agentAddr,
		"OTELCOL_SVC_SIGNING_SECRET="+pipeline["signing_secret"].(string),
		"OTELCOL_SVC_RECEIVER_URL="+col.col.HTTP,
		"OTELCOL_SVC_API_KEY="+key["key"].(string),
	)
	var agentLog bytes.Buffer
	agent.Stdout, agent.Stderr = &agentLog, &agentLog
	require.NoError(t, agent.Start())
	t.Cleanup(func() { _ = agent.Process.Kill(); _ = agent.Wait() })

	waitAccepted(t, col.col.HTTP, key["key"].(string))
	otlp := `{"resourceLogs": [{"resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "checkout"}}]},
	  "scopeLogs": [{"logRecords": [
	    {"severityNumber": 17, "severityText": "ERROR", "body": {"stringValue": "payment declined"}},
	    {"severityNumber": 9, "severityText": "INFO", "body": {"stringValue": "cart loaded"}}]}]}]}`
	r := post(t, col.col.HTTP+"/v1/logs", key["key"].(string), "application/json", []byte(otlp), nil)
	require.Equal(t, http.StatusOK, r.StatusCode, "%s", r.Body)

	require.Eventually(t, func() bool { return len(chat.delivered()) > 0 }, 30*time.Second, 20*time.Millisecond,
		"a chat message; agent log:\n%s", &agentLog)
	var msg struct{ Text string }
	require.NoError(t, json.Unmarshal(chat.delivered()[0].Body, &msg))
	assert.Equal(t, "1 error in checkout: payment declined (×1)", msg.Text, "the agent's summary of the error record only")
	assert.True(t, strings.HasPrefix(chat.delivered()[0].Header.Get("X-Request-Id"), "req_"), "the id of the agent call the result answers")
	time.Sleep(300 * time.Millisecond)
	assert.Len(t, chat.delivered(), 1, "one call, one result, one message")
}
