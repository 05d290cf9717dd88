package deliverylog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// startLog starts a NATS server with the delivery log's stream as cfg makes it.
func startLog(t testenv.T, cfg StoreConfig) (jetstream.JetStream, jetstream.Stream) {
	t.Helper()
	n := testenv.StartNATS(t)
	_, js := testenv.Connect(t, n.URL())
	s, err := EnsureStream(context.Background(), js, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return js, s
}

func setup(t *testing.T) (*Writer, *Reader) {
	t.Helper()
	js, s := startLog(t, StoreConfig{})
	w := NewWriter(js, WriterConfig{})
	t.Cleanup(func() { _ = w.Close(context.Background()) })
	return w, NewReader(s)
}

// sync publishes what the writer holds: Close waits for the acks.
func flush(t *testing.T, w *Writer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestRoundTripWithAttemptLog(t *testing.T) {
	w, r := setup(t)
	body := []byte(strings.Repeat("x", MaxRequestBody+10))
	w.Record("p1", Delivery{ID: "d1", Kind: KindSink, SinkID: "s1", RequestID: "r1", Records: 3, RequestBody: body})
	w.Attempt("p1", "d1", Attempt{StatusCode: 503, Error: "unavailable", LatencyMS: 12}, []byte("try later"))
	w.Attempt("p1", "d1", Attempt{StatusCode: 200, LatencyMS: 8}, nil)
	w.Finish("p1", "d1", Final{State: StateDelivered, Answer: []byte(strings.Repeat("a", MaxAnswer+1))})
	flush(t, w)
	d, err := r.Get(context.Background(), "p1", "d1")
	if err != nil {
		t.Fatal(err)
	}
	if d.State != StateDelivered || d.Attempts != 2 || len(d.AttemptLog) != 2 || d.AttemptLog[0].StatusCode != 503 ||
		d.StatusCode != 200 || d.SinkID != "s1" || d.Records != 3 {
		t.Fatalf("got %+v", d)
	}
	if len(d.RequestBody) != MaxRequestBody || !d.RequestTruncated || len(d.Answer) != MaxAnswer || !d.AnswerTruncated {
		t.Fatalf("bodies not capped: %d %v %d %v", len(d.RequestBody), d.RequestTruncated, len(d.Answer), d.AnswerTruncated)
	}
}

func TestListNewestFirstWithFilters(t *testing.T) {
	w, r := setup(t)
	base := time.Now().UTC().Add(-time.Hour).Truncate(time.Second)
	for i := range 6 {
		kind := KindAgent
		if i%2 == 1 {
			kind = KindSink
		}
		id := fmt.Sprintf("d%d", i)
		w.Record("p", Delivery{ID: id, Kind: kind, CreatedAt: base.Add(time.Duration(i) * time.Minute)})
		if i >= 4 {
			w.Finish("p", id, Final{State: StateDeadLettered, DeadLetterSeq: uint64(i)})
		}
	}
	flush(t, w)
	ids := func(f Filter) string {
		ds, err := r.List(context.Background(), "p", f)
		if err != nil {
			t.Fatal(err)
		}
		var s []string
		for _, d := range ds {
			s = append(s, d.ID)
		}
		return strings.Join(s, ",")
	}
	for _, c := range []struct {
		f    Filter
		want string
	}{
		{Filter{}, "d5,d4,d3,d2,d1,d0"},
		{Filter{Kind: KindSink}, "d5,d3,d1"},
		{Filter{State: StateDeadLettered}, "d5,d4"},
		{Filter{State: StatePending, Kind: KindAgent}, "d2,d0"},
		{Filter{Since: base.Add(3 * time.Minute)}, "d5,d4,d3"},
		{Filter{Limit: 2}, "d5,d4"},
	} {
		if got := ids(c.f); got != c.want {
			t.Errorf("%+v: got %s, want %s", c.f, got, c.want)
		}
	}
}

func TestTenantIsolation(t *testing.T) {
	w, r := setup(t)
	w.Record("a", Delivery{ID: "da", Kind: KindAgent})
	w.Record("b", Delivery{ID: "db", Kind: KindAgent})
	flush(t, w)
	ctx := context.Background()
	if _, err := r.Get(ctx, "a", "db"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a read b's delivery: %v", err)
	}
	for _, id := range []string{"../b/db", "*", ">", "b.db", "", "db "} {
		if _, err := r.Get(ctx, "a", id); !errors.Is(err, ErrInvalidID) {
			t.Errorf("id %q: %v", id, err)
		}
		if _, err := r.List(ctx, id, Filter{}); !errors.Is(err, ErrInvalidID) {
			t.Errorf("project %q: %v", id, err)
		}
	}
	ds, err := r.List(ctx, "a", Filter{})
	if err != nil || len(ds) != 1 || ds[0].ID != "da" {
		t.Fatalf("list a: %v %+v", err, ds)
	}
}

// A busy project rewriting its deliveries keeps one message per delivery (the rollup),
// so it does not grow the stream and the quiet project's delivery stays (many distinct
// ids are bounded by Trim: TestTrimBoundsEachProject, TestTrimBoundsEachProjectsBytes).
func TestRewritesKeepOneMessagePerDelivery(t *testing.T) {
	ctx := context.Background()
	js, s := startLog(t, StoreConfig{})
	w := NewWriter(js, WriterConfig{Buffer: 1 << 14})
	w.Record("quiet", Delivery{ID: "q1", Kind: KindSink})
	// Rewriting the same deliveries many times keeps one message per delivery.
	for round := range 20 {
		for i := range 200 {
			w.Record("busy", Delivery{ID: fmt.Sprintf("b%d", i), Kind: KindSink, Records: round})
		}
	}
	flush(t, w)
	if w.Dropped() != 0 {
		t.Logf("dropped %d", w.Dropped())
	}
	r := NewReader(s)
	if _, err := r.Get(ctx, "quiet", "q1"); err != nil {
		t.Fatalf("quiet project's delivery lost: %v", err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs > 201 {
		t.Fatalf("rollups not kept to one per delivery: %d messages", info.State.Msgs)
	}
}

func TestWriterNeverBlocksWhenNATSIsDown(t *testing.T) {
	n := testenv.StartNATS(t)
	_, js := testenv.Connect(t, n.URL())
	n.Stop()
	w := NewWriter(js, WriterConfig{Buffer: 8})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 1000 {
			w.Record("p", Delivery{ID: fmt.Sprintf("d%d", i), Kind: KindAgent})
		}
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Record blocked while NATS was down")
	}
	if w.Dropped() == 0 {
		t.Fatal("no drops counted with NATS down and a buffer of 8")
	}
}

func TestLedgerTwoWritersAddUp(t *testing.T) {
	ctx := context.Background()
	n := testenv.StartNATS(t)
	var ls []*Ledger
	_, js0 := testenv.Connect(t, n.URL())
	for range 2 {
		_, js := testenv.Connect(t, n.URL())
		l, err := OpenLedger(ctx, js, 10*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
	}
	var wg sync.WaitGroup
	for _, l := range ls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 500 {
				l.Add("p", Counters{Results: 2, Delivered: 1})
				l.AddDestination("q", "s1", Counters{Delivered: 1}, Destination{Delivered: 1})
			}
		}()
	}
	wg.Wait()
	for _, l := range ls {
		if err := l.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	c, err := View(ctx, js0, "p", ViewOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Results != 2000 || c.Delivered != 1000 || c.Dropped != 0 {
		t.Fatalf("p: %+v", c)
	}
	q, _ := View(ctx, js0, "q", ViewOptions{})
	if q.Delivered != 1000 || q.Destinations["s1"].Delivered != 1000 || q.Results != 0 {
		t.Fatalf("q: %+v", q)
	}
}

func TestParseFilter(t *testing.T) {
	f, err := ParseFilter(url.Values{"state": {"dead_lettered"}, "kind": {"sink"}, "since": {"2026-01-02T03:04:05Z"}, "limit": {"10"}})
	if err != nil || f.State != StateDeadLettered || f.Kind != KindSink || f.Limit != 10 || f.Since.Year() != 2026 {
		t.Fatalf("%+v %v", f, err)
	}
	for _, bad := range []url.Values{{"state": {"x"}}, {"kind": {">"}}, {"since": {"yesterday"}}, {"limit": {"0"}}, {"limit": {"100000"}}} {
		if _, err := ParseFilter(bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

func FuzzParseFilter(f *testing.F) {
	f.Add("state=pending&kind=agent&since=2026-01-02T03:04:05Z&limit=5")
	f.Add("limit=-1&state=*")
	f.Fuzz(func(t *testing.T, q string) {
		v, err := url.ParseQuery(q)
		if err != nil {
			return
		}
		fl, err := ParseFilter(v)
		if err != nil {
			return
		}
		if fl.Limit < 1 || fl.Limit > MaxLimit {
			t.Fatalf("limit %d out of bounds", fl.Limit)
		}
		if !validState(fl.State) || (fl.Kind != "" && fl.Kind != KindAgent && fl.Kind != KindSink) {
			t.Fatalf("bad filter %+v", fl)
		}
	})
}

func validState(s string) bool {
	switch s {
	case "", StatePending, StateRetrying, StateDelivered, StateDeadLettered:
		return true
	}
	return false
}

// A delivery that ended without an attempt says why, and an interrupted one is let go
// with its reason (the writer stops holding it, the log keeps its last state).
func TestFinishErrorAndAbandon(t *testing.T) {
	w, r := setup(t)
	w.Record("p1", Delivery{ID: "gone", Kind: KindAgent})
	w.Finish("p1", "gone", Final{State: StateDeadLettered, Error: "the original body is no longer stored"})
	w.Record("p1", Delivery{ID: "cut", Kind: KindAgent})
	w.Attempt("p1", "cut", Attempt{StatusCode: 503, Error: "503"}, nil)
	w.Abandon("p1", "cut", "interrupted by shutdown")
	w.Attempt("p1", "cut", Attempt{StatusCode: 200}, nil) // no longer held: dropped
	flush(t, w)
	ctx := context.Background()
	d, err := r.Get(ctx, "p1", "gone")
	if err != nil || d.State != StateDeadLettered || d.Error != "the original body is no longer stored" {
		t.Fatalf("got %+v, %v", d, err)
	}
	d, err = r.Get(ctx, "p1", "cut")
	if err != nil || d.State != StateRetrying || d.Attempts != 1 || d.Error != "interrupted by shutdown" {
		t.Fatalf("got %+v, %v", d, err)
	}
	if w.Dropped() != 1 {
		t.Fatalf("dropped %d, want the one attempt after Abandon", w.Dropped())
	}
}

// With a linger, a delivery recorded, tried and finished within it is published once.
func TestLingerPublishesAQuickDeliveryOnce(t *testing.T) {
	ctx := context.Background()
	js, s := startLog(t, StoreConfig{})
	w := NewWriter(js, WriterConfig{Linger: time.Hour})
	w.Record("p1", Delivery{ID: "d1", Kind: KindAgent})
	w.Attempt("p1", "d1", Attempt{StatusCode: 200}, nil)
	w.Finish("p1", "d1", Final{State: StateDelivered})
	flush(t, w) // Close ends the linger
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.LastSeq != 1 {
		t.Fatalf("%d messages, want 1", info.State.LastSeq)
	}
	d, err := NewReader(s).Get(ctx, "p1", "d1")
	if err != nil || d.State != StateDelivered || d.Attempts != 1 {
		t.Fatalf("got %+v, %v", d, err)
	}
}

// validToken is the regexp it replaced, byte for byte.
func FuzzValidToken(f *testing.F) {
	re := regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)
	for _, s := range []string{"", "a", "req_0f", "*", ">", "a.b", "../x", strings.Repeat("a", 128), strings.Repeat("a", 129), "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if validToken(s) != re.MatchString(s) {
			t.Fatalf("%q: %v", s, validToken(s))
		}
	})
}

// Listing the dead letters of a busy project reads the deliveries' headers, not their
// bodies: the reader's connection receives a small fraction of what the log holds.
func TestListReadsHeadersNotBodies(t *testing.T) {
	ctx := context.Background()
	n := testenv.StartNATS(t)
	_, js := testenv.Connect(t, n.URL())
	_, err := EnsureStream(ctx, js, StoreConfig{})
	require.NoError(t, err)
	w := NewWriter(js, WriterConfig{Buffer: 1 << 12})
	body := []byte(strings.Repeat("b", 32<<10))
	const total = 300
	for i := range total {
		id := fmt.Sprintf("d%03d", i)
		w.Record("p", Delivery{ID: id, Kind: KindAgent, RequestBody: body})
		state := StateDelivered
		if i%100 == 7 {
			state = StateDeadLettered
		}
		w.Finish("p", id, Final{State: state, Answer: []byte("ok")})
	}
	flush(t, w)
	require.Zero(t, w.Dropped())

	rnc, rjs := testenv.Connect(t, n.URL())
	s, err := rjs.Stream(ctx, StreamName)
	require.NoError(t, err)
	before := rnc.Stats().InBytes
	ds, err := NewReader(s).List(ctx, "p", Filter{State: StateDeadLettered})
	require.NoError(t, err)
	got := rnc.Stats().InBytes - before
	var ids []string
	for _, d := range ds {
		ids = append(ids, d.ID)
		assert.Nil(t, d.RequestBody, "a list carries no bodies")
	}
	assert.Equal(t, []string{"d207", "d107", "d007"}, ids)
	// The log holds ~10 MB of bodies; the three dead letters are read whole (~100 KB).
	assert.Less(t, got, uint64(total*len(body)/10), "the list read %d bytes", got)
}

// Messages written before the delivery headers existed are still listed and traced.
func TestListReadsOldMessagesWithoutHeaders(t *testing.T) {
	ctx := context.Background()
	js, s := startLog(t, StoreConfig{})
	old := time.Now().UTC().Add(-time.Minute)
	for i, st := range []string{StateDeadLettered, StateDelivered} {
		b, err := json.Marshal(Delivery{ID: fmt.Sprintf("old%d", i), Kind: KindAgent, State: st, RequestID: "r", CreatedAt: old.Add(time.Duration(i) * time.Second), Seqs: []uint64{5}, RequestBody: []byte("x")})
		require.NoError(t, err)
		_, err = js.Publish(ctx, subject("p", fmt.Sprintf("old%d", i)), b)
		require.NoError(t, err)
	}
	w := NewWriter(js, WriterConfig{})
	w.Record("p", Delivery{ID: "new0", Kind: KindAgent})
	w.Finish("p", "new0", Final{State: StateDeadLettered})
	flush(t, w)
	ds, err := NewReader(s).List(ctx, "p", Filter{State: StateDeadLettered})
	require.NoError(t, err)
	require.Len(t, ds, 2)
	assert.Equal(t, "new0", ds[0].ID)
	assert.Equal(t, "old0", ds[1].ID)
	assert.Equal(t, "r", ds[1].RequestID)
	all, err := NewReader(s).List(ctx, "p", Filter{})
	require.NoError(t, err)
	assert.Len(t, all, 3)
}

// A list item carries every key docs/contract.md#section-11 names, empty ones too, and an
// attempt carries its error key: clients read them without checking for absence.
func TestListItemCarriesEveryContractKey(t *testing.T) {
	w, r := setup(t)
	w.Record("p", Delivery{ID: "d1", Kind: KindAgent})
	w.Attempt("p", "d1", Attempt{StatusCode: 200}, nil)
	w.Finish("p", "d1", Final{State: StateDelivered})
	flush(t, w)
	ds, err := r.List(context.Background(), "p", Filter{})
	require.NoError(t, err)
	require.Len(t, ds, 1)
	b, err := json.Marshal(ds[0])
	require.NoError(t, err)
	var item map[string]any
	require.NoError(t, json.Unmarshal(b, &item))
	for _, k := range []string{"id", "kind", "sink_id", "request_id", "state", "attempts", "status_code", "error", "latency_ms", "records", "created_at", "updated_at"} {
		assert.Contains(t, item, k)
	}
	assert.Equal(t, "", item["sink_id"])
	assert.Equal(t, "", item["request_id"])
	assert.Equal(t, "", item["error"])
	full, err := r.Get(context.Background(), "p", "d1")
	require.NoError(t, err)
	b, err = json.Marshal(full.AttemptLog[0])
	require.NoError(t, err)
	assert.Contains(t, string(b), `"error":""`)
}

// With the buffer full, attempt details are shed but no logged delivery is left
// pending or retrying: its final state is never dropped.
func TestFinalStateSurvivesAFullBuffer(t *testing.T) {
	ctx := context.Background()
	js, s := startLog(t, StoreConfig{})
	// The linger holds the writer after its first event, so the buffer of 4 fills.
	w := NewWriter(js, WriterConfig{Buffer: 4, Linger: time.Hour})
	const total = 50
	for i := range total {
		id := fmt.Sprintf("d%02d", i)
		w.Record("p", Delivery{ID: id, Kind: KindAgent})
		w.Attempt("p", id, Attempt{StatusCode: 503, Error: "unavailable"}, nil)
		w.Finish("p", id, Final{State: StateDeadLettered, Error: "gave up"})
	}
	flush(t, w)
	require.Positive(t, w.Dropped(), "a buffer of 4 must have shed events")
	ds, err := NewReader(s).List(ctx, "p", Filter{Limit: MaxLimit})
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(ds), 2, "the deliveries whose record got in are logged")
	for _, d := range ds {
		assert.Equal(t, StateDeadLettered, d.State, "delivery %s", d.ID)
	}
}

// A final taken from the side queue before its record (still in the buffer) waits for
// the record and then applies, so the delivery ends in its final state.
func TestEarlyFinalWaitsForItsRecord(t *testing.T) {
	w := &Writer{cfg: WriterConfig{InFlight: 10}, written: map[string]written{}, early: map[key]earlyFinal{}}
	open, touched := map[key]*Delivery{}, map[key]*Delivery{}
	w.side = []event{{op: 'f', project: "p", d: Delivery{ID: "d"}, final: Final{State: StateDelivered}}}
	order := w.takeSide(open, touched, nil)
	require.Empty(t, order)
	order = w.apply(open, touched, order, event{op: 'r', project: "p", d: Delivery{ID: "d", Kind: KindAgent}})
	require.Len(t, order, 1)
	k := key{"p", "d"}
	assert.Equal(t, StateDelivered, touched[k].State)
	assert.NotContains(t, open, k, "a finished delivery is no longer held")
	assert.Empty(t, w.early)
	assert.Zero(t, w.Dropped())
}

// fromHeaders reads what any client allowed to publish on the stream may have written:
// it never panics, names the subject's last token, and reads back what headers wrote.
func FuzzFromHeaders(f *testing.F) {
	f.Add("svc-deliveries.p.d1", "agent", "dead_lettered", "2026-11-23T18:00:00.5Z", "3", "7-9")
	f.Add("nodots", "", "x", "yesterday", "-1", "9-")
	f.Add("svc-deliveries.p.", "sink", "pending", "", "99999999999999999999", "-")
	f.Fuzz(func(t *testing.T, subj, kind, state, created, records, seqs string) {
		h := nats.Header{hdrKind: {kind}, hdrState: {state}, hdrCreated: {created}, hdrRecords: {records}, hdrSeqs: {seqs}}
		e, ok := fromHeaders(subj, h)
		if ok != (state != "") {
			t.Fatalf("state %q: ok %v", state, ok)
		}
		if ok && !strings.HasSuffix(subj, e.d.ID) {
			t.Fatalf("id %q is not the end of %q", e.d.ID, subj)
		}
		d := Delivery{ID: "d", Kind: kind, State: state, Records: len(records), Seqs: []uint64{uint64(len(seqs)) + 2, 1}}
		back, ok := fromHeaders("svc-deliveries.p.d", headers(&d))
		if strings.ContainsAny(kind+state, "\r\n") || state == "" {
			if ok {
				t.Fatalf("a delivery whose fields cannot be headers was given headers: %+v", back)
			}
			return
		}
		if !ok || back.d.Kind != kind || back.d.State != state || back.d.Records != d.Records || back.lo != 1 || back.hi != d.Seqs[0] {
			t.Fatalf("round trip: %+v from %+v", back, d)
		}
	})
}
