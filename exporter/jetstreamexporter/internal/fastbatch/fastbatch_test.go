package fastbatch

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/records"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

func TestFastBatchReplySubjects(t *testing.T) {
	f := &Publisher{prefix: "_INBOX.abc", token: "abc", batches: map[string]*Batch{}}
	b := f.Begin("svc-ai-raw.p.in")
	assert.Equal(t, "abc1", b.id)
	// The layout nats-server's getFastBatch parses: <prefix>.<id>.<flow>.<gap>.<seq>.<op>.$FI
	assert.Equal(t, "_INBOX.abc.abc1.100.fail.1.0.$FI", b.reply(1, fbOpStart))
	assert.Equal(t, "_INBOX.abc.abc1.100.fail.2.1.$FI", b.reply(2, fbOpAppend))
	assert.Equal(t, "_INBOX.abc.abc1.100.fail.101.3.$FI", b.reply(101, fbOpCommitEOB))
	assert.Equal(t, "_INBOX.abc.abc1.100.fail.100.4.$FI", b.reply(100, fbOpPing))
	// Batch ids differ per batch and carry the process's nuid (ids are per stream, and
	// several processes may publish to one stream).
	assert.Equal(t, "abc2", f.Begin("s").id)

	for subject, want := range map[string]string{
		"_INBOX.abc.abc1.100.fail.7.1.$FI": "abc1",
		"_INBOX.abc.x":                     "",
		"_INBOX.abcd.abc1.100.fail.7.1":    "",
		"_INBOX.other.abc1.100":            "",
	} {
		id, ok := fbBatchID(f.prefix, subject)
		assert.Equal(t, want, id, subject)
		assert.Equal(t, want != "", ok, subject)
	}
}

func TestFastBatchAnswers(t *testing.T) {
	b := &Batch{flow: 1}
	answer := func(data string) { b.handle(&nats.Msg{Data: []byte(data)}) }

	answer(`{"type":"ack","seq":0,"msgs":1}`)
	assert.True(t, b.started)
	assert.Equal(t, uint64(1), b.flow)
	answer(`{"type":"ack","seq":5,"msgs":8}`)
	answer(`{"type":"ack","seq":3,"msgs":8}`) // never backwards
	assert.Equal(t, uint64(5), b.acked)
	assert.Equal(t, uint64(8), b.flow)
	require.NoError(t, b.err)
	answer(`{"stream":"s","seq":42,"batch":"abc1","count":100}`)
	assert.True(t, b.done)
	assert.Equal(t, uint64(100), b.count)

	// An error message mid-batch: the batch had started, so records may be stored.
	b = &Batch{flow: 1, started: true}
	answer(`{"type":"err","seq":9,"error":{"code":503,"err_code":10077,"description":"maximum bytes exceeded"}}`)
	var fe *Error
	require.ErrorAs(t, b.err, &fe)
	assert.False(t, fe.NotStarted)
	var api *jetstream.APIError
	require.ErrorAs(t, b.err, &api)
	assert.True(t, streamFull(api))

	// A refusal of the first message, before the batch exists.
	b = &Batch{flow: 1}
	answer(`{"error":{"code":400,"err_code":10205,"description":"batch publish is disabled"},"stream":"s","seq":0}`)
	require.ErrorAs(t, b.err, &fe)
	assert.True(t, fe.NotStarted)
	assert.Equal(t, ErrCodeBatchPublishDisabled, int(fe.API.ErrorCode))

	// A gap, a plain PubAck (a server without fast batches), no stream at all.
	b = &Batch{flow: 1, started: true}
	answer(`{"type":"gap","last_seq":3,"seq":5}`)
	require.ErrorAs(t, b.err, &fe)
	b = &Batch{flow: 1}
	answer(`{"stream":"s","seq":1}`)
	assert.ErrorIs(t, b.err, ErrProtocol)
	b = &Batch{flow: 1}
	b.handle(&nats.Msg{Header: nats.Header{"Status": []string{"503"}}})
	assert.ErrorIs(t, b.err, nats.ErrNoResponders)
}

// fbStream creates a raw stream and a batcher on a fresh in-process server.
func fbStream(t *testing.T, limits streams.Limits, allow bool) (*Publisher, jetstream.JetStream, jetstream.StreamConfig) {
	t.Helper()
	srv := testenv.StartNATS(t)
	nc, js := testenv.Connect(t, srv.URL())
	cfg := streams.RawConfig("fb", limits)
	cfg.AllowBatchPublish = allow
	if limits.MaxBytes != streams.DefaultLimits().MaxBytes {
		// The server's own DiscardNew limit, which these tests are about (the exporter
		// holds projects to MaxBytes itself, without reserving it: storage.go).
		cfg.MaxBytes = limits.MaxBytes
	}
	_, err := js.CreateStream(context.Background(), cfg)
	require.NoError(t, err)
	f, err := New(nc, 5*time.Second)
	require.NoError(t, err)
	return f, js, cfg
}

// fbPublish publishes n records "<prefix>-<i>" as one batch.
func fbPublish(f *Publisher, subject, prefix string, n int, hdr func(i int) nats.Header) error {
	ctx := context.Background()
	b := f.Begin(subject)
	defer f.End(b)
	for i := 0; i < n; i++ {
		var h nats.Header
		if hdr != nil {
			h = hdr(i)
		}
		if err := b.Add(ctx, []byte(prefix+"-"+strconv.Itoa(i)), h); err != nil {
			b.Abandon()
			return err
		}
	}
	return b.Commit(ctx)
}

func fbStored(t *testing.T, js jetstream.JetStream, stream string) []string {
	t.Helper()
	s, err := js.Stream(context.Background(), stream)
	require.NoError(t, err)
	info, err := s.Info(context.Background())
	require.NoError(t, err)
	var out []string
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := s.GetMsg(context.Background(), seq)
		require.NoError(t, err)
		out = append(out, string(m.Data))
	}
	return out
}

func TestFastBatchStoresEveryRecordInOrder(t *testing.T) {
	f, js, cfg := fbStream(t, streams.DefaultLimits(), true)
	hdr := func(int) nats.Header { return nats.Header{streams.HeaderSignal: []string{records.SignalLog}} }
	require.NoError(t, fbPublish(f, cfg.Subjects[0], "a", 250, hdr))
	require.NoError(t, fbPublish(f, cfg.Subjects[0], "b", 2, hdr))
	got := fbStored(t, js, cfg.Name)
	require.Len(t, got, 252)
	assert.Equal(t, "a-0", got[0])
	assert.Equal(t, "a-249", got[249])
	assert.Equal(t, "b-1", got[251])
	s, _ := js.Stream(context.Background(), cfg.Name)
	m, err := s.GetMsg(context.Background(), 7)
	require.NoError(t, err)
	assert.Equal(t, records.SignalLog, m.Header.Get(streams.HeaderSignal))
	f.mu.Lock()
	assert.Empty(t, f.batches)
	f.mu.Unlock()
}

// Batches in flight side by side make the server ack every message at first and then
// every few: the flow control's stalls and acks get exercised.
func TestFastBatchConcurrentBatches(t *testing.T) {
	f, js, cfg := fbStream(t, streams.DefaultLimits(), true)
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for w := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 0; r < 5 && errs[w] == nil; r++ {
				errs[w] = fbPublish(f, cfg.Subjects[0], fmt.Sprintf("w%d-r%d", w, r), 600, nil)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	got := fbStored(t, js, cfg.Name)
	assert.Len(t, got, 8*5*600)
	seen := map[string]bool{}
	for _, g := range got {
		assert.False(t, seen[g], "stored twice: %s", g)
		seen[g] = true
	}
}

// Nats-Msg-Id deduplication holds inside fast batches: a retried request (every record a
// duplicate) and a retry after a partial failure (some duplicates) both succeed, and each
// record is stored once.
func TestFastBatchMessageIDsDeduplicate(t *testing.T) {
	f, js, cfg := fbStream(t, streams.DefaultLimits(), true)
	ids := func(i int) nats.Header {
		return nats.Header{streams.HeaderSignal: []string{"event"}, streams.HeaderMsgID: []string{"key:" + strconv.Itoa(i)}}
	}
	require.NoError(t, fbPublish(f, cfg.Subjects[0], "x", 40, ids))
	require.NoError(t, fbPublish(f, cfg.Subjects[0], "x", 40, ids)) // the same request again
	assert.Len(t, fbStored(t, js, cfg.Name), 40)
	require.NoError(t, fbPublish(f, cfg.Subjects[0], "x", 100, ids)) // 40 duplicates, 60 new
	got := fbStored(t, js, cfg.Name)
	require.Len(t, got, 100)
	assert.Equal(t, "x-99", got[99])
}

// A stream at its byte limit (DiscardNew) refuses the rest of a batch: the error is the
// stream-full error of the async path, and the batch does not claim its records.
func TestFastBatchFullStream(t *testing.T) {
	limits := streams.DefaultLimits()
	limits.MaxBytes = 4096
	f, _, cfg := fbStream(t, limits, true)
	err := fbPublish(f, cfg.Subjects[0], "0123456789012345678901234567890123456789", 200, nil)
	var api *jetstream.APIError
	require.ErrorAs(t, err, &api)
	assert.True(t, streamFull(api), "%v", err)
	var fe *Error
	require.ErrorAs(t, err, &fe)
	assert.False(t, fe.NotStarted)

	// Full from the first record on.
	err = fbPublish(f, cfg.Subjects[0], "y", 3, nil)
	require.ErrorAs(t, err, &api)
	assert.True(t, streamFull(api), "%v", err)
}

// A stream without AllowBatchPublish refuses the first message before creating the
// batch: nothing is stored, and the error says so (the exporter then publishes async).
func TestFastBatchRefusedBeforeStart(t *testing.T) {
	f, js, cfg := fbStream(t, streams.DefaultLimits(), false)
	err := fbPublish(f, cfg.Subjects[0], "z", 50, nil)
	var fe *Error
	require.ErrorAs(t, err, &fe)
	assert.True(t, fe.NotStarted)
	assert.Equal(t, ErrCodeBatchPublishDisabled, int(fe.API.ErrorCode))
	time.Sleep(100 * time.Millisecond)
	assert.Empty(t, fbStored(t, js, cfg.Name))
}

// The exporter in fast batch mode: streams get AllowBatchPublish (also an existing one,
// updated), requests go out as batches, and a stream whose flag was switched off behind
// its back still gets every record (async for that request), and the flag back.
// No answer, or answers without progress (a server that acks pings but persists nothing),
// end a batch after the timeout instead of holding the request.
func TestFastBatchTimesOutWithoutProgress(t *testing.T) {
	srv := testenv.StartNATS(t)
	nc, _ := testenv.Connect(t, srv.URL())
	f, err := New(nc, 300*time.Millisecond)
	require.NoError(t, err)
	silent, err := nc.Subscribe("silent", func(*nats.Msg) {})
	require.NoError(t, err)
	t.Cleanup(func() { _ = silent.Unsubscribe() })
	chatty, err := nc.Subscribe("chatty", func(m *nats.Msg) { _ = m.Respond([]byte(`{"type":"ack","seq":0,"msgs":1}`)) })
	require.NoError(t, err)
	t.Cleanup(func() { _ = chatty.Unsubscribe() })

	for _, c := range []struct {
		subject string
		n       int
	}{{"silent", 10}, {"silent", 500}, {"chatty", 10}, {"chatty", 500}} {
		start := time.Now()
		err := fbPublish(f, c.subject, "r", c.n, nil)
		assert.ErrorIs(t, err, ErrAckTimeout, "%s %d", c.subject, c.n)
		assert.Less(t, time.Since(start), 2*time.Second, "%s %d", c.subject, c.n)
	}
}

// streamFull is the refusal the exporter answers as "the project's storage is full"
// (its isStoreFull): the server's wording is part of what this package relies on.
func streamFull(e *jetstream.APIError) bool {
	return e.ErrorCode == 10047 || e.ErrorCode == 10077 && strings.Contains(e.Description, "maximum")
}
