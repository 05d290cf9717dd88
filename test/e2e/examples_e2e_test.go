package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/apikey"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/webhooksig"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// The SDKs' example agents (the README's) run as their users run them, as processes the
// pipeline calls, and are sent real OTLP: an ERROR log and an INFO log over OTLP/HTTP
// protobuf. Each example counts the errors among the records it was called with and
// posts that back; a webhook destination receives it. Examples that read a `level` field
// (as they once did) count 0 errors for every real error log: OTLP logs carry
// severityNumber.
func TestExampleAgentsCountErrorsInRealOTLP(t *testing.T) {
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	examples := []struct {
		name, bin string
		args      []string
		env       []string
	}{
		{"python", "python3", []string{filepath.Join(root, "sdk/python/examples/agent.py")},
			[]string{"PYTHONPATH=" + filepath.Join(root, "sdk/python"), "PYTHONDONTWRITEBYTECODE=1"}},
		{"typescript", "node", []string{filepath.Join(root, "sdk/typescript/examples/agent.js")}, nil},
	}
	e := startEmbedded(t, nil)
	for _, ex := range examples {
		t.Run(ex.name, func(t *testing.T) {
			if _, err := exec.LookPath(ex.bin); err != nil {
				if os.Getenv("CI") == "true" {
					t.Fatalf("%s is needed to run the %s example agent", ex.bin, ex.name)
				}
				t.Skipf("%s is not installed", ex.bin)
			}
			hook := startAgent(t)
			id := "example-" + ex.name
			port := testenv.FreePort(t)
			// The pipeline: every log at WARN or above calls the example agent, with the
			// group's earlier records as its window; its results go to a webhook.
			secret := webhooksig.NewSecret()
			require.NoError(t, e.m.PutProject(context.Background(), mirror.Project{ID: id, Version: 1, SigningSecret: secret,
				Sinks: []mirror.Sink{{ID: "s_hook", Kind: "webhook", URL: hook.URL, Enabled: true, Since: time.Now().UTC()}},
				Pipeline: mirror.Pipeline{Trigger: "severity_number >= 13", WindowEnabled: true, WindowDurationSeconds: 60,
					AgentEndpointURL: fmt.Sprintf("http://127.0.0.1:%d/", port)}}))
			key := apikey.Generate(apikey.KindProject)
			require.NoError(t, e.m.PutKey(context.Background(), apikey.Hash(key), mirror.KeyEntry{KeyID: "k-" + id, ProjectID: id, Scope: mirror.ScopeProject}))
			waitAccepted(t, e.col.HTTP, key)

			cmd := exec.Command(ex.bin, ex.args...)
			cmd.Env = append(append(os.Environ(), ex.env...),
				"PORT="+strconv.Itoa(port), "OTELCOL_SVC_SIGNING_SECRET="+secret,
				"OTELCOL_SVC_API_KEY="+key, "OTELCOL_SVC_RECEIVER_URL="+e.col.HTTP)
			cmd.Stderr = os.Stderr
			require.NoError(t, cmd.Start())
			t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
			require.Eventually(t, func() bool {
				c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), 200*time.Millisecond)
				if err == nil {
					c.Close()
				}
				return err == nil
			}, 20*time.Second, 20*time.Millisecond, "the %s example agent listens", ex.name)

			sendLogs(t, e.col.HTTP, key, logSpec{sev: 9, body: "retrying payment"}, logSpec{sev: 17, body: "payment failed"})

			require.Eventually(t, func() bool { return len(hook.delivered()) >= 1 }, 30*time.Second, 20*time.Millisecond,
				"the %s example's result reaches the destination", ex.name)
			var got struct{ Records, Errors int }
			require.NoError(t, json.Unmarshal(hook.delivered()[0].Body, &got), "%s", hook.delivered()[0].Body)
			assert.Equal(t, 1, got.Errors, "the ERROR log is counted as an error (severityNumber 17), the INFO one is not: %s", hook.delivered()[0].Body)
			assert.Equal(t, 2, got.Records, "the trigger and its window: %s", hook.delivered()[0].Body)
			assert.NotEmpty(t, hook.delivered()[0].Header.Get("webhook-signature"), "delivered signed")
		})
	}
}
