package incident_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/incident"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// A root deleted in Slack is posted again and replaces the thread; a second replacer
// that still names the deleted root changes nothing (the first replacement stays).
func TestReplaceChatThread(t *testing.T) {
	n := testenv.StartNATS(t)
	_, js := testenv.Connect(t, n.URL())
	ctx := context.Background()
	st, err := incident.Open(ctx, js, 1)
	require.NoError(t, err)
	res, err := st.Apply(ctx, "p1", incident.Settings{GroupInterval: time.Second, ResolveAfter: time.Hour},
		incident.Join{Fingerprint: "fp", BatchKey: "1", Events: 1, Title: "x", At: time.Now()})
	require.NoError(t, err)
	id := res.Incident.ID
	old := incident.ChatThread{Channel: "C1", TS: "1.1"}
	require.NoError(t, st.SetChatThread(ctx, "p1", id, "s1", old))

	require.NoError(t, st.ReplaceChatThread(ctx, "p1", id, "s1", old, incident.ChatThread{Channel: "C1", TS: "2.2"}))
	require.NoError(t, st.ReplaceChatThread(ctx, "p1", id, "s1", old, incident.ChatThread{Channel: "C1", TS: "3.3"}))
	got, err := st.Get(ctx, "p1", id)
	require.NoError(t, err)
	assert.Equal(t, "2.2", got.Chat["s1"].TS)

	require.NoError(t, st.ReplaceChatThread(ctx, "p1", id, "s2", old, incident.ChatThread{Channel: "C1", TS: "4.4"}))
	got, err = st.Get(ctx, "p1", id)
	require.NoError(t, err)
	assert.NotContains(t, got.Chat, "s2", "no thread to replace: none is made")
	assert.ErrorIs(t, st.ReplaceChatThread(ctx, "p1", incident.ID(incident.FingerprintHash("fp"), 9), "s1", old, old), incident.ErrNotFound)
}
