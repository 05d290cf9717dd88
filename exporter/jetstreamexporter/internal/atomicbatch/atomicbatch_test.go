package atomicbatch

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/streams"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// The answers and the all-or-nothing storage this package relies on, against a real
// in-process nats-server of the go.mod version.

func abStream(t *testing.T, allow bool) (*testenv.NATS, *Publisher, jetstream.JetStream, jetstream.StreamConfig) {
	t.Helper()
	srv := testenv.StartNATS(t)
	nc, js := testenv.Connect(t, srv.URL())
	cfg := streams.RawConfig("ab", streams.DefaultLimits())
	cfg.AllowAtomicPublish = allow
	_, err := js.CreateStream(context.Background(), cfg)
	require.NoError(t, err)
	p, err := New(nc)
	require.NoError(t, err)
	return srv, p, js, cfg
}

func abRecords(prefix string, n int, hdr func(i int) nats.Header) []Record {
	recs := make([]Record, n)
	for i := range recs {
		recs[i].Data = []byte(prefix + "-" + strconv.Itoa(i))
		if hdr != nil {
			recs[i].Header = hdr(i)
		}
	}
	return recs
}

func abStored(t *testing.T, js jetstream.JetStream, stream string) []string {
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

func abCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestAtomicBatchStoresEveryRecordInOrder(t *testing.T) {
	_, p, js, cfg := abStream(t, true)
	shared := nats.Header{streams.HeaderSignal: []string{"event"}}
	require.NoError(t, p.Publish(abCtx(t), cfg.Subjects[0], abRecords("a", MaxSize, func(int) nats.Header { return shared })))
	require.NoError(t, p.Publish(abCtx(t), cfg.Subjects[0], abRecords("b", 1, nil)))
	got := abStored(t, js, cfg.Name)
	require.Len(t, got, MaxSize+1)
	assert.Equal(t, "a-0", got[0])
	assert.Equal(t, "a-999", got[999])
	assert.Equal(t, "b-0", got[1000])
	assert.Len(t, shared, 1, "a shared header map is not written to")
}

// A batch whose commit never arrives (the publisher died half way) stores nothing; a
// fast batch or async publishes would have stored the first half.
func TestAtomicBatchWithoutCommitStoresNothing(t *testing.T) {
	srv, _, js, cfg := abStream(t, true)
	nc, _ := testenv.Connect(t, srv.URL())
	for i := 1; i <= 50; i++ {
		h := nats.Header{HeaderBatchID: []string{"dead"}, HeaderBatchSeq: []string{strconv.Itoa(i)}}
		require.NoError(t, nc.PublishMsg(&nats.Msg{Subject: cfg.Subjects[0], Data: []byte("x"), Header: h}))
	}
	require.NoError(t, nc.Flush())
	nc.Close()
	// What a later batch finds: the stream holds only its own records.
	p2nc, _ := testenv.Connect(t, srv.URL())
	p2, err := New(p2nc)
	require.NoError(t, err)
	require.NoError(t, p2.Publish(abCtx(t), cfg.Subjects[0], abRecords("after", 3, nil)))
	assert.Equal(t, []string{"after-0", "after-1", "after-2"}, abStored(t, js, cfg.Name))
}

// A message the stream refuses in the middle of a batch refuses the whole batch.
func TestAtomicBatchRefusedWholeWhenOneRecordFails(t *testing.T) {
	_, p, js, cfg := abStream(t, true)
	recs := abRecords("a", 10, nil)
	recs[7].Header = nats.Header{"Nats-Expected-Stream": []string{"another"}}
	err := p.Publish(abCtx(t), cfg.Subjects[0], recs)
	require.Error(t, err)
	assert.Empty(t, abStored(t, js, cfg.Name))
}

// A message id the duplicate window holds refuses the whole batch (10201): the exporter
// then publishes that chunk record by record to learn which ones were new.
func TestAtomicBatchDuplicateIDRefusesTheBatch(t *testing.T) {
	_, p, js, cfg := abStream(t, true)
	id := func(i int) nats.Header { return nats.Header{streams.HeaderMsgID: []string{"k:" + strconv.Itoa(i)}} }
	require.NoError(t, p.Publish(abCtx(t), cfg.Subjects[0], abRecords("a", 2, id)))
	err := p.Publish(abCtx(t), cfg.Subjects[0], abRecords("a", 3, id))
	assert.Equal(t, jetstream.ErrorCode(ErrCodeDuplicate), Code(err), "%v", err)
	assert.Equal(t, []string{"a-0", "a-1"}, abStored(t, js, cfg.Name))
}

func TestAtomicBatchRefusedBeforeStartWhenDisabled(t *testing.T) {
	_, p, js, cfg := abStream(t, false)
	err := p.Publish(abCtx(t), cfg.Subjects[0], abRecords("a", 5, nil))
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.True(t, e.NotStarted)
	assert.Equal(t, jetstream.ErrorCode(ErrCodeDisabled), e.API.ErrorCode)
	assert.Empty(t, abStored(t, js, cfg.Name))
}

func TestAtomicBatchOverTheServerLimitIsRefusedWhole(t *testing.T) {
	_, p, js, cfg := abStream(t, true)
	err := p.Publish(abCtx(t), cfg.Subjects[0], abRecords("a", MaxSize+1, nil))
	assert.Equal(t, jetstream.ErrorCode(ErrCodeTooLarge), Code(err), "%v", err)
	assert.Empty(t, abStored(t, js, cfg.Name))
}
