package e2e

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/streams"
)

func TestAgentOutputLandsOnTheOutputStream(t *testing.T) {
	e := startReceiver(t, nil)
	keyA := e.project(t, "out-a")
	e.project(t, "out-b")
	url := e.col.HTTP + "/internal/agent-output"

	r := post(t, url, keyA, "application/json", []byte(`{"request_id": "req_1", "payload": {"summary": "checkout is failing", "n": 1.50}}`), nil)
	require.Equal(t, http.StatusAccepted, r.StatusCode, "%s", r.Body)
	assert.JSONEq(t, `{"accepted": true, "request_id": "req_1"}`, string(r.Body))
	// The same result posted again (an agent retrying) is stored once; another result for
	// the same request is kept; the header serves when the body has no request id.
	require.Equal(t, http.StatusAccepted, post(t, url, keyA, "application/json", []byte(`{"request_id": "req_1", "payload": {"summary": "checkout is failing", "n": 1.50}}`), nil).StatusCode)
	require.Equal(t, http.StatusAccepted, post(t, url, keyA, "application/json", []byte(`{"request_id": "req_1", "payload": "and a follow-up"}`), nil).StatusCode)
	require.Equal(t, http.StatusAccepted, post(t, url, keyA, "application/json", []byte(`{"payload": [1, 2]}`), map[string]string{"X-Request-Id": "req_2"}).StatusCode)

	msgs := outputs(t, e.js, "out-a")
	require.Len(t, msgs, 3)
	assert.Equal(t, `{"summary": "checkout is failing", "n": 1.50}`, string(msgs[0].Data), "the payload as sent")
	assert.Equal(t, "req_1", msgs[0].Header.Get(streams.HeaderRequestID))
	assert.Equal(t, `"and a follow-up"`, string(msgs[1].Data))
	assert.Equal(t, "req_2", msgs[2].Header.Get(streams.HeaderRequestID))
	assert.Equal(t, streams.OutputSubject("out-a"), msgs[0].Subject)

	for name, tc := range map[string]struct {
		key, body string
		status    int
		code      string
	}{
		"no key":        {"", `{"request_id":"r","payload":1}`, 401, "missing_api_key"},
		"wrong key":     {"osk_wrong", `{"request_id":"r","payload":1}`, 401, "invalid_api_key"},
		"no request id": {keyA, `{"payload":1}`, 400, "invalid_body"},
		"not JSON":      {keyA, `{"request_id":`, 400, "invalid_json"},
	} {
		r := post(t, url, tc.key, "application/json", []byte(tc.body), nil)
		assert.Equal(t, tc.status, r.StatusCode, name)
		assert.Equal(t, tc.code, errorCode(t, r), name)
	}
	assert.Len(t, outputs(t, e.js, "out-a"), 3, "refused results store nothing")
	assert.Empty(t, outputs(t, e.js, "out-b"), "a key of A never writes into B's output stream")
	assert.Empty(t, stored(t, e.js, "out-a"), "results never go to the raw stream")
}
