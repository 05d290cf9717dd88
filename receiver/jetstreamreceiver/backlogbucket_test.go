package jetstreamreceiver

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
	"github.com/otelcol-svc/otelcol-svc/internal/validation"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// bucketConfig is the svc-backlogs bucket's stream configuration.
func bucketConfig(t *testing.T, js jetstream.JetStream) jetstream.StreamConfig {
	t.Helper()
	kv, err := js.KeyValue(context.Background(), validation.BacklogsBucket)
	require.NoError(t, err)
	st, err := kv.Status(context.Background())
	require.NoError(t, err)
	return st.(*jetstream.KeyValueBucketStatus).StreamInfo().Config
}

// The bucket whose done entries keep a finished backlog from running again is bound as
// it exists: a pipeline process starting does not rewrite what an operator (or another
// process, configured with more replicas) made of it.
func TestTheBacklogBucketIsBoundAsItIs(t *testing.T) {
	_, js := testenv.Connect(t, testenv.StartNATS(t).URL())
	ctx := context.Background()
	_, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: validation.BacklogsBucket, Description: "raised by the operator",
		History: 1, Storage: jetstream.FileStorage, MaxBytes: 64 << 20})
	require.NoError(t, err)
	r := &jsReceiver{js: js, cfg: createDefaultConfig().(*Config)}
	_, err = r.backlogKV(ctx)
	require.NoError(t, err)
	cfg := bucketConfig(t, js)
	assert.Equal(t, "raised by the operator", cfg.Description)
	assert.Equal(t, int64(64<<20), cfg.MaxBytes)
}

// A backlog's pulls are bounded by bytes as well as records: a batch of large records,
// or a thousand past the range (acked unused), is not pulled into memory at once.
func TestABacklogPullsABoundedNumberOfBytes(t *testing.T) {
	const prj, id = "prj_backlog_bytes", "bl_bytes1"
	e := newBacklogEnv(t, prj)
	_, at := e.publish(prj, 25)
	afterMargin(t, at)
	e.put(agentURL(prj, 1, time.Time{}))
	// The pull requests the run's consumer gets, as the server gets them.
	type pull struct {
		Batch    int `json:"batch"`
		MaxBytes int `json:"max_bytes"`
	}
	pulls := make(chan pull, 1000)
	sub, err := e.js.Conn().Subscribe("$JS.API.CONSUMER.MSG.NEXT."+streams.RawStream(prj)+"."+e.cfg.Durable+"-backlog-"+id, func(m *nats.Msg) {
		var p pull
		if json.Unmarshal(m.Data, &p) == nil {
			select {
			case pulls <- p:
			default:
			}
		}
	})
	require.NoError(t, err)
	defer func() { _ = sub.Unsubscribe() }()
	require.NoError(t, e.js.Conn().Flush())
	r := e.start(&recorder{})
	defer func() { require.NoError(t, r.Shutdown(context.Background())) }()
	b := agentURL(prj, 2, time.Time{})
	b.Backlog = &mirror.Backlog{ID: id, FirstSeq: 3, LastSeq: 22, Records: 20, RequestedAt: time.Now(), RequestedBy: "usr_1"}
	e.put(b)
	require.Eventually(t, func() bool {
		st, ok := backlogState(t, e.js, prj, id)
		return ok && st.State == validation.BacklogDone
	}, 20*time.Second, 20*time.Millisecond)
	require.NotEmpty(t, pulls)
	bound := max(backlogFetchBytes, 2*int(e.js.Conn().MaxPayload()))
	for len(pulls) > 0 {
		p := <-pulls
		assert.Greater(t, p.MaxBytes, 0, "pull of %d records without a byte limit", p.Batch)
		assert.LessOrEqual(t, p.MaxBytes, bound)
	}
}
