package e2e

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/otelcol-svc/otelcol-svc/internal/apikey"
)

func TestBadRequestsGetContractErrorsAndStoreNothing(t *testing.T) {
	e := startReceiver(t, map[string]string{"SVC_MAX_BODY_BYTES": "4096"})
	key := e.project(t, "errs")
	big := []byte(`{"pad": "` + strings.Repeat("x", 5000) + `"}`)

	for _, tc := range []struct {
		name, path, key, ct string
		body                []byte
		status              int
		code                string
	}{
		{"no key", "/v1/events", "", "application/json", []byte(`{}`), 401, "missing_api_key"},
		{"unknown key", "/v1/events", "osk_unknown", "application/json", []byte(`{}`), 401, "invalid_api_key"},
		{"invalid JSON", "/v1/events", key, "application/json", []byte(`{"a":`), 400, "invalid_json"},
		{"not an object", "/v1/events", key, "application/json", []byte(`[{"a":1}]`), 400, "invalid_body"},
		{"wrong content type", "/v1/events", key, "text/plain", []byte(`{"a":1}`), 415, "unsupported_media_type"},
		{"too large", "/v1/events", key, "application/json", big, 413, "payload_too_large"},
		{"batch too large", "/v1/events/batch", key, "application/json", big, 413, "payload_too_large"},
		{"unknown path", "/v2/events", key, "application/json", []byte(`{}`), 404, "not_found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := post(t, e.col.HTTP+tc.path, tc.key, tc.ct, tc.body, nil)
			require.Equal(t, tc.status, r.StatusCode, "%s", r.Body)
			assert.Equal(t, "application/json", r.Header.Get("Content-Type"))
			assert.Equal(t, tc.code, errorCode(t, r))
		})
	}

	// OTLP paths answer a google.rpc.Status in the request's encoding.
	r := post(t, e.col.HTTP+"/v1/logs", "", "application/x-protobuf", nil, nil)
	require.Equal(t, 401, r.StatusCode)
	assert.Equal(t, "application/x-protobuf", r.Header.Get("Content-Type"))
	var st spb.Status
	require.NoError(t, proto.Unmarshal(r.Body, &st))
	assert.Equal(t, int32(16), st.Code) // UNAUTHENTICATED
	assert.Contains(t, st.Message, "X-API-Key")

	r = post(t, e.col.HTTP+"/v1/logs", key, "application/json", []byte(`{"resourceLogs": 7}`), nil)
	require.Equal(t, 400, r.StatusCode)
	assert.Contains(t, string(r.Body), `"code":3`)
	r = post(t, e.col.HTTP+"/v1/logs", key, "text/csv", []byte(`a,b`), nil)
	require.Equal(t, 415, r.StatusCode)
	r = post(t, e.col.HTTP+"/v1/logs", key, "application/json", bytes.Repeat([]byte(" "), 5000), nil)
	require.Equal(t, 413, r.StatusCode)

	// A corrupt gzip body is refused too.
	r = post(t, e.col.HTTP+"/v1/events", key, "application/json", []byte("not gzip"), map[string]string{"Content-Encoding": "gzip"})
	require.Equal(t, 400, r.StatusCode, "%s", r.Body)
	assert.Equal(t, "invalid_body", errorCode(t, r))

	assert.Empty(t, stored(t, e.js, "errs"))
}

func TestKeyOfProjectAWritesOnlyIntoA(t *testing.T) {
	e := startReceiver(t, nil)
	keyA := e.project(t, "tenant-a")
	e.project(t, "tenant-b")
	for i := 0; i < 5; i++ {
		r := post(t, e.col.HTTP+"/v1/events", keyA, "application/json", []byte(`{"project":"tenant-b"}`), nil)
		require.Equal(t, http.StatusAccepted, r.StatusCode)
	}
	assert.Len(t, stored(t, e.js, "tenant-a"), 5)
	assert.Empty(t, stored(t, e.js, "tenant-b"), "a key of A must never write into B")
}

func TestRevokedKeyStopsWorkingWithinOneSecond(t *testing.T) {
	e := startReceiver(t, nil)
	key := e.project(t, "revoke")
	require.Equal(t, http.StatusAccepted, post(t, e.col.HTTP+"/v1/events", key, "application/json", []byte(`{}`), nil).StatusCode)

	require.NoError(t, e.m.DeleteKey(context.Background(), apikey.Hash(key)))
	revoked := time.Now()
	require.Eventually(t, func() bool {
		return post(t, e.col.HTTP+"/v1/events", key, "application/json", []byte(`{}`), nil).StatusCode == http.StatusUnauthorized
	}, time.Second, 10*time.Millisecond)
	t.Logf("key refused %v after revocation", time.Since(revoked))
}

// The shipped configs take the object limit from SVC_MAX_OBJECTS_PER_REQUEST.
func TestObjectLimitIsASetting(t *testing.T) {
	e := startReceiver(t, map[string]string{"SVC_MAX_OBJECTS_PER_REQUEST": "2"})
	key := e.project(t, "objlimit")
	r := post(t, e.col.HTTP+"/v1/events/batch", key, "application/json", []byte(`[{"a":1},{"a":2},{"a":3}]`), nil)
	assert.Equal(t, http.StatusRequestEntityTooLarge, r.StatusCode, "%s", r.Body)
	assert.Equal(t, "payload_too_large", errorCode(t, r))
	assert.Empty(t, stored(t, e.js, "objlimit"))
	r = post(t, e.col.HTTP+"/v1/events/batch", key, "application/json", []byte(`[{"a":1},{"a":2}]`), nil)
	assert.Equal(t, http.StatusAccepted, r.StatusCode, "%s", r.Body)
}
