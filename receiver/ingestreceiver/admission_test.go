package ingestreceiver

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"google.golang.org/grpc/codes"
)

// An OTLP request of more records than max_records_per_request is refused with 413 naming
// the limit, counted from the bytes (JSON and protobuf), and nothing is stored.
func TestTooManyOTLPRecordsAreRefused(t *testing.T) {
	tr := startTestReceiver(t, func(c *Config) { c.MaxRecordsPerRequest = 3 }, &fakeAuth{})
	var stored int
	var err error
	tr.logs, err = consumer.NewLogs(func(_ context.Context, ld plog.Logs) error { stored += ld.LogRecordCount(); return nil })
	require.NoError(t, err)
	logs := func(n int) plogotlp.ExportRequest {
		ld := plog.NewLogs()
		for i := 0; i < n; i++ {
			// one scope each: the limit counts records, whatever their grouping
			ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords().AppendEmpty().Body().SetStr("r")
		}
		return plogotlp.NewExportRequestFromLogs(ld)
	}
	j, _ := logs(4).MarshalJSON()
	a := do(t, http.MethodPost, tr.url+"/v1/logs", j, map[string]string{"X-API-Key": "key-p"})
	assert.Equal(t, http.StatusRequestEntityTooLarge, a.status, "%s", a.body)
	st := otlpStatus(t, a)
	assert.Equal(t, int32(codes.InvalidArgument), st.Code)
	assert.Contains(t, st.Message, "more than 3 records")

	pb, _ := logs(4).MarshalProto()
	a = do(t, http.MethodPost, tr.url+"/v1/logs", pb, map[string]string{"X-API-Key": "key-p", "Content-Type": "application/x-protobuf"})
	assert.Equal(t, http.StatusRequestEntityTooLarge, a.status)
	assert.Equal(t, 0, stored)

	j, _ = logs(3).MarshalJSON()
	a = do(t, http.MethodPost, tr.url+"/v1/logs", j, map[string]string{"X-API-Key": "key-p"})
	assert.Equal(t, http.StatusOK, a.status, "%s", a.body)
	assert.Equal(t, 3, stored)
}

// While requests hold max_inflight_bytes, another is answered 503 with Retry-After and
// succeeds once they are done; a lone request larger than the whole budget still goes
// through.
func TestInflightBytesAreBounded(t *testing.T) {
	tr := startTestReceiver(t, func(c *Config) { c.MaxInflightBytes = 4 << 20 }, &fakeAuth{})
	entered, proceed := make(chan struct{}), make(chan struct{})
	var blocking atomic.Bool
	blocking.Store(true)
	var err error
	tr.logs, err = consumer.NewLogs(func(context.Context, plog.Logs) error {
		if blocking.Load() {
			entered <- struct{}{}
			<-proceed
		}
		return nil
	})
	require.NoError(t, err)
	// 1 MiB of events: an estimated 4 MiB, the whole budget.
	big := []byte(`{"a":"` + strings.Repeat("x", 1<<20) + `"}`)
	first := make(chan answer)
	go func() {
		first <- do(t, http.MethodPost, tr.url+"/v1/events", big, map[string]string{"X-API-Key": "key-p"})
	}()
	<-entered

	for _, path := range []string{"/v1/events", "/v1/logs"} {
		a := do(t, http.MethodPost, tr.url+path, []byte(`{}`), map[string]string{"X-API-Key": "key-p"})
		assert.Equal(t, http.StatusServiceUnavailable, a.status, "%s: %s", path, a.body)
		assert.Equal(t, "5", a.header.Get("Retry-After"), path)
	}
	a := do(t, http.MethodPost, tr.url+"/v1/events", []byte(`{}`), map[string]string{"X-API-Key": "key-p"})
	assert.Equal(t, "unavailable", a.code(t))
	assert.Contains(t, string(a.body), "max_inflight_bytes")

	blocking.Store(false)
	close(proceed)
	assert.Equal(t, http.StatusAccepted, (<-first).status)
	a = do(t, http.MethodPost, tr.url+"/v1/events", []byte(`{}`), map[string]string{"X-API-Key": "key-p"})
	assert.Equal(t, http.StatusAccepted, a.status, "%s", a.body)
	// 2 MiB: an estimated 8 MiB, twice the budget, alone: admitted.
	a = do(t, http.MethodPost, tr.url+"/v1/events", bytes.Replace(big, []byte("x"), []byte("xx"), -1), map[string]string{"X-API-Key": "key-p"})
	assert.Equal(t, http.StatusAccepted, a.status, "%.200s", a.body)
}

func TestReadAllWithHint(t *testing.T) {
	body := strings.Repeat("abc", 1000)
	for _, hint := range []int64{0, 10, 2999, 3000, 3001, 1 << 20} {
		got, err := readAll(strings.NewReader(body), hint, func(int64) error { return nil })
		require.NoError(t, err)
		assert.Equal(t, body, string(got), "hint %d", hint)
	}
	_, err := readAll(io.MultiReader(strings.NewReader("ab"), errReader{}), 10, func(int64) error { return nil })
	assert.Error(t, err)
	var charged []int64
	_, err = readAll(strings.NewReader(body), 3000, func(n int64) error {
		charged = append(charged, n)
		if n < 2000 {
			return nil
		}
		return errNoRoom
	})
	assert.ErrorIs(t, err, errNoRoom, "a charge refused stops the read")
	assert.Equal(t, []int64{3001}, charged, "a body smaller than the first chunk is charged its announced size")
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, io.ErrUnexpectedEOF }

// A reservation made before reading is corrected to the real cost, downwards too: a
// compressed or unsized request does not keep holding the body limit once read.
func TestTicketReservationFollowsTheRealCost(t *testing.T) {
	a := newAdmission(100, 100)
	t1 := a.ticket("a")
	require.NoError(t, t1.reserve(80))
	assert.ErrorIs(t, a.ticket("b").reserve(30), errNoRoom)
	require.NoError(t, t1.reserve(10), "corrected down")
	t2 := a.ticket("b")
	require.NoError(t, t2.reserve(90))
	assert.ErrorIs(t, t2.reserve(91), errNoRoom, "past the budget while t1 holds 10")
	t1.release()
	require.NoError(t, t2.reserve(500), "alone, a request may have the whole budget")
	assert.Equal(t, int64(100), t2.held)
	t2.release()
	assert.NoError(t, a.ticket("a").reserve(100))
}

// One tenant's requests together hold at most its share of body bytes: its next one is
// refused for the share (503, its own doing), another tenant's goes through, and a
// tenant's request alone may still take more than the share.
func TestTenantHoldsAtMostItsShare(t *testing.T) {
	a := newAdmission(100, 25)
	var held []*ticket
	for range 2 {
		tk := a.ticket("greedy")
		require.NoError(t, tk.reading(12))
		held = append(held, tk)
	}
	third := a.ticket("greedy")
	assert.ErrorIs(t, third.reading(12), errTenantNoRoom)
	assert.Zero(t, third.held, "a refused reservation holds nothing")
	other := a.ticket("other")
	require.NoError(t, other.reading(70), "another tenant has the rest")
	other.release()

	for _, tk := range held {
		tk.release()
	}
	alone := a.ticket("greedy")
	require.NoError(t, alone.reading(60), "alone, past its share")
	assert.ErrorIs(t, a.ticket("greedy").reading(1), errTenantNoRoom)
	last := a.ticket("other")
	require.NoError(t, last.reading(40))
	alone.release()
	last.release()
	assert.Empty(t, a.body, "nothing left held")
}

// The share counts bodies, not their decoding estimate: an account's two bodies at a
// quarter of the share each, decoding at four times that, go through together (the
// estimate counted against the share refused the second, so a collector sending large
// batches in parallel saw 503 for nearly all of them); max_inflight_bytes still counts
// the estimate.
func TestTenantShareCountsBodiesNotTheDecodingEstimate(t *testing.T) {
	a := newAdmission(100, 25)
	first, second := a.ticket("acct"), a.ticket("acct")
	require.NoError(t, first.reading(10))
	require.NoError(t, first.reserve(40), "decoding")
	require.NoError(t, second.reading(10))
	require.NoError(t, second.reserve(40), "decoding alongside the first")
	assert.ErrorIs(t, a.ticket("other").reserve(30), errNoRoom, "the budget counts the estimates")
	assert.ErrorIs(t, a.ticket("acct").reading(10), errTenantNoRoom, "a third body passes the share")
	first.release()
	second.release()
	assert.Empty(t, a.body)
}

// Unless set, the share takes two bodies at max_request_body_size, and at least a quarter
// of the budget, within the budget.
func TestPerAccountDefault(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	assert.Equal(t, int64(32<<20), perAccount(cfg), "a quarter of 128 MiB takes three 10 MiB bodies")
	cfg.MaxRequestBodySize = 40 << 20
	assert.Equal(t, int64(80<<20), perAccount(cfg), "two bodies at the limit")
	cfg.MaxRequestBodySize = 100 << 20
	assert.Equal(t, cfg.MaxInflightBytes, perAccount(cfg), "within the budget")
	cfg.MaxInflightBytesPerAccount = 1 << 20
	assert.Equal(t, int64(1<<20), perAccount(cfg), "as set")
}
