package console

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/extension/extensiontest"
	"go.uber.org/zap"

	"github.com/otelcol-svc/otelcol-svc/extension/configmirrorextension"
	"github.com/otelcol-svc/otelcol-svc/extension/projectauthextension"
	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
	"github.com/otelcol-svc/otelcol-svc/internal/apikey"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/principal"
	"github.com/otelcol-svc/otelcol-svc/internal/consoletoken"
	"github.com/otelcol-svc/otelcol-svc/internal/deliverylog"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// logStack is the console API authenticated by the real projectauth extension, against a
// mirror holding project A (an owner, an admin, a member, sinks s1 on and s2 off) and
// project B (its own owner), each with a project API key.
type logStack struct {
	api        *API
	url        string
	js         jetstream.JetStream
	keyA, keyB string
	priv       ed25519.PrivateKey
	grants     map[string]int64
	writer     *deliverylog.Writer
}

// hostOf is the collector host holding the extensions projectauth takes at Start.
type hostOf map[component.ID]component.Component

func (h hostOf) GetExtensions() map[component.ID]component.Component { return h }

var mcfgID = component.MustNewID("configmirror")

const (
	projA = "pa"
	projB = "pb"
)

func startLogStack(t *testing.T) *logStack {
	t.Helper()
	ctx := context.Background()
	n := testenv.StartNATS(t)
	_, js := testenv.Connect(t, n.URL())
	m, err := mirror.Open(ctx, js, 1)
	require.NoError(t, err)
	s := &logStack{js: js, keyA: apikey.Generate(apikey.KindProject), keyB: apikey.Generate(apikey.KindProject),
		grants: map[string]int64{"owner": 1000, "admin": 2000, "member": 3000, "viewer": 4000, "owner_b": 5000}}
	require.NoError(t, m.PutProject(ctx, mirror.Project{ID: projA, AccountID: "a1", Version: 1,
		Members: map[string]int64{"owner": 1000, "admin": 2000, "member": 3000, "viewer": 4000},
		Roles:   map[string]string{"owner": "owner", "admin": "admin", "member": "member", "viewer": "viewer"},
		Sinks:   []mirror.Sink{{ID: "s1", Kind: "webhook", Enabled: true}, {ID: "s2", Kind: "webhook"}}}))
	require.NoError(t, m.PutProject(ctx, mirror.Project{ID: projB, AccountID: "a2", Version: 1,
		Members: map[string]int64{"owner_b": 5000}, Roles: map[string]string{"owner_b": "owner"}}))
	require.NoError(t, m.PutKey(ctx, apikey.Hash(s.keyA), mirror.KeyEntry{KeyID: "ka", ProjectID: projA, AccountID: "a1", Scope: mirror.ScopeProject}))
	require.NoError(t, m.PutKey(ctx, apikey.Hash(s.keyB), mirror.KeyEntry{KeyID: "kb", ProjectID: projB, AccountID: "a2", Scope: mirror.ScopeProject}))
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	s.priv = priv
	require.NoError(t, m.PutConsoleKeys(ctx, mirror.ConsoleKeys{PublicKeys: []string{base64.StdEncoding.EncodeToString(pub)}}))

	// projectauth reads the mirror, and lends its NATS connection, from configmirror.
	mf := configmirrorextension.NewFactory()
	mcfg := mf.CreateDefaultConfig().(*configmirrorextension.Config)
	mcfg.NATS.URL = n.URL()
	mext, err := mf.Create(ctx, extensiontest.NewNopSettings(mf.Type()), mcfg)
	require.NoError(t, err)
	require.NoError(t, mext.Start(ctx, componenttest.NewNopHost()))
	t.Cleanup(func() { _ = mext.Shutdown(context.Background()) })
	f := projectauthextension.NewFactory()
	ext, err := f.Create(ctx, extensiontest.NewNopSettings(f.Type()), f.CreateDefaultConfig())
	require.NoError(t, err)
	require.NoError(t, ext.Start(ctx, hostOf{mcfgID: mext}))
	t.Cleanup(func() { _ = ext.Shutdown(context.Background()) })
	auth, ok := ext.(Authenticator)
	require.True(t, ok, "the projectauth extension is what the console needs")
	require.Eventually(t, func() bool {
		c := auth.MirrorCache()
		_, a := c.Project(projA)
		_, b := c.Project(projB)
		return c.Ready() && len(c.ConsoleKeys()) == 1 && a && b
	}, 10*time.Second, 10*time.Millisecond)

	api := New(Settings{Auth: auth, RetryAfter: 5 * time.Second, Logger: zap.NewNop(), Refuse: refuse, AllowedOrigins: []string{dashboardOrigin}})
	mux := http.NewServeMux()
	api.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	s.url = srv.URL
	s.api = api

	_, err = deliverylog.EnsureStream(ctx, js, deliverylog.StoreConfig{})
	require.NoError(t, err)
	s.writer = deliverylog.NewWriter(js, deliverylog.WriterConfig{})
	t.Cleanup(func() { _ = s.writer.Close(context.Background()) })
	return s
}

// refuse maps refusals as the receiver does (sources.go authRefusal).
func refuse(err error) *apierror.Error {
	switch {
	case errors.Is(err, principal.ErrNotFound):
		return apierror.New(http.StatusNotFound, apierror.NotFound, principal.Message(err, "not found"))
	case errors.Is(err, principal.ErrMissingKey):
		return apierror.New(http.StatusUnauthorized, apierror.MissingAPIKey, principal.Message(err, "no credentials"))
	case errors.Is(err, principal.ErrInvalidToken):
		return apierror.New(http.StatusUnauthorized, apierror.InvalidToken, principal.Message(err, "invalid token"))
	default:
		return apierror.New(http.StatusUnauthorized, apierror.InvalidAPIKey, principal.Message(err, "invalid key"))
	}
}

// flush publishes what the writer holds (Close waits for the acks) and starts a new one.
func (s *logStack) flush(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, s.writer.Close(ctx))
	s.writer = deliverylog.NewWriter(s.js, deliverylog.WriterConfig{})
	t.Cleanup(func() { _ = s.writer.Close(context.Background()) })
}

func (s *logStack) key(project string) map[string]string {
	if project == projA {
		return map[string]string{"X-API-Key": s.keyA}
	}
	return map[string]string{"X-API-Key": s.keyB}
}

// token is the console token the control plane would give user for project.
func (s *logStack) token(t *testing.T, user, project string) map[string]string {
	t.Helper()
	tok, err := consoletoken.Issue(s.priv, consoletoken.Claims{UserID: user, ProjectID: project, Grant: s.grants[user]}, time.Minute, time.Now())
	require.NoError(t, err)
	return map[string]string{"Authorization": "Bearer " + tok}
}

func (s *logStack) get(t *testing.T, path string, headers map[string]string) answer {
	t.Helper()
	return do(t, http.MethodGet, s.url+"/console/v1/projects/"+path, headers)
}

func (s *logStack) post(t *testing.T, project, body string, headers map[string]string) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.url+"/console/v1/projects/"+project+"/deliveries/replay", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
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

// seed logs, in project A: an agent call the agent answered 404 (dead-lettered), a
// delivered webhook delivery, one still retrying; in project B one dead-lettered call.
func (s *logStack) seed(t *testing.T) time.Time {
	t.Helper()
	base := time.Now().UTC().Add(-10 * time.Minute).Truncate(time.Second)
	w := s.writer
	w.Record(projA, deliverylog.Delivery{ID: "req_call1", Kind: deliverylog.KindAgent, RequestID: "req_call1", Records: 2,
		CreatedAt: base, RequestBody: []byte(`{"records":[{"n":1},{"n":2}]}`)})
	w.Attempt(projA, "req_call1", deliverylog.Attempt{At: base, StatusCode: 404, Error: "agent answered 404", LatencyMS: 7}, []byte("no such route"))
	w.Finish(projA, "req_call1", deliverylog.Final{State: deliverylog.StateDeadLettered, Answer: []byte("no such route"), DeadLetterSeq: 9})

	w.Record(projA, deliverylog.Delivery{ID: "dlv_ok", Kind: deliverylog.KindSink, SinkID: "s1", RequestID: "req_call0", Records: 1,
		CreatedAt: base.Add(time.Minute), RequestBody: []byte(`{"summary":"fine"}`)})
	w.Attempt(projA, "dlv_ok", deliverylog.Attempt{At: base.Add(time.Minute), StatusCode: 200, LatencyMS: 3}, []byte(`{"ok":true}`))
	w.Finish(projA, "dlv_ok", deliverylog.Final{State: deliverylog.StateDelivered, Answer: []byte(`{"ok":true}`)})

	w.Record(projA, deliverylog.Delivery{ID: "dlv_retry", Kind: deliverylog.KindSink, SinkID: "s1", RequestID: "req_call0", Records: 1,
		CreatedAt: base.Add(2 * time.Minute), RequestBody: []byte(`{"summary":"later"}`)})
	for i := 0; i < 2; i++ {
		w.Attempt(projA, "dlv_retry", deliverylog.Attempt{At: base.Add(2 * time.Minute), StatusCode: 503, Error: "webhook unavailable", LatencyMS: 5}, nil)
	}

	w.Record(projB, deliverylog.Delivery{ID: "req_bcall", Kind: deliverylog.KindAgent, RequestID: "req_bcall", Records: 1, CreatedAt: base})
	w.Finish(projB, "req_bcall", deliverylog.Final{State: deliverylog.StateDeadLettered, DeadLetterSeq: 1})
	s.flush(t)
	return base
}

type listAnswer struct {
	Deliveries []struct {
		ID, Kind, State, SinkID string
		RequestID               string `json:"request_id"`
		StatusCode              int    `json:"status_code"`
		Attempts, Records       int
	} `json:"deliveries"`
}

func (s *logStack) list(t *testing.T, project, query string, headers map[string]string) []string {
	t.Helper()
	a := s.get(t, project+"/deliveries"+query, headers)
	require.Equal(t, http.StatusOK, a.status, "%s", a.body)
	var out listAnswer
	require.NoError(t, json.Unmarshal(a.body, &out))
	ids := []string{}
	for _, d := range out.Deliveries {
		ids = append(ids, d.ID)
	}
	return ids
}

func TestDeliveriesListNewestFirstWithFilters(t *testing.T) {
	s := startLogStack(t)
	base := s.seed(t)
	keyA := s.key(projA)
	assert.Equal(t, []string{"dlv_retry", "dlv_ok", "req_call1"}, s.list(t, projA, "", keyA))
	assert.Equal(t, []string{"req_call1"}, s.list(t, projA, "?state=dead_lettered", keyA))
	assert.Equal(t, []string{"dlv_retry"}, s.list(t, projA, "?state=retrying", keyA))
	assert.Equal(t, []string{"dlv_retry", "dlv_ok"}, s.list(t, projA, "?kind=sink", keyA))
	assert.Equal(t, []string{"dlv_retry"}, s.list(t, projA, "?limit=1", keyA))
	assert.Equal(t, []string{"dlv_retry", "dlv_ok"}, s.list(t, projA, "?since="+base.Add(30*time.Second).Format(time.RFC3339), keyA))
	assert.Equal(t, []string{"dlv_retry", "dlv_ok", "req_call1"}, s.list(t, projA, "", s.token(t, "viewer", projA)), "a viewer's console token reads")

	a := s.get(t, projA+"/deliveries", keyA)
	assert.Contains(t, string(a.body), `"status_code":503`)
	assert.NotContains(t, string(a.body), "request_body", "a list has no bodies")

	for q, msg := range map[string]string{
		"?state=lost":      "state: must be pending, retrying, delivered or dead_lettered",
		"?kind=email":      "kind: must be agent or sink",
		"?since=yesterday": "since: must be an RFC 3339 time",
		"?limit=0":         "limit: must be 1 to 500",
	} {
		a := s.get(t, projA+"/deliveries"+q, keyA)
		assert.Equal(t, http.StatusBadRequest, a.status, "%s: %s", q, a.body)
		assert.Equal(t, "invalid_body", a.code(t), q)
		assert.Contains(t, string(a.body), msg, q)
	}
}

func TestDeliveryWithAttemptLogAndBodies(t *testing.T) {
	s := startLogStack(t)
	s.seed(t)
	a := s.get(t, projA+"/deliveries/req_call1", s.key(projA))
	require.Equal(t, http.StatusOK, a.status, "%s", a.body)
	var d map[string]any
	require.NoError(t, json.Unmarshal(a.body, &d))
	assert.Equal(t, "req_call1", d["id"])
	assert.Equal(t, "agent", d["kind"])
	assert.Equal(t, "dead_lettered", d["state"])
	assert.EqualValues(t, 404, d["status_code"])
	assert.EqualValues(t, 9, d["dead_letter_seq"])
	assert.Equal(t, map[string]any{"records": []any{map[string]any{"n": 1.0}, map[string]any{"n": 2.0}}}, d["request_body"], "a JSON body is JSON")
	assert.Equal(t, "no such route", d["response_body"], "an answer that is not JSON is a string")
	assert.NotContains(t, d, "answer", "the contract names the answer response_body")
	log, ok := d["attempt_log"].([]any)
	require.True(t, ok, "%s", a.body)
	require.Len(t, log, 1)
	assert.EqualValues(t, 404, log[0].(map[string]any)["status_code"])
	assert.Equal(t, "agent answered 404", log[0].(map[string]any)["error"])

	a = s.get(t, projA+"/deliveries/dlv_ok", s.token(t, "member", projA))
	require.Equal(t, http.StatusOK, a.status, "%s", a.body)
	assert.Contains(t, string(a.body), `"response_body":{"ok":true}`)

	unknown := s.get(t, projA+"/deliveries/dlv_nope", s.key(projA))
	assert.Equal(t, http.StatusNotFound, unknown.status)
	assert.Equal(t, "not_found", unknown.code(t))
	odd := s.get(t, projA+"/deliveries/..%2A", s.key(projA))
	assert.Equal(t, http.StatusNotFound, odd.status, "%s", odd.body)
}

// Project A's key or console token never reads, traces or replays B's deliveries, nor
// B's ledger: answered as a delivery or project that does not exist.
func TestDeliveriesStayWithinTheProject(t *testing.T) {
	s := startLogStack(t)
	s.seed(t)
	for name, h := range map[string]map[string]string{"A's key": s.key(projA), "A's owner token": s.token(t, "owner", projA)} {
		for _, path := range []string{projB + "/deliveries", projB + "/deliveries/req_bcall", projB + "/ledger", projB + "/trace?request_id=req_bcall"} {
			a := s.get(t, path, h)
			assert.Equal(t, http.StatusNotFound, a.status, "%s on %s: %s", name, path, a.body)
			assert.Equal(t, "not_found", a.code(t))
		}
		a := s.post(t, projB, `{"ids":["req_bcall"]}`, h)
		assert.Equal(t, http.StatusNotFound, a.status, "%s replaying B's: %s", name, a.body)

		// B's id asked of A is a delivery A does not have: the same answer as any unknown id.
		theirs := s.get(t, projA+"/deliveries/req_bcall", h)
		unknown := s.get(t, projA+"/deliveries/req_never", h)
		assert.Equal(t, http.StatusNotFound, theirs.status, name)
		assert.JSONEq(t, string(unknown.body), string(theirs.body), name)
		tr := s.get(t, projA+"/trace?request_id=req_bcall", h)
		assert.Equal(t, http.StatusNotFound, tr.status, "%s: %s", name, tr.body)
	}
	a := s.post(t, projA, `{"ids":["req_bcall"]}`, s.token(t, "owner", projA))
	require.Equal(t, http.StatusAccepted, a.status, "%s", a.body)
	assert.Contains(t, string(a.body), `"replayed":0`)
	assert.Contains(t, string(a.body), `{"id":"req_bcall","reason":"`+reasonUnknown+`"}`)
	assert.Zero(t, s.replayJobs(t, 0), "nothing of B's was queued through A")
	assert.NotContains(t, s.list(t, projA, "", s.key(projA)), "req_bcall")
	assert.Equal(t, []string{"req_bcall"}, s.list(t, projB, "", s.token(t, "owner_b", projB)))
}

// replayJobs returns the jobs on the replay queue once it holds want of them (0: what it
// holds now).
func (s *logStack) replayJobsList(t *testing.T, want int) []deliverylog.Job {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := s.js.Stream(ctx, deliverylog.ReplayStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		require.Zero(t, want, "no replay queue")
		return nil
	}
	require.NoError(t, err)
	if want > 0 {
		require.Eventually(t, func() bool {
			info, err := st.Info(ctx)
			return err == nil && info.State.Msgs >= uint64(want)
		}, 5*time.Second, 10*time.Millisecond)
	}
	info, err := st.Info(ctx)
	require.NoError(t, err)
	if info.State.Msgs == 0 {
		return nil
	}
	// A work queue takes no ordered consumer: read its messages by sequence (nobody
	// takes them here, so none is missing).
	var jobs []deliverylog.Job
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := st.GetMsg(ctx, seq)
		require.NoError(t, err)
		j, err := deliverylog.ParseJob(m.Data)
		require.NoError(t, err)
		assert.Equal(t, deliverylog.ReplayPrefix+"."+j.Project, m.Subject)
		jobs = append(jobs, j)
	}
	return jobs
}

func (s *logStack) replayJobs(t *testing.T, want int) int { return len(s.replayJobsList(t, want)) }

type replayResult struct {
	Replayed int    `json:"replayed"`
	ReplayID string `json:"replay_id"`
	Skipped  []struct {
		ID, Reason string
	} `json:"skipped"`
}

func TestReplayByOwnerOrAdminIsQueued(t *testing.T) {
	s := startLogStack(t)
	s.seed(t)
	a := s.post(t, projA, `{"ids":["req_call1","dlv_retry","dlv_gone","req_call1"]}`, s.token(t, "owner", projA))
	require.Equal(t, http.StatusAccepted, a.status, "%s", a.body)
	var r replayResult
	require.NoError(t, json.Unmarshal(a.body, &r))
	assert.Equal(t, 1, r.Replayed, "%s", a.body)
	require.Len(t, r.Skipped, 2)
	assert.Equal(t, "dlv_retry", r.Skipped[0].ID)
	assert.Contains(t, r.Skipped[0].Reason, "still being delivered (state retrying)")
	assert.Equal(t, "dlv_gone", r.Skipped[1].ID)
	jobs := s.replayJobsList(t, 1)
	require.Len(t, jobs, 1)
	assert.Equal(t, projA, jobs[0].Project)
	assert.Equal(t, "req_call1", jobs[0].DeliveryID)
	assert.Equal(t, r.ReplayID, jobs[0].ReplayID)
	assert.Equal(t, "user:owner", jobs[0].RequestedBy)

	// All dead-lettered sink deliveries: none in A. All dead-lettered agent calls: one.
	a = s.post(t, projA, `{"state":"dead_lettered","kind":"sink"}`, s.token(t, "admin", projA))
	require.Equal(t, http.StatusAccepted, a.status, "%s", a.body)
	assert.JSONEq(t, `{"replayed":0,"skipped":[],"replay_id":`+jsonString(t, a, "replay_id")+`}`, string(a.body))
	a = s.post(t, projA, `{"state":"dead_lettered","kind":"agent"}`, s.token(t, "admin", projA))
	require.Equal(t, http.StatusAccepted, a.status, "%s", a.body)
	assert.Contains(t, string(a.body), `"replayed":1`)
	jobs = s.replayJobsList(t, 2)
	require.Len(t, jobs, 2)
	assert.Equal(t, "user:admin", jobs[1].RequestedBy)
	assert.NotEqual(t, jobs[0].ReplayID, jobs[1].ReplayID, "each request is its own replay")

	// A client retrying with its Idempotency-Key replays once.
	idem := map[string]string{"Idempotency-Key": "retry-me"}
	for k, v := range s.token(t, "owner", projA) {
		idem[k] = v
	}
	first := s.post(t, projA, `{"ids":["dlv_ok"]}`, idem)
	require.Equal(t, http.StatusAccepted, first.status, "%s", first.body)
	again := s.post(t, projA, `{"ids":["dlv_ok"]}`, idem)
	require.Equal(t, http.StatusAccepted, again.status, "%s", again.body)
	assert.JSONEq(t, string(first.body), string(again.body), "the same answer")
	assert.Len(t, s.replayJobsList(t, 3), 3, "the retried request queued nothing new")
}

func jsonString(t *testing.T, a answer, key string) string {
	t.Helper()
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(a.body, &m))
	return string(m[key])
}

func TestReplayIsForOwnersAndAdminsOnly(t *testing.T) {
	s := startLogStack(t)
	s.seed(t)
	for name, h := range map[string]map[string]string{
		"member token":      s.token(t, "member", projA),
		"viewer token":      s.token(t, "viewer", projA),
		"project API key":   s.key(projA),
		"API key as Bearer": {"Authorization": "Bearer " + s.keyA},
	} {
		a := s.post(t, projA, `{"ids":["req_call1"]}`, h)
		assert.Equal(t, http.StatusForbidden, a.status, "%s: %s", name, a.body)
		assert.Equal(t, "forbidden", a.code(t), name)
		assert.Contains(t, string(a.body), "owner", "%s: says who may", name)
	}
	a := s.post(t, projA, `{"ids":["req_call1"]}`, nil)
	assert.Equal(t, http.StatusUnauthorized, a.status, "%s", a.body)
	assert.Zero(t, s.replayJobs(t, 0), "a refused replay queues nothing")
}

func TestReplayRefusesBadBodies(t *testing.T) {
	s := startLogStack(t)
	owner := s.token(t, "owner", projA)
	for body, msg := range map[string]string{
		``:                                      "the body must be a JSON object",
		`[]`:                                    "the body must be a JSON object",
		`{"ids":[]}`:                            "ids: give 1 to 1000 delivery ids",
		`{"ids":["a.b"]}`:                       "is not a delivery id",
		`{"state":"delivered"}`:                 "only dead_lettered deliveries are replayed in bulk",
		`{"ids":["a"],"state":"dead_lettered"}`: "give either ids or state",
		`{"state":"dead_lettered","since":"today"}`: "since: must be an RFC 3339 time",
		`{"idz":["a"]}`: "unknown field",
	} {
		a := s.post(t, projA, body, owner)
		assert.Equal(t, http.StatusBadRequest, a.status, "%q: %s", body, a.body)
		assert.Equal(t, "invalid_body", a.code(t), body)
		assert.Contains(t, string(a.body), msg, body)
	}
	big := `{"ids":["` + strings.Repeat("a", deliverylog.MaxReplayBody) + `"]}`
	a := s.post(t, projA, big, owner)
	assert.Equal(t, http.StatusRequestEntityTooLarge, a.status, "%s", a.body)
	assert.Equal(t, "payload_too_large", a.code(t))
	h := map[string]string{"Idempotency-Key": strings.Repeat("k", maxIdempotencyKey+1)}
	for k, v := range owner {
		h[k] = v
	}
	a = s.post(t, projA, `{"ids":["a"]}`, h)
	assert.Equal(t, http.StatusBadRequest, a.status, "%s", a.body)
	assert.Zero(t, s.replayJobs(t, 0))
}

// The replay path takes POST from the dashboard's origin; the reads stay GET only.
func TestReplayPathAllowsPostOnly(t *testing.T) {
	s := startLogStack(t)
	fromDashboard := map[string]string{"Origin": dashboardOrigin}
	a := do(t, http.MethodOptions, s.url+"/console/v1/projects/"+projA+"/deliveries/replay", fromDashboard)
	assert.Equal(t, http.StatusNoContent, a.status)
	assert.Equal(t, "POST, OPTIONS", a.header.Get("Access-Control-Allow-Methods"))
	assert.Contains(t, a.header.Get("Access-Control-Allow-Headers"), "Content-Type")
	a = do(t, http.MethodGet, s.url+"/console/v1/projects/"+projA+"/deliveries/replay", s.key(projA))
	assert.Equal(t, http.StatusMethodNotAllowed, a.status, "%s", a.body)
	assert.Equal(t, "POST, OPTIONS", a.header.Get("Allow"))
	for _, path := range []string{"deliveries", "deliveries/x", "ledger", "trace"} {
		a = do(t, http.MethodOptions, s.url+"/console/v1/projects/"+projA+"/"+path, fromDashboard)
		assert.Equal(t, "GET, OPTIONS", a.header.Get("Access-Control-Allow-Methods"), path)
		a = do(t, http.MethodPost, s.url+"/console/v1/projects/"+projA+"/"+path, s.key(projA))
		assert.Equal(t, http.StatusMethodNotAllowed, a.status, path)
	}
}

func TestLedgerAnswersTheContractsKeys(t *testing.T) {
	s := startLogStack(t)
	ctx := context.Background()
	require.NoError(t, streams.Ensure(ctx, s.js, streams.RawConfig(projA, streams.DefaultLimits())))
	l, err := deliverylog.OpenLedger(ctx, s.js, time.Hour)
	require.NoError(t, err)
	l.Add(projA, deliverylog.Counters{Results: 2, Unmatched: 1})
	l.AddDestination(projA, "s1", deliverylog.Counters{Delivered: 1}, deliverylog.Destination{Delivered: 1})
	require.NoError(t, l.Close(ctx))
	for i := 0; i < 3; i++ {
		_, err := s.js.Publish(ctx, streams.RawSubject(projA), []byte(`{}`))
		require.NoError(t, err)
	}

	a := s.get(t, projA+"/ledger", s.token(t, "member", projA))
	require.Equal(t, http.StatusOK, a.status, "%s", a.body)
	var got map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(a.body, &got))
	for _, k := range []string{"received", "dropped", "agent_calls", "results", "delivered", "dead_lettered", "pending",
		"calls", "unmatched", "destinations", "balanced", "unaccounted"} {
		assert.Contains(t, got, k)
	}
	var v deliverylog.LedgerView
	require.NoError(t, json.Unmarshal(a.body, &v))
	assert.EqualValues(t, 3, v.Received)
	assert.EqualValues(t, 3, v.Pending, "no pipeline has read them")
	// s1's figures were only counted (no cursor start was recorded for it), so the
	// ledger may not call itself balanced and says why.
	assert.False(t, v.Balanced, "a destination with counted figures")
	assert.NotEmpty(t, v.Approximate)
	assert.EqualValues(t, 2, v.Results)
	assert.EqualValues(t, 1, v.Unmatched)
	assert.Equal(t, map[string]deliverylog.Destination{"s1": {Delivered: 1, ApproximateReason: "start_unknown"}},
		v.Destinations, "the enabled sink; s2 is off")

	a = s.get(t, projB+"/ledger", s.key(projB))
	require.Equal(t, http.StatusOK, a.status, "%s", a.body)
	require.NoError(t, json.Unmarshal(a.body, &v))
	assert.Zero(t, v.Results, "A's counts are A's")
}

func TestTraceFromRecordOrRequestID(t *testing.T) {
	s := startLogStack(t)
	ctx := context.Background()
	require.NoError(t, streams.Ensure(ctx, s.js, streams.RawConfig(projA, streams.DefaultLimits())))
	require.NoError(t, streams.Ensure(ctx, s.js, streams.OutputConfig(projA, streams.DefaultLimits())))
	for i := 0; i < 3; i++ {
		_, err := s.js.PublishMsg(ctx, &nats.Msg{Subject: streams.RawSubject(projA), Data: []byte(`{}`), Header: nats.Header{streams.HeaderSignal: []string{"event"}}})
		require.NoError(t, err)
	}
	s.writer.Record(projA, deliverylog.Delivery{ID: "req_t", Kind: deliverylog.KindAgent, RequestID: "req_t", Records: 1, Seqs: []uint64{2}})
	s.writer.Finish(projA, "req_t", deliverylog.Final{State: deliverylog.StateDelivered})
	s.flush(t)
	_, err := s.js.PublishMsg(ctx, &nats.Msg{Subject: streams.OutputSubject(projA), Data: []byte(`{"summary":"x"}`), Header: nats.Header{streams.HeaderRequestID: []string{"req_t"}}})
	require.NoError(t, err)
	s.writer.Record(projA, deliverylog.Delivery{ID: "dlv_t", Kind: deliverylog.KindSink, SinkID: "s1", RequestID: "req_t", Records: 1})
	s.writer.Finish(projA, "dlv_t", deliverylog.Final{State: deliverylog.StateDelivered})
	s.flush(t)

	type traceAnswer struct {
		Record *struct{ Seq uint64 } `json:"record"`
		Call   *struct {
			ID string `json:"id"`
		} `json:"call"`
		Results []struct {
			RequestID string `json:"request_id"`
		} `json:"results"`
		Deliveries []struct {
			ID string `json:"id"`
		} `json:"deliveries"`
		Complete bool `json:"complete"`
	}
	for _, q := range []string{"?seq=2", "?request_id=req_t"} {
		a := s.get(t, projA+"/trace"+q, s.key(projA))
		require.Equal(t, http.StatusOK, a.status, "%s: %s", q, a.body)
		var tr traceAnswer
		require.NoError(t, json.Unmarshal(a.body, &tr))
		require.NotNil(t, tr.Call, q)
		assert.Equal(t, "req_t", tr.Call.ID, q)
		require.Len(t, tr.Results, 1, q)
		require.Len(t, tr.Deliveries, 1, q)
		assert.Equal(t, "dlv_t", tr.Deliveries[0].ID, q)
		assert.True(t, tr.Complete, q)
	}
	a := s.get(t, projA+"/trace?seq=2", s.key(projA))
	assert.Contains(t, string(a.body), `"record":{"seq":2`)

	a = s.get(t, projA+"/trace?seq=99", s.key(projA))
	assert.Equal(t, http.StatusNotFound, a.status, "%s", a.body)
	a = s.get(t, projA+"/trace?request_id=dlv_t", s.key(projA))
	assert.Equal(t, http.StatusNotFound, a.status, "a sink delivery is not a call: %s", a.body)
	for _, q := range []string{"", "?seq=1&request_id=req_t", "?seq=abc", "?seq=0", "?request_id=a.b", "?seq=1&seq=2"} {
		a := s.get(t, projA+"/trace"+q, s.key(projA))
		assert.Equal(t, http.StatusBadRequest, a.status, "%s: %s", q, a.body)
		assert.Equal(t, "invalid_body", a.code(t), q)
	}
	a = s.get(t, projA+"/trace?seq=2", s.key(projB))
	assert.Equal(t, http.StatusNotFound, a.status, "B's key traces nothing of A's: %s", a.body)
}

func FuzzParseTraceQuery(f *testing.F) {
	for _, s := range []string{"seq=1", "request_id=req_abc", "seq=1&request_id=x", "", "seq=-1", "seq=18446744073709551616", "request_id=%2A", "seq=1&seq=1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		tq, err := parseTraceQuery(q)
		if err != nil {
			return
		}
		if (tq.seq == 0) == (tq.requestID == "") {
			t.Fatalf("%q: exactly one of seq and request_id, got %+v", raw, tq)
		}
		if tq.requestID != "" && !requestIDRE.MatchString(tq.requestID) {
			t.Fatalf("%q: request_id %q is not one subject token", raw, tq.requestID)
		}
	})
}

// A delivery waiting for its retry answers, listed and opened, when the next try is due
// (next_attempt_at), and its attempts the request headers they sent, credentials as
// [redacted] whoever reads: a member's console token, an owner's, the project's key.
func TestWaitingDeliveryAnswersNextAttemptAndRedactedRequestHeaders(t *testing.T) {
	s := startLogStack(t)
	sent := http.Header{}
	sent.Set("Content-Type", "application/json")
	sent.Set("X-Request-Id", "req_call0")
	sent.Set("Webhook-Signature", "v1,c2lnbmF0dXJl")
	sent.Set("Authorization", "Bearer hook-secret")
	sent.Set("X-Api-Key", "key-secret")
	due := time.Now().UTC().Add(2 * time.Minute).Truncate(time.Millisecond)
	s.writer.Record(projA, deliverylog.Delivery{ID: "dlv_wait", Kind: deliverylog.KindSink, SinkID: "s1", RequestID: "req_call0", Records: 1})
	s.writer.Attempt(projA, "dlv_wait", deliverylog.Attempt{StatusCode: 503, Error: "503", LatencyMS: 5,
		RequestHeaders: deliverylog.LogHeaders(sent, map[string]string{"Authorization": "Bearer hook-secret"})}, nil)
	s.writer.NextAttempt(projA, "dlv_wait", due)
	s.flush(t)

	for who, cred := range map[string]map[string]string{"member": s.token(t, "member", projA), "owner": s.token(t, "owner", projA), "key": s.key(projA)} {
		a := s.get(t, projA+"/deliveries/dlv_wait", cred)
		require.Equal(t, http.StatusOK, a.status, "%s: %s", who, a.body)
		var d struct {
			State         string    `json:"state"`
			NextAttemptAt time.Time `json:"next_attempt_at"`
			AttemptLog    []struct {
				RequestHeaders map[string]string `json:"request_headers"`
			} `json:"attempt_log"`
		}
		require.NoError(t, json.Unmarshal(a.body, &d))
		assert.Equal(t, "retrying", d.State, who)
		assert.True(t, d.NextAttemptAt.Equal(due), "%s: next_attempt_at %v, want %v", who, d.NextAttemptAt, due)
		require.Len(t, d.AttemptLog, 1, who)
		assert.Equal(t, map[string]string{"Content-Type": "application/json", "X-Request-Id": "req_call0",
			"Webhook-Signature": "[redacted]", "Authorization": "[redacted]", "X-Api-Key": "[redacted]"}, d.AttemptLog[0].RequestHeaders, who)
		for _, secret := range []string{"hook-secret", "key-secret", "c2lnbmF0dXJl"} {
			assert.NotContains(t, string(a.body), secret, who)
		}

		l := s.get(t, projA+"/deliveries?state=retrying", cred)
		require.Equal(t, http.StatusOK, l.status, "%s: %s", who, l.body)
		assert.Contains(t, string(l.body), `"next_attempt_at":"`+due.Format(time.RFC3339Nano)+`"`, "%s: the list says when it is due", who)
	}
}
