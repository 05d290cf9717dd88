package incidentprocessor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processorhelper"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-svc/otelcol-svc/exporter/agentexporter"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/mirrorcache"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelinedata"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/principal"
	"github.com/otelcol-svc/otelcol-svc/internal/delivery"
	"github.com/otelcol-svc/otelcol-svc/internal/deliverylog"
	"github.com/otelcol-svc/otelcol-svc/internal/incident"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/pipelinectx"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
	"github.com/otelcol-svc/otelcol-svc/internal/webhooksig"
	"github.com/otelcol-svc/otelcol-svc/internal/windowstore"
	"github.com/otelcol-svc/otelcol-svc/processor/incidentprocessor/internal/metadata"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// ---- environment: a real NATS, the mirror behind a test host, the real agent exporter,
// a stand-in agent ----

type env struct {
	nats  *testenv.NATS
	js    jetstream.JetStream
	store *mirror.Store
	cache *mirrorcache.Cache
	host  component.Host
}

type mirrorExtension struct {
	component.StartFunc
	component.ShutdownFunc
	cache *mirrorcache.Cache
}

func (m mirrorExtension) MirrorCache() *mirrorcache.Cache { return m.cache }

type testHost map[component.ID]component.Component

func (h testHost) GetExtensions() map[component.ID]component.Component { return h }

func newEnv(t testing.TB) *env {
	t.Helper()
	n := testenv.StartNATS(t)
	_, js := testenv.Connect(t, n.URL())
	store, err := mirror.Open(context.Background(), js, 1)
	require.NoError(t, err)
	cache := mirrorcache.NewCache(zap.NewNop())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); cache.Run(ctx, js) }()
	t.Cleanup(func() { cancel(); <-done })
	require.Eventually(t, cache.Ready, 5*time.Second, 5*time.Millisecond)
	host := testHost{component.MustNewID("configmirror"): mirrorExtension{cache: cache}}
	return &env{nats: n, js: js, store: store, cache: cache, host: host}
}

func (e *env) put(t testing.TB, p mirror.Project) {
	t.Helper()
	p.Version = time.Now().UnixNano()
	require.NoError(t, e.store.PutProject(context.Background(), p))
	require.Eventually(t, func() bool {
		got, ok := e.cache.Project(p.ID)
		return ok && got.Version == p.Version
	}, 5*time.Second, 5*time.Millisecond)
}

func (e *env) incidents(t *testing.T) *incident.Store {
	t.Helper()
	s, err := incident.Open(context.Background(), e.js, 1)
	require.NoError(t, err)
	return s
}

// redisURL is the machine's Redis, database 13 of these tests (projects are fresh ids).
func redisURL() string {
	if u := os.Getenv("REDIS_URL"); u != "" {
		return u
	}
	return "redis://127.0.0.1:6379/13"
}

// instance is one pipeline process: the incident processor in front of its own agent
// exporter.
type instance struct {
	proc processor.Logs
	p    *incidentProcessor
	exp  exporter.Logs
	once sync.Once
}

func (e *env) start(t *testing.T, redis string) *instance {
	t.Helper()
	return e.startProcess(t, procOptions{redis: redis})
}

// startWith starts a process whose processor uses store for events and context.
func (e *env) startWith(t *testing.T, store windowstore.Store) *instance {
	t.Helper()
	return e.startProcess(t, procOptions{store: store})
}

// procOptions: Redis's URL or the window store, and the processor's logger.
type procOptions struct {
	redis  string
	store  windowstore.Store
	logger *zap.Logger
}

func (e *env) startProcess(t *testing.T, o procOptions) *instance {
	t.Helper()
	redis, store := o.redis, o.store
	ctx := context.Background()
	ef := agentexporter.NewFactory()
	ecfg := ef.CreateDefaultConfig().(*agentexporter.Config)
	ecfg.NATS.URL = e.nats.URL()
	ecfg.AllowCIDRs = "127.0.0.0/8"
	ecfg.Timeout = 10 * time.Second
	ecfg.Retry = delivery.RetryConfig{InitialInterval: 10 * time.Millisecond, MaxInterval: 50 * time.Millisecond, MaxElapsedTime: 5 * time.Second}
	require.NoError(t, ecfg.Validate())
	exp, err := ef.CreateLogs(ctx, exportertest.NewNopSettings(ef.Type()), ecfg)
	require.NoError(t, err)
	require.NoError(t, exp.Start(ctx, e.host))

	cfg := createDefaultConfig().(*Config)
	cfg.NATS.URL = e.nats.URL()
	cfg.RedisURL = redis
	cfg.Tick = 100 * time.Millisecond
	cfg.ClaimTimeout = 3 * time.Second
	require.NoError(t, cfg.Validate())
	set := processortest.NewNopSettings(metadata.Type)
	if o.logger != nil {
		set.Logger = o.logger
	}
	proc, p, err := createLogsWith(ctx, set, cfg, exp, store)
	require.NoError(t, err)
	require.NoError(t, proc.Start(ctx, e.host))
	in := &instance{proc: proc, exp: exp, p: p}
	t.Cleanup(func() { in.stop(t, 10*time.Second) })
	return in
}

// stop shuts the process down as the collector does (processor first), giving calls in
// flight at most within.
func (in *instance) stop(t *testing.T, within time.Duration) {
	in.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), within)
		defer cancel()
		assert.NoError(t, in.proc.Shutdown(ctx))
		assert.NoError(t, in.exp.Shutdown(context.Background()))
	})
}

// send hands the processor one batch of records numbered from seq on, as the jetstream
// receiver does, and returns the batch's ledger outcome.
func (in *instance) send(t *testing.T, project string, seq uint64, records ...string) *deliverylog.Outcome {
	t.Helper()
	ld, lrs := pipelinedata.New()
	for i, r := range records {
		pipelinedata.Append(lrs, pipelinedata.Item{Body: []byte(r), Signal: "event", Seq: seq + uint64(i)})
	}
	o := deliverylog.NewOutcome()
	ctx := pipelinectx.WithOutcome(principal.NewContext(context.Background(), principal.Principal{ProjectID: project, Scope: "pipeline"}), o)
	require.NoError(t, in.proc.ConsumeLogs(ctx, ld))
	return o
}

func errorEvent(svc string, n int) string {
	return fmt.Sprintf(`{"level":"error","svc":%q,"message":"%s is failing","n":%d}`, svc, svc, n)
}

func okEvent(svc string) string { return fmt.Sprintf(`{"level":"ok","svc":%q}`, svc) }

type callBody struct {
	Incident struct {
		ID          string `json:"id"`
		Fingerprint string `json:"fingerprint"`
		Title       string `json:"title"`
		Status      string `json:"status"`
		Counts      struct {
			Events    int `json:"events"`
			NewEvents int `json:"new_events"`
			Calls     int `json:"calls"`
		} `json:"counts"`
	} `json:"incident"`
	Reason        string            `json:"reason"`
	Events        []json.RawMessage `json:"events"`
	EventsLeftOut int               `json:"events_left_out"`
	Window        []json.RawMessage `json:"window"`
}

type agentCall struct {
	at        time.Time
	requestID string
	body      callBody
	raw       []byte
}

// agent is the customer's endpoint: it records each call; hold, when set, may keep a
// call waiting (it returns when the call may be answered).
type agent struct {
	srv   *httptest.Server
	mu    sync.Mutex
	calls []agentCall
	hold  func(n int, r *http.Request)
}

func newAgent(t *testing.T, hold func(n int, r *http.Request)) *agent {
	t.Helper()
	a := &agent{hold: hold}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var b callBody
		_ = json.Unmarshal(raw, &b)
		a.mu.Lock()
		a.calls = append(a.calls, agentCall{at: time.Now(), requestID: r.Header.Get("X-Request-Id"), body: b, raw: raw})
		n := len(a.calls)
		a.mu.Unlock()
		if a.hold != nil {
			a.hold(n, r)
			if r.Context().Err() != nil {
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"status":"accepted"}`)
	}))
	t.Cleanup(a.srv.Close)
	return a
}

func (a *agent) got() []agentCall {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]agentCall(nil), a.calls...)
}

// byReason returns the calls of a reason, per incident id.
func (a *agent) byReason(reason string) map[string][]agentCall {
	out := map[string][]agentCall{}
	for _, c := range a.got() {
		if c.body.Reason == reason {
			out[c.body.Incident.ID] = append(out[c.body.Incident.ID], c)
		}
	}
	return out
}

func (a *agent) byIncident() map[string][]agentCall {
	out := map[string][]agentCall{}
	for _, c := range a.got() {
		out[c.body.Incident.ID] = append(out[c.body.Incident.ID], c)
	}
	return out
}

func incidentProject(id, url string, change func(*mirror.Pipeline)) mirror.Project {
	p := mirror.Project{ID: id, SigningSecret: webhooksig.NewSecret(), Pipeline: mirror.Pipeline{
		AgentEndpointURL: url, Mode: mirror.ModeIncident,
		Trigger: `event["level"] == "error"`, Fingerprint: `event["svc"]`, ResolveWhen: `event["level"] == "ok"`,
		GroupWait: "1s", GroupInterval: "1s", ResolveAfter: "1h",
	}}
	if change != nil {
		change(&p.Pipeline)
	}
	return p
}

func projectID(name string) string { return fmt.Sprintf("prj_%s_%d", name, time.Now().UnixNano()) }

// ---- the behaviour ----

// A storm of events of three fingerprints opens three incidents, and nothing reaches the
// agent record by record: each incident's opening call comes after group_wait, once;
// its updates at most one per group_interval, each with new events; the batch's events
// count in the ledger as incident_events and the incidents as opened.
func TestAStormOpensOneIncidentPerFingerprint(t *testing.T) {
	e := newEnv(t)
	a := newAgent(t, nil)
	project := projectID("storm")
	e.put(t, incidentProject(project, a.srv.URL, nil))
	in := e.start(t, "")

	start := time.Now()
	seq := uint64(1)
	var first *deliverylog.Outcome
	var firstSeqs []uint64
	// A storm for 3 s: each batch holds an event of each fingerprint and a record that
	// matches nothing.
	for round := 0; time.Since(start) < 3*time.Second; round++ {
		recs := []string{errorEvent("api", round), errorEvent("db", round), `{"level":"info","svc":"api"}`, errorEvent("cache", round)}
		o := in.send(t, project, seq, recs...)
		if first == nil {
			first = o
			firstSeqs = []uint64{seq, seq + 1, seq + 2, seq + 3}
		}
		seq += uint64(len(recs))
		time.Sleep(50 * time.Millisecond) // the storm's pace, not a wait for anything
	}
	batches := int(seq-1) / 4
	require.Eventually(t, func() bool { return len(a.byReason(incident.ReasonOpened)) == 3 }, 10*time.Second, 20*time.Millisecond)
	require.Eventually(t, func() bool { return len(a.byReason(incident.ReasonUpdated)) == 3 },
		10*time.Second, 20*time.Millisecond, "each incident is updated while events come")
	// Once every event sent is counted in a call, each incident's calls are settled.
	store := e.incidents(t)
	require.Eventually(t, func() bool {
		list, err := store.List(context.Background(), project, "", 10)
		if err != nil || len(list) != 3 {
			return false
		}
		for _, i := range list {
			if i.NewEvents > 0 || i.Pending != nil || int64(i.Calls) != int64(len(a.byIncident()[i.ID])) {
				return false
			}
		}
		return true
	}, 10*time.Second, 20*time.Millisecond, "every event told to the agent")
	// The storm lasted span; group_interval (1 s) allows the opening call and at most
	// one update per second of it, and one for the events after the last.
	span := time.Since(start)

	fps := map[string]bool{}
	for id, calls := range a.byReason(incident.ReasonOpened) {
		require.Len(t, calls, 1, "incident %s opened once", id)
		c := calls[0]
		fps[c.body.Incident.Fingerprint] = true
		// group_wait (1 s) holds the opening call while batches come every 50 ms: it
		// tells of the first batches together, not of the first event alone.
		assert.Greater(t, c.body.Incident.Counts.Events, 1, "the opening call waits group_wait")
		assert.Len(t, c.body.Events, c.body.Incident.Counts.Events, "the opening call carries the events")
		assert.Equal(t, c.body.Incident.Fingerprint+" is failing", c.body.Incident.Title)
		assert.Regexp(t, `^req_[0-9a-f]{32}$`, c.requestID)
	}
	assert.Equal(t, map[string]bool{"api": true, "db": true, "cache": true}, fps)
	allowed := 2 + int(span/time.Second)
	for id, calls := range a.byIncident() {
		assert.LessOrEqual(t, len(calls), allowed, "incident %s: at most one call per group_interval", id)
		told := 0
		for i, c := range calls {
			told += len(c.body.Events) + c.body.EventsLeftOut
			if i > 0 {
				assert.True(t, len(c.body.Events) > 0 || c.body.EventsLeftOut > 0, "an update carries new events")
			}
		}
		assert.Equal(t, batches, told, "incident %s: each event told once, in calls that group the batches", id)
		assert.Less(t, len(calls), batches/4, "incident %s: calls group the batches' events", id)
	}
	for _, c := range a.got() {
		assert.NotEmpty(t, c.body.Reason, "only incident calls reach the agent: %s", c.raw)
	}

	// The first batch's three events joined incidents and opened them; the other record
	// was dropped.
	led, err := deliverylog.OpenLedger(context.Background(), e.js, time.Hour)
	require.NoError(t, err)
	require.NoError(t, led.Settle(context.Background(), project, firstSeqs, first))
	require.NoError(t, led.Close(context.Background()))
	kv, err := e.js.KeyValue(context.Background(), deliverylog.LedgerBucket)
	require.NoError(t, err)
	entry, err := kv.Get(context.Background(), project)
	require.NoError(t, err)
	var counters deliverylog.Counters
	require.NoError(t, json.Unmarshal(entry.Value(), &counters))
	assert.Equal(t, int64(3), counters.IncidentEvents)
	assert.Equal(t, int64(3), counters.IncidentsOpened)
	assert.Equal(t, int64(1), counters.Dropped)
}

// resolve_when resolves the incident of its own fingerprint (resolved call), resolve_after
// resolves one that had no events for that long; within reopen_within an event reopens the
// same incident, and without it an event opens a new one.
func TestResolveAndReopen(t *testing.T) {
	e := newEnv(t)
	a, b := newAgent(t, nil), newAgent(t, nil)
	reopen, fresh := projectID("reopen"), projectID("fresh")
	e.put(t, incidentProject(reopen, a.srv.URL, func(p *mirror.Pipeline) {
		p.GroupWait, p.ResolveAfter, p.ReopenWithin = "0s", "2s", "1m"
	}))
	e.put(t, incidentProject(fresh, b.srv.URL, func(p *mirror.Pipeline) { p.GroupWait = "0s" }))
	in := e.start(t, "")

	in.send(t, reopen, 1, errorEvent("api", 1), errorEvent("db", 1))
	in.send(t, fresh, 1, errorEvent("api", 1))
	callOf := func(a *agent, match func(agentCall) bool, what string) agentCall {
		t.Helper()
		var got agentCall
		require.Eventually(t, func() bool {
			for _, c := range a.got() {
				if match(c) {
					got = c
					return true
				}
			}
			return false
		}, 10*time.Second, 20*time.Millisecond, what)
		return got
	}
	of := func(reason, fp string) func(agentCall) bool {
		return func(c agentCall) bool { return c.body.Reason == reason && c.body.Incident.Fingerprint == fp }
	}
	api := callOf(a, of(incident.ReasonOpened, "api"), "api opened")
	db := callOf(a, of(incident.ReasonOpened, "db"), "db opened")
	require.NotEqual(t, api.body.Incident.ID, db.body.Incident.ID)

	// resolve_when: api's incident is resolved by an event of its fingerprint.
	in.send(t, reopen, 3, okEvent("api"))
	r := callOf(a, of(incident.ReasonResolved, "api"), "api resolved")
	assert.Equal(t, incident.StatusResolved, r.body.Incident.Status)
	assert.Equal(t, api.body.Incident.ID, r.body.Incident.ID)
	inc, err := e.incidents(t).Get(context.Background(), reopen, api.body.Incident.ID)
	require.NoError(t, err)
	assert.Equal(t, "resolve_when", inc.ResolvedBy)

	// resolve_after: db had no event for 2 s.
	r = callOf(a, of(incident.ReasonResolved, "db"), "db resolved")
	assert.Equal(t, incident.StatusResolved, r.body.Incident.Status)
	inc, err = e.incidents(t).Get(context.Background(), reopen, db.body.Incident.ID)
	require.NoError(t, err)
	assert.Equal(t, "resolve_after", inc.ResolvedBy)

	// Within reopen_within: the same incident again, told with an update.
	in.send(t, reopen, 4, errorEvent("api", 2))
	u := callOf(a, of(incident.ReasonUpdated, "api"), "api updated after reopening")
	assert.Equal(t, incident.StatusOpen, u.body.Incident.Status)
	assert.Equal(t, api.body.Incident.ID, u.body.Incident.ID, "the same incident")
	assert.Len(t, a.byReason(incident.ReasonOpened)[api.body.Incident.ID], 1, "reopened, not opened anew")

	// Without reopen_within: resolved, then a new incident of the same fingerprint.
	first := callOf(b, of(incident.ReasonOpened, "api"), "fresh api opened")
	in.send(t, fresh, 2, okEvent("api"))
	callOf(b, of(incident.ReasonResolved, "api"), "fresh api resolved")
	in.send(t, fresh, 3, errorEvent("api", 3))
	second := callOf(b, func(c agentCall) bool {
		return c.body.Reason == incident.ReasonOpened && c.body.Incident.ID != first.body.Incident.ID
	}, "a second incident of api")
	fph, gen, ok := incident.ParseID(second.body.Incident.ID)
	require.True(t, ok)
	assert.Equal(t, incident.FingerprintHash("api"), fph)
	assert.Equal(t, 2, gen)
	assert.Equal(t, incident.StatusOpen, second.body.Incident.Status)
}

// Two pipeline processes share one bucket and Redis, batches going to either, some
// delivered to both (a redelivery): each fingerprint has one incident, counting each event
// once, and each opening call is made once.
func TestTwoProcessesOpenEachIncidentOnce(t *testing.T) {
	e := newEnv(t)
	a := newAgent(t, nil)
	project := projectID("two")
	e.put(t, incidentProject(project, a.srv.URL, func(p *mirror.Pipeline) { p.GroupInterval = "1h" }))
	ins := []*instance{e.start(t, redisURL()), e.start(t, redisURL())}

	seq := uint64(1)
	sent := map[string]int{}
	for round := range 30 {
		var recs []string
		for _, fp := range []string{"api", "db", "cache"} {
			recs = append(recs, errorEvent(fp, round))
			sent[fp]++
		}
		ins[round%2].send(t, project, seq, recs...)
		if round%5 == 0 {
			ins[(round+1)%2].send(t, project, seq, recs...) // the same batch again, elsewhere
		}
		seq += uint64(len(recs))
	}
	store := e.incidents(t)
	var list []incident.Incident
	require.Eventually(t, func() bool {
		var err error
		list, err = store.List(context.Background(), project, "", 50)
		if err != nil || len(list) != 3 {
			return false
		}
		for _, i := range list {
			if !i.OpeningDone || i.Pending != nil {
				return false
			}
		}
		return true
	}, 15*time.Second, 20*time.Millisecond, "three incidents whose opening calls are done")
	for _, i := range list {
		assert.Equal(t, int64(sent[i.Fingerprint]), i.Events, "%s: each event counted once", i.Fingerprint)
		assert.Equal(t, 1, i.Calls)
		assert.Equal(t, 1, i.Generation)
	}
	opened := a.byReason(incident.ReasonOpened)
	require.Len(t, opened, 3)
	for id, calls := range opened {
		assert.Len(t, calls, 1, "incident %s: one opening call", id)
	}
}

// A process stopped in the middle of an opening call leaves its claim; another process
// takes it over once claim_timeout has passed, and the agent gets the same call again,
// under the same X-Request-Id, never a second one.
func TestAClaimLeftByAStoppedProcessIsTakenOverWithTheSameRequestID(t *testing.T) {
	e := newEnv(t)
	firstCall := make(chan struct{})
	a := newAgent(t, func(n int, r *http.Request) {
		if n == 1 {
			close(firstCall)
			<-r.Context().Done() // hangs until the stopping process cuts it
		}
	})
	project := projectID("takeover")
	e.put(t, incidentProject(project, a.srv.URL, func(p *mirror.Pipeline) { p.GroupWait = "0s"; p.GroupInterval = "1h" }))
	first := e.start(t, redisURL())
	first.send(t, project, 1, errorEvent("api", 1), errorEvent("api", 2))
	select {
	case <-firstCall:
	case <-time.After(10 * time.Second):
		t.Fatal("the opening call never came")
	}
	e.start(t, redisURL()) // the process that takes over
	first.stop(t, 200*time.Millisecond)
	stopped := time.Now()

	require.Eventually(t, func() bool { return len(a.got()) >= 2 }, 15*time.Second, 20*time.Millisecond, "taken over")
	got := a.got()
	assert.Equal(t, got[0].requestID, got[1].requestID, "the same call")
	assert.Equal(t, incident.ReasonOpened, got[1].body.Reason)
	// The claim was taken over once its process had stopped heartbeating, not while it
	// was making the call.
	assert.True(t, got[1].at.After(stopped), "taken over after the first process stopped")
	assert.Len(t, got[1].body.Events, 2)

	store := e.incidents(t)
	require.Eventually(t, func() bool {
		list, err := store.List(context.Background(), project, "", 10)
		return err == nil && len(list) == 1 && list[0].OpeningDone && list[0].Pending == nil && list[0].Calls == 1
	}, 10*time.Second, 20*time.Millisecond)
	ids := map[string]bool{}
	for _, c := range a.got() {
		if c.body.Reason == incident.ReasonOpened {
			ids[c.requestID] = true
		}
	}
	assert.Len(t, ids, 1, "one opening call, whatever the attempts")
}

// The project's call budget applies to incident calls: past max_calls_per_minute the
// call is not made, the incident's timeline says it was refused, and it is no call.
func TestACallPastTheBudgetIsRefused(t *testing.T) {
	e := newEnv(t)
	a := newAgent(t, nil)
	project := projectID("budget")
	e.put(t, incidentProject(project, a.srv.URL, func(p *mirror.Pipeline) { p.GroupWait = "0s"; p.MaxCallsPerMinute = 1 }))
	in := e.start(t, "")
	minute := time.Now().Truncate(time.Minute)
	in.send(t, project, 1, errorEvent("api", 1), errorEvent("db", 1))

	store := e.incidents(t)
	var refused incident.Incident
	require.Eventually(t, func() bool {
		list, err := store.List(context.Background(), project, "", 10)
		if err != nil {
			return false
		}
		for _, i := range list {
			full, err := store.Get(context.Background(), project, i.ID)
			if err != nil {
				continue
			}
			for _, en := range full.Timeline {
				if en.Type == "call" && en.Outcome == outcomeRefused {
					refused = full
					return true
				}
			}
		}
		return false
	}, 10*time.Second, 20*time.Millisecond, "a refused call in a timeline")
	if time.Now().Truncate(time.Minute) != minute {
		t.Skip("the minute turned: the budget allowed a second call")
	}
	assert.Len(t, a.got(), 1, "one call in the minute")
	assert.Zero(t, refused.Calls, "a refused call is no call")
}

// A record resolve_when matches never opens an incident, even when the trigger matches
// it too (here the trigger is every record): with no incident of its fingerprint open it
// changes nothing; with one open it resolves it, and is no event of it.
func TestAResolvingRecordNeverOpensAnIncident(t *testing.T) {
	e := newEnv(t)
	a := newAgent(t, nil)
	project := projectID("resolving")
	e.put(t, incidentProject(project, a.srv.URL, func(p *mirror.Pipeline) { p.Trigger, p.GroupWait = "", "0s" }))
	in := e.start(t, "")
	store := e.incidents(t)
	list := func() []incident.Incident {
		t.Helper()
		l, err := store.List(context.Background(), project, "", 10)
		require.NoError(t, err)
		return l
	}

	// Apply is done when the batch is: what it opened is in the store now.
	in.send(t, project, 1, okEvent("api"))
	assert.Empty(t, list(), "a resolving record alone opens nothing")

	in.send(t, project, 2, errorEvent("api", 1), okEvent("db"))
	l := list()
	require.Len(t, l, 1, "only the error opened one: %+v", l)
	api := l[0]
	assert.Equal(t, "api", api.Fingerprint)
	assert.Equal(t, 1, api.Generation, "no incident of api before")
	assert.Equal(t, int64(1), api.Events)

	// The resolving record resolves it and is not counted as its event.
	in.send(t, project, 4, okEvent("api"))
	l = list()
	require.Len(t, l, 1)
	assert.Equal(t, incident.StatusResolved, l[0].Status)
	assert.Equal(t, int64(1), l[0].Events)

	require.Eventually(t, func() bool { return len(a.byReason(incident.ReasonResolved)[api.ID]) == 1 },
		10*time.Second, 20*time.Millisecond, "the resolved call")
	opened := a.byReason(incident.ReasonOpened)
	require.Len(t, opened, 1)
	require.Len(t, opened[api.ID], 1)
	assert.Len(t, opened[api.ID][0].body.Events, 1, "the opening call tells of the error alone")
	assert.Len(t, a.got(), 2, "an opening and a resolved call, nothing about the resolving records")
}

// slowEvents is the processor's own window store, whose adds of incident events take
// a while (Redis far away, a large batch).
type slowEvents struct {
	windowstore.Store
	delay time.Duration
}

func (s slowEvents) hasEvents(groups ...string) bool {
	for _, g := range groups {
		if strings.HasPrefix(g, eventsGroupPrefix) {
			return true
		}
	}
	return false
}

func (s slowEvents) Add(ctx context.Context, project, group string, seq uint64, rec []byte, at time.Time, ttl time.Duration) error {
	if s.hasEvents(group) {
		time.Sleep(s.delay)
	}
	return s.Store.Add(ctx, project, group, seq, rec, at, ttl)
}

func (s slowEvents) AddBatch(ctx context.Context, project string, at time.Time, ttl time.Duration, entries []windowstore.Entry) error {
	groups := make([]string, len(entries))
	for i, en := range entries {
		groups[i] = en.Group
	}
	if s.hasEvents(groups...) {
		time.Sleep(s.delay)
	}
	return s.Store.AddBatch(ctx, project, at, ttl, entries)
}

// With group_wait 0 the opening call still tells of the batch that opened the incident,
// however long its events take to be stored: the call waits for them.
func TestTheOpeningCallWaitsForItsBatchsEvents(t *testing.T) {
	e := newEnv(t)
	a := newAgent(t, nil)
	project := projectID("slowstore")
	e.put(t, incidentProject(project, a.srv.URL, func(p *mirror.Pipeline) { p.GroupWait, p.GroupInterval = "0s", "1h" }))
	// Slower than ten ticks and than the margin other processes are given.
	in := e.startWith(t, slowEvents{Store: windowstore.NewMemory(30 * time.Second), delay: time.Second})
	in.send(t, project, 1, errorEvent("api", 1), errorEvent("api", 2), errorEvent("api", 3))

	require.Eventually(t, func() bool { return len(a.byReason(incident.ReasonOpened)) == 1 }, 10*time.Second, 20*time.Millisecond)
	for _, calls := range a.byReason(incident.ReasonOpened) {
		require.Len(t, calls, 1)
		assert.Len(t, calls[0].body.Events, 3, "the opening call carries its batch's events")
		assert.Zero(t, calls[0].body.EventsLeftOut)
	}
}

// createLogsWith is createLogs with the processor's window store given (nil: its own),
// which also returns the processor.
func createLogsWith(ctx context.Context, set processor.Settings, cfg *Config, next consumer.Logs, store windowstore.Store) (processor.Logs, *incidentProcessor, error) {
	p, err := newProcessor(cfg, set, next)
	if err != nil {
		return nil, nil, err
	}
	p.store = store
	proc, err := processorhelper.NewLogs(ctx, set, cfg, next, p.processLogs,
		processorhelper.WithStart(p.start), processorhelper.WithShutdown(p.shutdown),
		processorhelper.WithCapabilities(consumer.Capabilities{MutatesData: true}))
	return proc, p, err
}

// A batch delivered again counts only its events the incident has not counted: after
// many batches since (more than any list of recent batches keeps), and when it comes
// back mixed with new records under the same first sequence.
func TestARedeliveredBatchCountsOnlyWhatIsNew(t *testing.T) {
	e := newEnv(t)
	a := newAgent(t, nil)
	project := projectID("redeliver")
	e.put(t, incidentProject(project, a.srv.URL, func(p *mirror.Pipeline) { p.GroupWait = "1h" }))
	in := e.start(t, "")
	store := e.incidents(t)
	events := func() int64 {
		t.Helper()
		l, err := store.List(context.Background(), project, "", 10)
		require.NoError(t, err)
		require.Len(t, l, 1)
		return l[0].Events
	}

	first := make([]string, 10)
	for i := range first {
		first[i] = errorEvent("api", i)
	}
	in.send(t, project, 1, first...)
	seq := uint64(11)
	for i := range 70 {
		in.send(t, project, seq, errorEvent("api", 100+i))
		seq++
	}
	require.Equal(t, int64(80), events())
	in.send(t, project, 1, first...) // the first batch again, long after
	assert.Equal(t, int64(80), events(), "the first batch counted once")

	// Back mixed with new records: the same first sequence, two more events.
	in.send(t, project, seq-2, errorEvent("api", 168), errorEvent("api", 169), errorEvent("api", 170), errorEvent("api", 171))
	assert.Equal(t, int64(82), events(), "the new records of a batch that comes back count")
}

// outputNotices reads the incident notices on the project's output stream, by incident
// id (their transitions, in order).
func outputNotices(t *testing.T, js jetstream.JetStream, project string) map[string][]string {
	t.Helper()
	ctx := context.Background()
	s, err := js.Stream(ctx, streams.OutputStream(project))
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	require.NoError(t, err)
	info, err := s.Info(ctx)
	require.NoError(t, err)
	out := map[string][]string{}
	for sq := info.State.FirstSeq; sq <= info.State.LastSeq && info.State.Msgs > 0; sq++ {
		m, err := s.GetMsg(ctx, sq)
		if err != nil {
			continue
		}
		id := m.Header.Get(incident.HeaderIncidentID)
		if id == "" {
			continue
		}
		var n struct {
			Transition string `json:"transition"`
		}
		require.NoError(t, json.Unmarshal(m.Data, &n))
		out[id] = append(out[id], n.Transition)
	}
	return out
}

// A change's notices are on the output stream when the batch is done, and out of the
// incident's outbox.
func TestNoticesLeaveTheOutboxOncePublished(t *testing.T) {
	e := newEnv(t)
	a := newAgent(t, nil)
	project := projectID("outbox")
	e.put(t, incidentProject(project, a.srv.URL, func(p *mirror.Pipeline) { p.GroupWait = "1h" }))
	in := e.start(t, "")
	store := e.incidents(t)

	in.send(t, project, 1, errorEvent("api", 1), okEvent("api"))
	l, err := store.List(context.Background(), project, "", 10)
	require.NoError(t, err)
	require.Len(t, l, 1)
	assert.Equal(t, []string{"opened", "resolved"}, outputNotices(t, e.js, project)[l[0].ID])
	i, err := store.Get(context.Background(), project, l[0].ID)
	require.NoError(t, err)
	assert.Empty(t, i.Outbox, "published notices leave the outbox")
}

// Notices a process wrote with its change but did not publish (it died, or the stream
// was away) are published by a ticker a few seconds later, once.
func TestATickerPublishesNoticesLeftInAnOutbox(t *testing.T) {
	e := newEnv(t)
	a := newAgent(t, nil)
	project := projectID("leftover")
	p := incidentProject(project, a.srv.URL, func(p *mirror.Pipeline) { p.GroupWait = "1h" })
	e.put(t, p)
	set, err := incident.SettingsOf(p.Pipeline)
	require.NoError(t, err)
	store := e.incidents(t)
	// The dead process's change, ten seconds ago: never published.
	res, err := store.Apply(context.Background(), project, set, incident.Join{Fingerprint: "api", Seqs: []uint64{1}, ResolveSeq: 2,
		Resolve: true, Title: "api is failing", At: time.Now().Add(-10 * time.Second)})
	require.NoError(t, err)
	require.Len(t, res.Notices, 2)
	id := res.Incident.ID

	e.start(t, "")
	require.Eventually(t, func() bool {
		i, err := store.Get(context.Background(), project, id)
		return err == nil && len(i.Outbox) == 0
	}, 10*time.Second, 20*time.Millisecond, "the outbox cleared")
	assert.Equal(t, []string{"opened", "resolved"}, outputNotices(t, e.js, project)[id], "each published once")
}

// A project whose notices cannot be published is told at WARN once per incident,
// however often they are tried again.
func TestANoticeFailureIsWarnedOncePerIncident(t *testing.T) {
	e := newEnv(t)
	a := newAgent(t, nil)
	project := projectID("nostream")
	p := incidentProject(project, a.srv.URL, func(p *mirror.Pipeline) { p.GroupWait = "1h" })
	e.put(t, p)
	// Another stream holds the output subject: the output stream cannot be created.
	_, err := e.js.CreateStream(context.Background(), jetstream.StreamConfig{Name: "squatter-" + project,
		Subjects: []string{streams.OutputSubject(project)}})
	require.NoError(t, err)
	set, err := incident.SettingsOf(p.Pipeline)
	require.NoError(t, err)
	store := e.incidents(t)
	var ids []string
	for i, fp := range []string{"api", "db"} {
		res, err := store.Apply(context.Background(), project, set, incident.Join{Fingerprint: fp, Seqs: []uint64{uint64(i + 1)},
			Title: fp + " is failing", At: time.Now().Add(-10 * time.Second)})
		require.NoError(t, err)
		ids = append(ids, res.Incident.ID)
	}

	core, logs := observer.New(zap.DebugLevel)
	e.startProcess(t, procOptions{logger: zap.New(core)})
	failures := func(level zapcore.Level, id string) int {
		n := 0
		for _, en := range logs.All() {
			if en.Level == level && en.ContextMap()["incident_id"] == id && strings.Contains(en.Message, "notices not published") {
				n++
			}
		}
		return n
	}
	tries := func(id string) int { return failures(zapcore.WarnLevel, id) + failures(zapcore.DebugLevel, id) }
	require.Eventually(t, func() bool { return tries(ids[0]) >= 3 && tries(ids[1]) >= 3 },
		15*time.Second, 20*time.Millisecond, "tried again and again")
	for _, id := range ids {
		assert.Equal(t, 1, failures(zapcore.WarnLevel, id), "incident %s warned once", id)
	}
}

// The ticker follows what may still be due, not every incident there is: of a project's
// incidents it holds the open ones and those whose calls or notices are still to go
// out, and only what decides that.
func TestTheTickerHoldsOnlyIncidentsWithSomethingDue(t *testing.T) {
	e := newEnv(t)
	a := newAgent(t, nil)
	project := projectID("index")
	e.put(t, incidentProject(project, a.srv.URL, func(p *mirror.Pipeline) { p.GroupWait = "0s" }))
	in := e.start(t, "")
	fps := []string{"a", "b", "c", "d", "e"}
	for i, fp := range fps {
		in.send(t, project, uint64(i+1), errorEvent(fp, i))
	}
	held := func() map[string]incident.DueState {
		in.p.ticker.mu.Lock()
		defer in.p.ticker.mu.Unlock()
		out := map[string]incident.DueState{}
		for k, d := range in.p.ticker.index {
			if strings.HasPrefix(k, project+".f.") {
				out[k] = d
			}
		}
		return out
	}
	require.Eventually(t, func() bool { return len(held()) == 5 }, 10*time.Second, 20*time.Millisecond, "five open")
	for i, fp := range fps[:3] {
		in.send(t, project, uint64(10+i), okEvent(fp))
	}
	require.Eventually(t, func() bool { return len(a.byReason(incident.ReasonResolved)) == 3 }, 10*time.Second, 20*time.Millisecond)
	require.Eventually(t, func() bool {
		h := held()
		for _, d := range h {
			if d.Status != incident.StatusOpen {
				return false
			}
		}
		return len(h) == 2
	}, 10*time.Second, 20*time.Millisecond, "the resolved ones, told and published, are let go")
}

// With two processes sharing events, the one that makes a call waits for events the
// incident counted before the claim that the other process is still storing: the call
// carries them instead of only counting them as left out.
func TestACallWaitsForEventsAnotherProcessIsStoring(t *testing.T) {
	e := newEnv(t)
	a := newAgent(t, nil)
	project := projectID("otherstore")
	e.put(t, incidentProject(project, a.srv.URL, func(p *mirror.Pipeline) { p.GroupWait, p.GroupInterval = "0s", "1h" }))
	// One store shared as Redis would be; the first process stores slower than the
	// margin an opening is given, within the time a call waits for counted events.
	shared := windowstore.NewMemory(30 * time.Second)
	slow := e.startWith(t, slowEvents{Store: shared, delay: 1500 * time.Millisecond})
	e.startWith(t, shared)
	slow.send(t, project, 1, errorEvent("api", 1), errorEvent("api", 2), errorEvent("api", 3))

	require.Eventually(t, func() bool { return len(a.byReason(incident.ReasonOpened)) == 1 }, 10*time.Second, 20*time.Millisecond)
	for _, calls := range a.byReason(incident.ReasonOpened) {
		require.Len(t, calls, 1)
		assert.Len(t, calls[0].body.Events, 3, "the opening call carries the events stored by the other process")
		assert.Zero(t, calls[0].body.EventsLeftOut)
	}
}

// A call the budget keeps refusing is tried again as the same call: its request id stays,
// so the bucket holds one c-key for it however many times it is refused (a c-key lives
// 30 days; a new one per attempt filled the bucket). The refusal's wait is cut short
// here by moving the incident's refused_at back, as if the minute had passed.
func TestARefusedCallIsRetriedUnderItsRequestID(t *testing.T) {
	e := newEnv(t)
	a := newAgent(t, nil)
	project := projectID("refusedid")
	e.put(t, incidentProject(project, a.srv.URL, func(p *mirror.Pipeline) { p.GroupWait = "0s"; p.MaxCallsPerDay = 1 }))
	in := e.start(t, "")
	in.send(t, project, 1, errorEvent("api", 1))
	require.Eventually(t, func() bool { return len(a.byReason(incident.ReasonOpened)) == 1 }, 10*time.Second, 20*time.Millisecond)
	in.send(t, project, 2, errorEvent("api", 2)) // an update is due, past the day's budget

	store := e.incidents(t)
	kv := store.KV()
	key := project + ".f." + incident.FingerprintHash("api")
	refusedAt := func() (time.Time, bool) {
		en, err := kv.Get(context.Background(), key)
		if err != nil {
			return time.Time{}, false
		}
		var i incident.Incident
		if json.Unmarshal(en.Value(), &i) != nil || i.Pending != nil {
			return time.Time{}, false
		}
		return i.RefusedAt, !i.RefusedAt.IsZero()
	}
	var last time.Time
	for attempt := range 3 {
		require.Eventually(t, func() bool {
			at, ok := refusedAt()
			return ok && at.After(last)
		}, 15*time.Second, 20*time.Millisecond, "refused attempt %d", attempt+1)
		last, _ = refusedAt()
		_, err := streams.UpdateKV(context.Background(), kv, key, func(old []byte, exists bool) ([]byte, error) {
			// The value's field order is kept: the ticker's index reads only its head.
			back, _ := json.Marshal(time.Now().Add(-2 * time.Hour).UTC())
			return refusedAtField.ReplaceAll(old, append([]byte(`"refused_at":`), back...)), nil
		})
		require.NoError(t, err)
	}
	require.Len(t, a.got(), 1, "only the opening call was made")

	lister, err := kv.ListKeysFiltered(context.Background(), project+".c.*")
	require.NoError(t, err)
	var ckeys []string
	for k := range lister.Keys() {
		ckeys = append(ckeys, k)
	}
	assert.Len(t, ckeys, 2, "one c-key for the opening call and one for the refused update, however often refused: %v", ckeys)

	list, err := store.List(context.Background(), project, "", 10)
	require.NoError(t, err)
	require.Len(t, list, 1)
	full, err := store.Get(context.Background(), project, list[0].ID)
	require.NoError(t, err)
	var refusals []incident.Entry
	for _, en := range full.Timeline {
		if en.Type == "call" && en.Outcome == outcomeRefused {
			refusals = append(refusals, en)
		}
	}
	require.Len(t, refusals, 1, "one timeline entry for the refused call")
	assert.GreaterOrEqual(t, refusals[0].Count, int64(3), "counting its attempts")
}

var refusedAtField = regexp.MustCompile(`"refused_at":"[^"]*"`)
