package streams

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// The audit stream is created by whichever process publishes first, again without harm by
// the next, keeps one record per message id within an hour (a busy key's reads make one
// record) and files each project's records under its own subject.
func TestAuditStreamDedupesAndSeparatesProjects(t *testing.T) {
	srv := testenv.StartNATS(t)
	_, js := testenv.Connect(t, srv.URL())
	ctx := context.Background()

	require.NoError(t, Ensure(ctx, js, AuditConfig(1)))
	require.NoError(t, Ensure(ctx, js, AuditConfig(1)), "a second publisher's ensure is harmless")
	s, err := js.Stream(ctx, AuditStream)
	require.NoError(t, err)
	cfg := s.CachedInfo().Config
	assert.Equal(t, int64(AuditMaxBytes), cfg.MaxBytes, "bounded")
	assert.Equal(t, 7*24*time.Hour, cfg.MaxAge)

	read := func(project string) *nats.Msg {
		return &nats.Msg{Subject: AuditSubject(project), Data: []byte(`{"action":"key.read"}`),
			Header: nats.Header{HeaderMsgID: []string{"key.read:" + project + ":key_1:deliveries:2026112704"}}}
	}
	for i := 0; i < 3; i++ {
		_, err := js.PublishMsg(ctx, read("pa"))
		require.NoError(t, err)
	}
	_, err = js.PublishMsg(ctx, read("pb"))
	require.NoError(t, err)

	info, err := s.Info(ctx, jetstream.WithSubjectFilter(AuditStream+".>"))
	require.NoError(t, err)
	assert.Equal(t, map[string]uint64{"svc-audit.pa": 1, "svc-audit.pb": 1}, info.State.Subjects)

	assert.Equal(t, "pa", AuditProject("svc-audit.pa"))
	assert.Equal(t, "", AuditProject("svc-audit.p.a"))
	assert.Equal(t, "", AuditProject("svc-ai-raw.pa.in"))
}
