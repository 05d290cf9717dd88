package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// One unknown key reads the same over gRPC, OTLP/HTTP and the events API: a user who
// switches transport is not sent looking for a different problem.
func TestUnknownKeyHasOneMessageOverGRPCAndHTTP(t *testing.T) {
	e := startReceiver(t, nil)
	e.project(t, "known") // the receiver has loaded its keys: the refusal is about the key
	const want = "the API key is not valid: it is unknown, revoked, or not a project key"

	conn, err := grpc.NewClient(e.col.GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = plogotlp.NewGRPCClient(conn).Export(metadata.AppendToOutgoingContext(ctx, "x-api-key", "osk_wrong"),
		plogotlp.NewExportRequestFromLogs(plog.NewLogs()))
	assert.Equal(t, codes.Unauthenticated, status.Code(err))
	assert.Equal(t, want, status.Convert(err).Message(), "gRPC")

	r := post(t, e.col.HTTP+"/v1/events", "osk_wrong", "application/json", []byte(`{}`), nil)
	require.Equal(t, http.StatusUnauthorized, r.StatusCode)
	var shape struct {
		Error struct{ Code, Message string }
	}
	require.NoError(t, json.Unmarshal(r.Body, &shape), "%s", r.Body)
	assert.Equal(t, "invalid_api_key", shape.Error.Code)
	assert.Equal(t, want, shape.Error.Message, "events API")

	r = post(t, e.col.HTTP+"/v1/logs", "osk_wrong", "application/json", []byte(`{}`), nil)
	require.Equal(t, http.StatusUnauthorized, r.StatusCode)
	var st struct{ Message string }
	require.NoError(t, json.Unmarshal(r.Body, &st), "%s", r.Body)
	assert.Equal(t, want, st.Message, "OTLP/HTTP")
}
