package jetstreamexporter

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
	"github.com/otelcol-svc/otelcol-svc/internal/usage"
)

// A receiver claimed the account's 80% notice and died before publishing it (its entry
// says claimed, long ago; nothing on the stream): this receiver publishes it to the
// project's output stream. A second send of the same notice within the duplicate window
// (a sender that published, then died before marking it sent) does not reach the sinks
// twice; a project without an enabled sink gets nothing.
func TestNoticeOfADeadReceiverReachesTheSinksOnce(t *testing.T) {
	x := startMetered(t, func(c *Config) { c.Usage.FreeTierEvents = 100 })
	ctx := context.Background()
	sink := []mirror.Sink{{ID: "s_hook", Kind: "webhook", URL: "https://example.com/hook", Enabled: true}}
	require.NoError(t, x.m.PutProject(ctx, mirror.Project{ID: "told", AccountID: "acct_dead", Name: "shop", Version: 1, Sinks: sink}))
	require.NoError(t, x.m.PutProject(ctx, mirror.Project{ID: "quiet", AccountID: "acct_dead", Version: 1}))
	require.Eventually(t, func() bool {
		_, a := x.e.usage.cache.Project("told")
		_, b := x.e.usage.cache.Project("quiet")
		return a && b
	}, 5*time.Second, 10*time.Millisecond)

	now := time.Now().UTC()
	n := usage.Notice{Account: "acct_dead", Month: usage.Month(now), Percent: 80, Limit: 100, Used: 80, At: now, ResetAt: usage.ResetAt(now)}
	kv, err := x.js.KeyValue(ctx, usage.BucketUsage)
	require.NoError(t, err)
	// The entry as a receiver's claim writes it (internal/usage noticeEntry).
	claim := fmt.Sprintf(`{"account":"acct_dead","month":%q,"percent":80,"limit":100,"used":80,"at":%q,"reset_at":%q,"state":"claimed","claimed_at":%d,"attempts":1}`,
		n.Month, now.Format(time.RFC3339Nano), n.ResetAt.Format(time.RFC3339), now.Add(-time.Hour).UnixMilli())
	_, err = kv.Create(ctx, "n.acct_dead."+n.Month+".100.80", []byte(claim))
	require.NoError(t, err)

	out := streams.OutputStream("told")
	require.Eventually(t, func() bool { return streamCount(t, x.js, out) == 1 }, 10*time.Second, 20*time.Millisecond,
		"the notice reaches the project's output stream")
	s, err := x.js.Stream(ctx, out)
	require.NoError(t, err)
	msg, err := s.GetMsg(ctx, 1)
	require.NoError(t, err)
	assert.Contains(t, string(msg.Data), `"text":"otelcol-svc: the account of project shop has used 80% of this month's 100 events (80); at 100% new events are refused until `+
		n.ResetAt.UTC().Format("2 January 2006 15:04 UTC")+`."`, "in the service's own words")
	assert.Equal(t, streams.SignalNotice, msg.Header.Get(streams.HeaderSignal),
		"marked as the service's notice, so the sink role sends it without the destination's text template")
	assert.Equal(t, "notice-acct_dead-"+n.Month+"-100-80-told", msg.Header.Get(streams.HeaderMsgID))

	require.NoError(t, x.e.usage.notify(ctx, n), "sent again, as after a sender died between publishing and marking")
	assert.Equal(t, 1, streamCount(t, x.js, out), "dropped as a duplicate: the sinks get it once")
	assert.Equal(t, 0, streamCount(t, x.js, streams.OutputStream("quiet")), "no enabled sink, no notice")
}
