package containers

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var client = &http.Client{Timeout: 10 * time.Second}

// call sends a JSON body (nil: none) and returns the status and the body.
func call(t *testing.T, method, url string, body any, headers map[string]string) (int, []byte) {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(t, err)
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, r)
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	require.NoError(t, err, "%s %s", method, url)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, out
}

// api calls the control plane's JSON API with a session token and decodes the answer.
func api(t *testing.T, method, url, token string, body any, want int) map[string]any {
	t.Helper()
	status, b := call(t, method, url, body, map[string]string{"Authorization": "Bearer " + token})
	require.Equal(t, want, status, "%s %s: %s", method, url, b)
	var out map[string]any
	require.NoError(t, json.Unmarshal(b, &out), "%s", b)
	return out
}

// project is what the README's walk sets up through the control plane's API: an
// account, a project, an API key, a pipeline to the agent and one destination.
type project struct {
	ID, Key, Token string
}

func setUp(t *testing.T, cp string, pipeline, sink map[string]any) project {
	t.Helper()
	signup := api(t, "POST", cp+"/api/v1/auth/signup", "", map[string]string{"email": "ops@example.com", "password": "a long passphrase"}, http.StatusCreated)
	p := project{Token: signup["token"].(string)}
	p.ID = api(t, "POST", cp+"/api/v1/projects", p.Token, map[string]string{"name": "shop"}, http.StatusCreated)["id"].(string)
	base := cp + "/api/v1/projects/" + p.ID
	p.Key = api(t, "POST", base+"/keys", p.Token, map[string]string{"name": "ci"}, http.StatusCreated)["key"].(string)
	api(t, "PUT", base+"/pipeline", p.Token, pipeline, http.StatusOK)
	api(t, "POST", base+"/sinks", p.Token, sink, http.StatusCreated)
	return p
}

// waitKeyAccepted waits until a receiver knows the project's key (the configuration
// mirror reaches it through NATS).
func waitKeyAccepted(t *testing.T, receiver, key string) {
	t.Helper()
	last := ""
	require.Eventually(t, func() bool {
		req, _ := http.NewRequest(http.MethodPost, receiver+"/v1/logs", bytes.NewReader([]byte(`{}`)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-API-Key", key)
		resp, err := client.Do(req)
		if err != nil {
			last = err.Error()
			return false
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		last = fmt.Sprintf("%d %s", resp.StatusCode, b)
		return resp.StatusCode == http.StatusOK
	}, 60*time.Second, 100*time.Millisecond, "receiver %s never accepted the key; last answer: %s", receiver, last)
}
