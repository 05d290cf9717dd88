package fastbatch

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/streams"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// verifiedNATSServer is the nats-server release whose fast batch protocol this package was
// checked against (its stream.go and jetstream_batching.go, as the package doc describes).
// The protocol is not in nats.go and has no compatibility promise of its own, so a
// nats-server upgrade must be re-checked by a person, not only by these tests passing.
const verifiedNATSServer = "v2.15.2"

// The module pins nats-server at the version the wire format below was verified with.
func TestConformanceNATSServerVersionIsTheVerifiedOne(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "go.mod"))
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^\s*(?:require\s+)?github\.com/nats-io/nats-server/v2\s+(v\S+)`).FindSubmatch(b)
	require.NotNil(t, m, "go.mod does not require github.com/nats-io/nats-server/v2")
	require.Equal(t, verifiedNATSServer, string(m[1]),
		"nats-server changed: re-read its fast batch code (stream.go getFastBatch/processJetStreamFastBatchMsg, jetstream_batching.go) against this package's doc, "+
			"run this package's tests, then set verifiedNATSServer")
}

// The answers the publisher relies on, spoken by hand to a real in-process nats-server
// (the go.mod version): the reply subject layout, the first ack, the commit PubAck
// counting the batch, and the refusal codes before a batch starts.
func TestConformanceWireFormat(t *testing.T) {
	srv := testenv.StartNATS(t)
	nc, js := testenv.Connect(t, srv.URL())
	ctx := context.Background()
	batched := streams.RawConfig("conf", streams.DefaultLimits())
	batched.AllowBatchPublish = true
	_, err := js.CreateStream(ctx, batched)
	require.NoError(t, err)
	plain := streams.RawConfig("plain", streams.DefaultLimits())
	_, err = js.CreateStream(ctx, plain)
	require.NoError(t, err)

	inbox := nats.NewInbox()
	answers := make(chan *nats.Msg, 16)
	sub, err := nc.ChanSubscribe(inbox+".>", answers)
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	next := func() map[string]any {
		t.Helper()
		select {
		case m := <-answers:
			var a map[string]any
			require.NoError(t, json.Unmarshal(m.Data, &a), "%s", m.Data)
			return a
		case <-time.After(5 * time.Second):
			t.Fatal("no answer from the server")
			return nil
		}
	}
	send := func(subject, id string, seq uint64, op int, data string) {
		t.Helper()
		b := &Batch{base: fbReplyBase(inbox, id, fbFlow)}
		require.NoError(t, nc.PublishMsg(&nats.Msg{Subject: subject, Reply: b.reply(seq, op), Data: []byte(data)}))
	}

	send(batched.Subjects[0], "b1", 1, fbOpStart, `{"i":1}`)
	a := next()
	assert.Equal(t, "ack", a["type"], "the first message creates the batch: %v", a)
	assert.EqualValues(t, 0, a["seq"])
	assert.Positive(t, a["msgs"], "the ack interval")
	send(batched.Subjects[0], "b1", 2, fbOpAppend, `{"i":2}`)
	send(batched.Subjects[0], "b1", 3, fbOpCommitEOB, "")
	a = next()
	for a["type"] == "ack" { // flow acks may come before the commit's PubAck
		a = next()
	}
	assert.Equal(t, "b1", a["batch"], "the commit's PubAck names the batch: %v", a)
	assert.EqualValues(t, 2, a["count"], "and counts its records (the end-of-batch message carries none)")
	assert.Equal(t, batched.Name, a["stream"])
	assert.EqualValues(t, 2, a["seq"])

	send(plain.Subjects[0], "b2", 1, fbOpStart, `{"i":1}`)
	a = next()
	e, _ := a["error"].(map[string]any)
	require.NotNil(t, e, "a stream without batch publishing refuses the first message: %v", a)
	assert.EqualValues(t, ErrCodeBatchPublishDisabled, e["err_code"])
	assert.Nil(t, a["type"], "a plain error answer, not an \"err\" message")
	info, err := js.Stream(ctx, plain.Name)
	require.NoError(t, err)
	assert.Zero(t, info.CachedInfo().State.Msgs, "nothing of a refused batch is stored")
}
