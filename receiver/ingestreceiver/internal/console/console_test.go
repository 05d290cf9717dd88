package console

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/mirrorcache"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/principal"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// consoleAuth stands in for the projectauth extension: API key "key-<project>" opens
// that project.
type consoleAuth struct{ js jetstream.JetStream }

func (f consoleAuth) AuthenticateConsole(ctx context.Context, headers map[string][]string, projectID string) (context.Context, error) {
	if http.Header(headers).Get("X-Api-Key") != "key-"+projectID {
		return ctx, principal.ErrNotFound
	}
	return principal.NewContext(ctx, principal.Principal{ProjectID: projectID}), nil
}

// AuthorizeConsoleWrite lets the key write too: the real role check is tested against the
// projectauth extension (deliveries_test.go).
func (f consoleAuth) AuthorizeConsoleWrite(ctx context.Context, headers map[string][]string, projectID string) (context.Context, error) {
	return f.AuthenticateConsole(ctx, headers, projectID)
}

func (f consoleAuth) JetStream() jetstream.JetStream { return f.js }

func (f consoleAuth) MirrorCache() *mirrorcache.Cache { return nil }

// consoleStack is the API served over HTTP, reading a real JetStream.
type consoleStack struct {
	api *API
	url string
	nc  *nats.Conn
	js  jetstream.JetStream
}

func startConsole(t *testing.T) *consoleStack {
	t.Helper()
	n := testenv.StartNATS(t)
	nc, js := testenv.Connect(t, n.URL())
	api, url := serveConsole(t, js)
	return &consoleStack{api: api, url: url, nc: nc, js: js}
}

// startConsoleOn serves another API (another receiver's) on js and returns its URL.
func startConsoleOn(t *testing.T, js jetstream.JetStream) string {
	_, url := serveConsole(t, js)
	return url
}

func serveConsole(t *testing.T, js jetstream.JetStream) (*API, string) {
	t.Helper()
	api := New(Settings{Auth: consoleAuth{js: js}, RetryAfter: 5 * time.Second, Logger: zap.NewNop(), AllowedOrigins: []string{dashboardOrigin},
		Refuse: func(err error) *apierror.Error {
			return apierror.New(http.StatusNotFound, apierror.NotFound, err.Error())
		}})
	mux := http.NewServeMux()
	api.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return api, srv.URL
}

type answer struct {
	status int
	header http.Header
	body   []byte
}

func (a answer) code(t *testing.T) string {
	t.Helper()
	var b struct {
		Error struct{ Code string } `json:"error"`
	}
	require.NoError(t, json.Unmarshal(a.body, &b), "%s", a.body)
	return b.Error.Code
}

func do(t *testing.T, method, url string, headers map[string]string) answer {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	require.NoError(t, err)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return answer{status: resp.StatusCode, header: resp.Header, body: b}
}

// fill stores records on a project's raw stream as the exporter does; sourceOf names the
// push source of record i ("" for none).
func (c *consoleStack) fill(t *testing.T, project string, n int, record func(i int) string, sourceOf func(i int) string) jetstream.Stream {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, streams.Ensure(ctx, c.js, streams.RawConfig(project, streams.DefaultLimits())))
	for i := 0; i < n; i++ {
		msg := &nats.Msg{Subject: streams.RawSubject(project), Data: []byte(record(i)), Header: nats.Header{streams.HeaderSignal: []string{"event"}}}
		if src := sourceOf(i); src != "" {
			msg.Header.Set(streams.HeaderSignal, "source")
			msg.Header.Set(streams.HeaderSourceID, src)
		}
		_, err := c.js.PublishMsg(ctx, msg)
		require.NoError(t, err)
	}
	s, err := c.js.Stream(ctx, streams.RawStream(project))
	require.NoError(t, err)
	return s
}

type eventsAnswer struct {
	Events []struct {
		Seq      uint64          `json:"seq"`
		SourceID string          `json:"source_id"`
		Record   json.RawMessage `json:"record"`
	} `json:"events"`
	Truncated bool `json:"truncated"`
}

func (c *consoleStack) events(t *testing.T, project, query string) eventsAnswer {
	t.Helper()
	a := do(t, http.MethodGet, c.url+"/console/v1/projects/"+project+"/events"+query, map[string]string{"X-API-Key": "key-" + project})
	require.Equal(t, http.StatusOK, a.status, "%s", a.body)
	var out eventsAnswer
	require.NoError(t, json.Unmarshal(a.body, &out))
	return out
}

type fieldsAnswer struct {
	Sampled   int  `json:"sampled"`
	Truncated bool `json:"truncated"`
	Fields    []FieldStat
}

func (c *consoleStack) fields(t *testing.T, project, query string) fieldsAnswer {
	t.Helper()
	a := do(t, http.MethodGet, c.url+"/console/v1/projects/"+project+"/fields"+query, map[string]string{"X-API-Key": "key-" + project})
	require.Equal(t, http.StatusOK, a.status, "%s", a.body)
	var out fieldsAnswer
	require.NoError(t, json.Unmarshal(a.body, &out))
	return out
}

func bigRecord(size int) func(int) string {
	return func(i int) string {
		return fmt.Sprintf(`{"i":%d,"pad":"%s"}`, i, strings.Repeat("x", size))
	}
}

func noSource(int) string { return "" }

// Records are up to a megabyte each: an answer holds at most maxReadBytes of them, the
// newest, and says it was cut short.
func TestConsoleEventsStayWithinTheByteBudget(t *testing.T) {
	c := startConsole(t)
	const size = 600 << 10
	c.fill(t, "big", 20, bigRecord(size), noSource)
	got := c.events(t, "big", "?limit=50")
	assert.True(t, got.Truncated)
	fit := maxReadBytes / (size + 20)
	require.Equal(t, fit, len(got.Events))
	total := 0
	for i, ev := range got.Events {
		assert.Equal(t, uint64(20-i), ev.Seq, "the newest, newest first, none skipped")
		total += len(ev.Record)
	}
	assert.LessOrEqual(t, total, maxReadBytes)

	got = c.events(t, "big", "?limit=3")
	assert.False(t, got.Truncated, "three records fit: nothing was left out")
	assert.Len(t, got.Events, 3)
}

// The fields view walks records as they arrive and stops at the byte budget.
func TestConsoleFieldsStayWithinTheByteBudget(t *testing.T) {
	c := startConsole(t)
	const size = 600 << 10
	c.fill(t, "bigf", 20, bigRecord(size), noSource)
	got := c.fields(t, "bigf", "?limit=1000")
	assert.True(t, got.Truncated)
	assert.Equal(t, maxReadBytes/(size+20), got.Sampled)
	require.Len(t, got.Fields, 2)
	assert.Equal(t, FieldStat{Path: "i", OTTL: "i", Count: got.Sampled, Types: []string{"number"}}, got.Fields[0])

	got = c.fields(t, "bigf", "?limit=2")
	assert.False(t, got.Truncated)
	assert.Equal(t, 2, got.Sampled)
}

// countingSink records what a read hands over.
type countingSink struct {
	limit int
	took  []storedRecord
}

func (s *countingSink) need() int           { return s.limit - len(s.took) }
func (s *countingSink) take(r storedRecord) { s.took = append(s.took, r) }
func (s *countingSink) endWindow()          {}

// With a source filter, other sources' records are dropped as they arrive: the sink only
// ever sees the source's.
func TestConsoleSourceFilterDropsOthersInTheRead(t *testing.T) {
	c := startConsole(t)
	c.fill(t, "mixed", 300, func(i int) string { return fmt.Sprintf(`{"i":%d}`, i) }, func(i int) string {
		if i%10 == 0 {
			return "src_a"
		}
		return "src_b"
	})
	sink := &countingSink{limit: 1000}
	require.NoError(t, readRecent(context.Background(), c.js, "mixed", "src_a", sink))
	require.Equal(t, 30, len(sink.took), "src_a's records only")
	for _, r := range sink.took {
		assert.Equal(t, "src_a", r.sourceID)
	}
	got := c.events(t, "mixed", "?source_id=src_a&limit=5")
	require.Len(t, got.Events, 5)
	for i, ev := range got.Events {
		assert.Equal(t, uint64(291-10*i), ev.Seq, "the source's newest, newest first")
	}
}

// A long run of missing sequences (expired or deleted records) costs one consumer per
// minWindow sequences, not one per sequence.
func TestConsoleReadsSkipMissingRangesCheaply(t *testing.T) {
	c := startConsole(t)
	s := c.fill(t, "gaps", 2100, func(i int) string { return fmt.Sprintf(`{"i":%d}`, i) }, noSource)
	ctx := context.Background()
	for seq := uint64(11); seq <= 2090; seq++ {
		require.NoError(t, s.DeleteMsg(ctx, seq))
	}
	var creates atomic.Int64
	for _, subj := range []string{"$JS.API.CONSUMER.CREATE." + streams.RawStream("gaps"), "$JS.API.CONSUMER.CREATE." + streams.RawStream("gaps") + ".>"} {
		sub, err := c.nc.Subscribe(subj, func(*nats.Msg) { creates.Add(1) })
		require.NoError(t, err)
		t.Cleanup(func() { _ = sub.Unsubscribe() })
	}
	require.NoError(t, c.nc.Flush())

	got := c.events(t, "gaps", "?limit=11")
	require.Len(t, got.Events, 11)
	assert.Equal(t, uint64(2100), got.Events[0].Seq)
	assert.Equal(t, uint64(2091), got.Events[9].Seq)
	assert.Equal(t, uint64(10), got.Events[10].Seq, "the record behind the gap")
	require.NoError(t, c.nc.Flush())
	assert.LessOrEqual(t, creates.Load(), int64(2+2080/minWindow+1), "consumers created for one read")
	info, err := s.Info(ctx)
	require.NoError(t, err)
	assert.Zero(t, info.State.Consumers, "a read leaves no consumer behind")
}

// Reads run a bounded number at a time per receiver; one more is told to come back.
func TestConsoleReadsAreBoundedPerReceiver(t *testing.T) {
	c := startConsole(t)
	c.fill(t, "busy", 1, func(int) string { return `{}` }, noSource)
	for i := 0; i < maxReads; i++ {
		c.api.reads <- struct{}{}
	}
	a := do(t, http.MethodGet, c.url+"/console/v1/projects/busy/events", map[string]string{"X-API-Key": "key-busy"})
	for i := 0; i < maxReads; i++ {
		<-c.api.reads
	}
	assert.Equal(t, http.StatusServiceUnavailable, a.status, "%s", a.body)
	assert.Equal(t, "unavailable", a.code(t))
	assert.Equal(t, "5", a.header.Get("Retry-After"))
	assert.Len(t, c.events(t, "busy", "").Events, 1, "a slot free again serves the read")

	// Refusals that need no read take no slot.
	for i := 0; i < maxReads; i++ {
		c.api.reads <- struct{}{}
	}
	a = do(t, http.MethodGet, c.url+"/console/v1/projects/busy/events", map[string]string{"X-API-Key": "key-other"})
	for i := 0; i < maxReads; i++ {
		<-c.api.reads
	}
	assert.Equal(t, http.StatusNotFound, a.status)

	// The slots are the receiver's: another receiver in the same process is not held up.
	for i := 0; i < maxReads; i++ {
		c.api.reads <- struct{}{}
	}
	other := startConsoleOn(t, c.js)
	for _, path := range []string{"events", "fields"} {
		a = do(t, http.MethodGet, other+"/console/v1/projects/busy/"+path, map[string]string{"X-API-Key": "key-busy"})
		assert.Equal(t, http.StatusOK, a.status, "%s: %s", path, a.body)
	}
	for i := 0; i < maxReads; i++ {
		<-c.api.reads
	}
}
