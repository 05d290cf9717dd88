package e2e

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

	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// The whole loop, as the README's five-minute walk does it: sign up, create a project,
// a key, a pipeline calling the example agent and a Slack-format chat sink; send an OTLP
// error log; the example agent summarises it and posts the result; the sink turns it
// into a chat message.
func TestWholeLoopFromErrorLogToChatMessage(t *testing.T) {
	col := startEmbedded(t, nil)
	cp := testenv.StartControlPlane(t, map[string]string{"NATS_URL": col.col.EmbeddedNATSURL(), "SVC_DATA_DIR": t.TempDir(), "SVC_OUTBOUND_ALLOW": "127.0.0.0/8"})
	chat := startAgent(t)

	agentAddr := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	p := setUpThroughAPI(t, cp.URL, "checkout",
		map[string]any{
			"trigger":            `severity_number >= 17 and resource_attributes["service.name"] == "checkout"`,
			"agent_endpoint_url": "http://" + agentAddr + "/",
		},
		map[string]any{"kind": "chat", "url": chat.URL + "/slack-hook", "format": "slack"})

	agent := exec.Command(testenv.BuildPackage(t, "./examples/agent"))
	agent.Env = append(os.Environ(),
		"AGENT_LISTEN="+agentAddr,
		"OTELCOL_SVC_SIGNING_SECRET="+p.Pipeline["signing_secret"].(string),
		"OTELCOL_SVC_RECEIVER_URL="+col.col.HTTP,
		"OTELCOL_SVC_API_KEY="+p.Key,
	)
	var agentLog bytes.Buffer
	agent.Stdout, agent.Stderr = &agentLog, &agentLog
	require.NoError(t, agent.Start())
	t.Cleanup(func() { _ = agent.Process.Kill(); _ = agent.Wait() })

	waitAccepted(t, col.col.HTTP, p.Key)
	sendErrorLog := func(body string, more ...string) {
		t.Helper()
		recs := []string{`{"severityNumber": 17, "severityText": "ERROR", "body": {"stringValue": "` + body + `"}}`}
		for _, info := range more {
			recs = append(recs, `{"severityNumber": 9, "severityText": "INFO", "body": {"stringValue": "`+info+`"}}`)
		}
		otlp := `{"resourceLogs": [{"resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "checkout"}}]},
		  "scopeLogs": [{"logRecords": [` + strings.Join(recs, ",") + `]}]}]}`
		r := post(t, col.col.HTTP+"/v1/logs", p.Key, "application/json", []byte(otlp), nil)
		require.Equal(t, http.StatusOK, r.StatusCode, "%s", r.Body)
	}
	sendErrorLog("payment declined", "cart loaded")

	require.Eventually(t, func() bool { return len(chat.delivered()) > 0 }, 30*time.Second, 20*time.Millisecond,
		"a chat message; agent log:\n%s", &agentLog)
	var msg struct{ Text string }
	require.NoError(t, json.Unmarshal(chat.delivered()[0].Body, &msg))
	assert.Equal(t, "1 error in checkout: payment declined (×1)", msg.Text, "the agent's summary of the error record only")
	assert.True(t, strings.HasPrefix(chat.delivered()[0].Header.Get("X-Request-Id"), "req_"), "the id of the agent call the result answers")

	// One call, one result, one message: a second call for the error (before its record
	// is acked) or a second delivery of its result would come before the sentinel's
	// message. The pipeline calls the agent for one record after the other, and the chat
	// destination takes the output stream in order; the one hop without an order is the
	// example agent's own goroutine posting the result, which started before the
	// sentinel was even sent.
	pipelineSettled(t, col.js, p.ID)
	sendErrorLog("sentinel")
	const sentinel = "1 error in checkout: sentinel (×1)"
	var texts []string
	require.Eventually(t, func() bool {
		texts = nil
		for _, c := range chat.delivered() {
			require.NoError(t, json.Unmarshal(c.Body, &msg))
			if msg.Text == sentinel {
				return true
			}
			texts = append(texts, msg.Text)
		}
		return false
	}, 30*time.Second, 20*time.Millisecond, "the sentinel's chat message; agent log:\n%s", &agentLog)
	assert.Equal(t, []string{"1 error in checkout: payment declined (×1)"}, texts, "one call, one result, one message")
}
