package otlphttp

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
)

// An OTLP client decodes errors as a google.rpc.Status in the encoding it sent, and
// retries 503s after Retry-After.
func TestWriteErrorSpeaksTheRequestsEncoding(t *testing.T) {
	busy := apierror.New(http.StatusServiceUnavailable, apierror.Unavailable, "retry later")
	busy.RetryAfter = 5 * time.Second
	w := httptest.NewRecorder()
	WriteError(w, Encoding{}, busy)
	require.Equal(t, http.StatusServiceUnavailable, w.Code)
	assert.Equal(t, ProtobufContentType, w.Header().Get("Content-Type"))
	assert.Equal(t, "5", w.Header().Get("Retry-After"))
	var st spb.Status
	require.NoError(t, proto.Unmarshal(w.Body.Bytes(), &st))
	assert.Equal(t, int32(codes.Unavailable), st.Code)
	assert.Equal(t, "retry later", st.Message)

	w = httptest.NewRecorder()
	WriteError(w, Encoding{JSON: true}, apierror.New(http.StatusRequestEntityTooLarge, apierror.PayloadTooLarge, "too many records"))
	require.Equal(t, http.StatusRequestEntityTooLarge, w.Code)
	assert.Equal(t, JSONContentType, w.Header().Get("Content-Type"))
	assert.Empty(t, w.Header().Get("Retry-After"))
	require.NoError(t, protojson.Unmarshal(w.Body.Bytes(), &st))
	assert.Equal(t, int32(codes.InvalidArgument), st.Code)
}

func TestForMediaType(t *testing.T) {
	enc, ok := ForMediaType("application/x-protobuf")
	assert.True(t, ok)
	assert.False(t, enc.JSON)
	enc, ok = ForMediaType("application/json")
	assert.True(t, ok)
	assert.True(t, enc.JSON)
	enc, ok = ForMediaType("text/plain")
	assert.False(t, ok)
	assert.True(t, enc.JSON, "errors for an unknown encoding are answered in JSON")
}
