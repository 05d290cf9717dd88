package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/otelcol-svc/otelcol-svc/internal/apikey"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
	"github.com/otelcol-svc/otelcol-svc/internal/usage"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// The free tier of the specification: these tests run with the shipped default.
const freeTier = 10_000

// meteredProject publishes a project of account with a project key, as the control plane
// does (both name the account), and waits until a receiver accepts the key.
func meteredProject(t *testing.T, m *mirror.Store, base, account, id string, edit func(*mirror.Project)) string {
	t.Helper()
	ctx := context.Background()
	p := mirror.Project{ID: id, AccountID: account, Name: id, Version: 1, Members: map[string]int64{account: 1}}
	if edit != nil {
		edit(&p)
	}
	require.NoError(t, m.PutProject(ctx, p))
	key := apikey.Generate(apikey.KindProject)
	require.NoError(t, m.PutKey(ctx, apikey.Hash(key), mirror.KeyEntry{KeyID: "k-" + id, ProjectID: id, AccountID: account, Scope: mirror.ScopeProject}))
	if base != "" {
		waitAccepted(t, base, key)
	}
	return key
}

// otlpLogs is an OTLP/HTTP protobuf logs request of n records.
func otlpLogs(t testing.TB, n int) []byte {
	ld := plog.NewLogs()
	lrs := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords()
	for i := 0; i < n; i++ {
		lrs.AppendEmpty().Body().SetStr("line " + strconv.Itoa(i))
	}
	b, err := plogotlp.NewExportRequestFromLogs(ld).MarshalProto()
	require.NoError(t, err)
	return b
}

// jsonObjects is a JSON array of n objects.
func jsonObjects(n int) []byte {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = `{"n":` + strconv.Itoa(i) + `}`
	}
	return []byte("[" + strings.Join(parts, ",") + "]")
}

// answer is one ingest request's outcome, taken where t.FailNow must not be called.
type answer struct {
	surface string
	records int
	status  int
	header  http.Header
	body    []byte
	err     error
}

func (a answer) accepted() bool { return a.status == http.StatusOK || a.status == http.StatusAccepted }

// refusalCode is the error code of a refusal: the contract's JSON code, or for OTLP the
// google.rpc.Status code's name (the OTLP/HTTP throttling answer).
func (a answer) refusalCode() string {
	if a.surface == "otlp" {
		var st spb.Status
		if err := proto.Unmarshal(a.body, &st); err != nil {
			return "undecodable: " + err.Error()
		}
		return codes.Code(st.Code).String() + ": " + st.Message
	}
	var b struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	if err := json.Unmarshal(a.body, &b); err != nil {
		return "undecodable: " + string(a.body)
	}
	return b.Error.Code + ": " + b.Error.Message
}

var ingestClient = &http.Client{Timeout: 30 * time.Second}

// ingest sends one request of n records on one surface.
func ingest(surface, url, key string, body []byte, n int) answer {
	h := http.Header{}
	switch surface {
	case "otlp":
		h.Set("Content-Type", "application/x-protobuf")
		h.Set("X-API-Key", key)
	case "batch":
		h.Set("Content-Type", "application/json")
		h.Set("X-API-Key", key)
	case "push":
		h.Set("Content-Type", "application/json")
		h.Set("Authorization", "Bearer "+key)
	}
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return answer{surface: surface, records: n, err: err}
	}
	req.Header = h
	resp, err := ingestClient.Do(req)
	if err != nil {
		return answer{surface: surface, records: n, err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return answer{surface: surface, records: n, status: resp.StatusCode, header: resp.Header, body: b, err: err}
}

// checkQuotaRefusal asserts a refusal is the quota's: 429, Retry-After of about the time
// to the month's reset, and the code (quota_exceeded, or RESOURCE_EXHAUSTED for OTLP)
// with a message naming the limit and the reset.
func checkQuotaRefusal(t *testing.T, a answer, limit string) {
	t.Helper()
	require.NoError(t, a.err)
	require.Equal(t, http.StatusTooManyRequests, a.status, "%s: %s", a.surface, a.body)
	ra, err := strconv.Atoi(a.header.Get("Retry-After"))
	require.NoError(t, err, "%s: Retry-After %q", a.surface, a.header.Get("Retry-After"))
	assert.InDelta(t, usage.RetryAfter(time.Now()), ra, 60, "%s: Retry-After is the seconds to the month's reset", a.surface)
	code := a.refusalCode()
	want := "quota_exceeded: "
	if a.surface == "otlp" {
		want = "ResourceExhausted: "
	}
	assert.True(t, strings.HasPrefix(code, want), "%s: %s", a.surface, code)
	assert.Contains(t, code, limit+" events", a.surface)
	assert.Contains(t, code, usage.ResetAt(time.Now()).Format(time.RFC3339), a.surface)
}

func rawCount(t *testing.T, js jetstream.JetStream, project string) int {
	t.Helper()
	s, err := js.Stream(context.Background(), streams.RawStream(project))
	if err == jetstream.ErrStreamNotFound {
		return 0
	}
	require.NoError(t, err)
	info, err := s.Info(context.Background())
	require.NoError(t, err)
	return int(info.State.Msgs)
}

// usageEvents reads the account's month as the usage API does, once the receivers'
// leases are settled (within a lease TTL of the last request).
func usageEvents(t *testing.T, js jetstream.JetStream, account string, want int) usage.AccountUsage {
	t.Helper()
	rd, err := usage.OpenReader(context.Background(), js, freeTier, 1)
	require.NoError(t, err)
	var u usage.AccountUsage
	require.Eventually(t, func() bool {
		u, err = rd.Account(context.Background(), account, time.Now())
		require.NoError(t, err)
		return u.Pending == 0 && u.Events == int64(want)
	}, 10*time.Second, 50*time.Millisecond, "usage never settled at %d: %+v", want, u)
	return u
}

// 10,050 records to one account across two projects and three
// surfaces, with the shipped free tier. Exactly the limit is stored, every refused request
// was answered 429 quota_exceeded (OTLP: RESOURCE_EXHAUSTED) with Retry-After, nothing of
// a refused request is stored, and the usage count is what is on the streams.
func TestFreeTierAcrossSurfacesAndProjects(t *testing.T) {
	e := startReceiver(t, nil)
	const account = "acct_must"
	shopKey := meteredProject(t, e.m, e.col.HTTP, account, "shop", nil)
	blogKey := meteredProject(t, e.m, e.col.HTTP, account, "blog", nil)
	src := e.source(t, mirror.Source{ID: "src_blog", ProjectID: "blog", Name: "hooks", Connector: "webhook"}, nil)
	otlpURL, batchURL, pushURL := e.col.HTTP+"/v1/logs", e.col.HTTP+"/v1/events/batch", src.url(e.col.HTTP)

	var mu sync.Mutex
	var answers []answer
	run := func(workers int, reqs []func() answer) {
		next := atomic.Int64{}
		var wg sync.WaitGroup
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := next.Add(1) - 1; i < int64(len(reqs)); i = next.Add(1) - 1 {
					a := reqs[i]()
					mu.Lock()
					answers = append(answers, a)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
	}
	otlp50, batch50, push10, push1 := otlpLogs(t, 50), jsonObjects(50), jsonObjects(10), jsonObjects(1)

	// 9,000 records, the three surfaces at once: 4,000 OTLP (requests of 50) to shop, 2,500
	// events in batches of 50 to blog and shop, 2,500 push objects (arrays of 10) to blog.
	var reqs []func() answer
	for i := 0; i < 80; i++ {
		reqs = append(reqs, func() answer { return ingest("otlp", otlpURL, shopKey, otlp50, 50) })
	}
	for i := 0; i < 50; i++ {
		key := shopKey
		if i%2 == 0 {
			key = blogKey
		}
		reqs = append(reqs, func() answer { return ingest("batch", batchURL, key, batch50, 50) })
	}
	for i := 0; i < 250; i++ {
		reqs = append(reqs, func() answer { return ingest("push", pushURL, src.APIKey, push10, 10) })
	}
	run(8, reqs)
	for _, a := range answers {
		require.NoError(t, a.err)
		require.True(t, a.accepted(), "%s under the limit: %d %s", a.surface, a.status, a.body)
	}
	first := answers[0]
	assert.Equal(t, "10000", first.header.Get("RateLimit-Limit"), "accepted answers carry the quota")
	remaining, err := strconv.Atoi(first.header.Get("RateLimit-Remaining"))
	require.NoError(t, err)
	assert.Less(t, remaining, freeTier)
	reset, err := strconv.Atoi(first.header.Get("RateLimit-Reset"))
	require.NoError(t, err)
	assert.InDelta(t, usage.RetryAfter(time.Now()), reset, 60)

	// The last 1,050, concurrently: ten OTLP requests of 50 first, then 550 single records
	// (push objects and events), so that the account ends exactly at its limit; the 50
	// that no longer fit are refused, each request whole.
	reqs = nil
	for i := 0; i < 10; i++ {
		reqs = append(reqs, func() answer { return ingest("otlp", otlpURL, shopKey, otlp50, 50) })
	}
	for i := 0; i < 550; i++ {
		if i%2 == 0 {
			reqs = append(reqs, func() answer { return ingest("push", pushURL, src.APIKey, push1, 1) })
		} else {
			reqs = append(reqs, func() answer { return ingest("batch", batchURL, blogKey, push1, 1) })
		}
	}
	run(8, reqs)

	sent, accepted, refused := 0, 0, map[string]int{}
	for _, a := range answers {
		sent += a.records
		if a.accepted() {
			accepted += a.records
			continue
		}
		checkQuotaRefusal(t, a, "10,000")
		refused[a.surface]++
	}
	require.Equal(t, 10_050, sent)
	t.Logf("accepted %d records; refused requests by surface: %v", accepted, refused)
	assert.GreaterOrEqual(t, accepted, freeTier)
	assert.LessOrEqual(t, accepted, freeTier+10, "within 0.1%% of the limit")

	storedN := rawCount(t, e.js, "shop") + rawCount(t, e.js, "blog")
	assert.Equal(t, accepted, storedN, "the streams hold what was accepted: nothing of a refused request")
	u := usageEvents(t, e.js, account, storedN)
	assert.Equal(t, int64(freeTier), u.Limit)
	assert.Equal(t, int64(0), u.Remaining)
	rd, err := usage.OpenReader(context.Background(), e.js, freeTier, 1)
	require.NoError(t, err)
	perProject := map[string]int64{}
	require.Eventually(t, func() bool { // per-project day counts trail by a flush (1 s)
		u, err = rd.Account(context.Background(), account, time.Now())
		require.NoError(t, err)
		perProject = map[string]int64{}
		for _, p := range u.Projects {
			perProject[p.ID] = p.Events
		}
		return perProject["shop"] == int64(rawCount(t, e.js, "shop")) && perProject["blog"] == int64(rawCount(t, e.js, "blog"))
	}, 10*time.Second, 100*time.Millisecond, "per-project counts %v", perProject)

	// Past the limit every surface refuses, and stores nothing.
	for _, a := range []answer{
		ingest("otlp", otlpURL, blogKey, otlpLogs(t, 1), 1),
		ingest("batch", batchURL, shopKey, push1, 1),
		ingest("push", pushURL, src.APIKey, push1, 1),
	} {
		checkQuotaRefusal(t, a, "10,000")
	}
	assert.Equal(t, storedN, rawCount(t, e.js, "shop")+rawCount(t, e.js, "blog"))
}

// Three receiver processes on one NATS, with concurrent clients of one account: the
// accepted total stops within 0.1% of the limit (the meter's bound is exact), the streams
// hold exactly what was accepted, and every refusal is the quota's.
func TestFreeTierIsExactAcrossThreeReceivers(t *testing.T) {
	n := testenv.StartNATS(t)
	vars := map[string]string{"NATS_URL": n.URL(), "SVC_STREAM_REPLICAS": "1"}
	var cols []*testenv.Collector
	for i := 0; i < 3; i++ {
		cols = append(cols, testenv.StartCollector(t, testenv.CollectorOptions{Config: "configs/receiver.yaml", Env: maps.Clone(vars)}))
	}
	js, m := connectMirror(t, n.URL())
	const account = "acct_three"
	keys := []string{meteredProject(t, m, "", account, "three-a", nil), meteredProject(t, m, "", account, "three-b", nil)}
	for _, c := range cols {
		for _, k := range keys {
			waitAccepted(t, c.HTTP, k)
		}
	}

	otlp50, single := otlpLogs(t, 50), jsonObjects(1)
	var accepted, sent atomic.Int64
	var mu sync.Mutex
	var refusals []answer
	var wg sync.WaitGroup
	for c := 0; c < 12; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			// Each client sends to the receivers in turn, requests of 50 records and of one,
			// until it has been refused a few times in a row.
			for i, refusedInARow := 0, 0; refusedInARow < 4; i++ {
				col, key := cols[(c+i)%3], keys[c%2]
				var a answer
				if i%2 == 0 {
					a = ingest("otlp", col.HTTP+"/v1/logs", key, otlp50, 50)
				} else {
					a = ingest("batch", col.HTTP+"/v1/events/batch", key, single, 1)
				}
				sent.Add(int64(a.records))
				if a.accepted() {
					accepted.Add(int64(a.records))
					refusedInARow = 0
					continue
				}
				refusedInARow++
				mu.Lock()
				refusals = append(refusals, a)
				mu.Unlock()
			}
		}(c)
	}
	wg.Wait()
	for _, a := range refusals {
		checkQuotaRefusal(t, a, "10,000")
	}
	t.Logf("sent %d, accepted %d, %d refused requests", sent.Load(), accepted.Load(), len(refusals))
	require.Greater(t, sent.Load(), int64(freeTier))
	assert.GreaterOrEqual(t, accepted.Load(), int64(freeTier))
	assert.LessOrEqual(t, accepted.Load(), int64(freeTier+10), "within 0.1%% of the limit")
	storedN := rawCount(t, js, "three-a") + rawCount(t, js, "three-b")
	assert.Equal(t, int(accepted.Load()), storedN, "nothing of a refused request is stored")
	usageEvents(t, js, account, storedN)
}

// `accounts set-limit` writes the account's limit (usage.Limits, as the control plane
// does): a blocked account is accepted again within a second on a running receiver.
func TestRaisedLimitResumesIngestWithinASecond(t *testing.T) {
	e := startReceiver(t, nil)
	const account = "acct_raise"
	key := meteredProject(t, e.m, e.col.HTTP, account, "raise", nil)
	limits, err := usage.OpenLimits(context.Background(), e.js, 1)
	require.NoError(t, err)
	require.NoError(t, limits.Set(context.Background(), account, 100))

	url := e.col.HTTP + "/v1/events/batch"
	var a answer
	require.Eventually(t, func() bool { // until the receiver has the new limit
		a = ingest("batch", url, key, jsonObjects(1), 1)
		return a.status == http.StatusTooManyRequests
	}, 5*time.Second, 10*time.Millisecond, "never refused at a limit of 100")
	checkQuotaRefusal(t, a, "100")
	stored := rawCount(t, e.js, "raise")
	assert.Equal(t, 100, stored, "exactly the limit stored")
	checkQuotaRefusal(t, ingest("batch", url, key, jsonObjects(10), 10), "100")

	set := time.Now()
	require.NoError(t, limits.Set(context.Background(), account, 200))
	require.Eventually(t, func() bool {
		return ingest("batch", url, key, jsonObjects(10), 10).accepted()
	}, time.Second-time.Since(set), 10*time.Millisecond, "not accepted within a second of the new limit")
	t.Logf("accepted again %v after the limit was raised", time.Since(set).Round(time.Millisecond))
	assert.Equal(t, 110, rawCount(t, e.js, "raise"))
}

// A project over its own ingest rate (the mirror's ingest_rate) is answered 429
// rate_limited with Retry-After and nothing of the request is stored; another project of
// the same account is unaffected.
func TestProjectRateLimit(t *testing.T) {
	n := testenv.StartNATS(t)
	js, m := connectMirror(t, n.URL())
	const account = "acct_rate"
	// The rate is in the mirror before the receiver starts, as after any restart.
	slowKey := meteredProject(t, m, "", account, "slow", func(p *mirror.Project) {
		p.IngestRate = &mirror.IngestRate{PerSecond: 0.01, Burst: 100}
	})
	fastKey := meteredProject(t, m, "", account, "fast", nil)
	col := testenv.StartCollector(t, testenv.CollectorOptions{Config: "configs/receiver.yaml", Env: map[string]string{"NATS_URL": n.URL(), "SVC_STREAM_REPLICAS": "1"}})
	waitAccepted(t, col.HTTP, slowKey)
	waitAccepted(t, col.HTTP, fastKey)
	url := col.HTTP + "/v1/events/batch"

	require.True(t, ingest("batch", url, slowKey, jsonObjects(60), 60).accepted(), "within the burst")
	a := ingest("batch", url, slowKey, jsonObjects(60), 60)
	require.Equal(t, http.StatusTooManyRequests, a.status, "%s", a.body)
	assert.True(t, strings.HasPrefix(a.refusalCode(), "rate_limited: "), a.refusalCode())
	ra, err := strconv.Atoi(a.header.Get("Retry-After"))
	require.NoError(t, err)
	// 20 more records at 0.01/s: about 2,000 s.
	assert.InDelta(t, 2000, ra, 10, "Retry-After is when the request would pass")
	o := ingest("otlp", col.HTTP+"/v1/logs", slowKey, otlpLogs(t, 60), 60)
	require.Equal(t, http.StatusTooManyRequests, o.status)
	assert.True(t, strings.HasPrefix(o.refusalCode(), "ResourceExhausted: "), o.refusalCode())
	assert.NotEmpty(t, o.header.Get("Retry-After"))

	for i := 0; i < 5; i++ {
		f := ingest("batch", url, fastKey, jsonObjects(60), 60)
		require.True(t, f.accepted(), "another project is not limited: %d %s", f.status, f.body)
	}
	assert.Equal(t, 60, rawCount(t, js, "slow"), "nothing of a refused request is stored")
	assert.Equal(t, 300, rawCount(t, js, "fast"))

	// A project's rate changed in the mirror applies on the running receiver.
	require.NoError(t, m.PutProject(context.Background(), mirror.Project{ID: "fast", AccountID: account, Version: 2,
		IngestRate: &mirror.IngestRate{PerSecond: 0.01, Burst: 10}}))
	require.Eventually(t, func() bool {
		return ingest("batch", url, fastKey, jsonObjects(11), 11).status == http.StatusRequestEntityTooLarge
	}, 5*time.Second, 20*time.Millisecond, "a request larger than the new burst is never accepted whole")
}

// At 80% and 100% of the month the account's projects' sinks get one message each: the
// webhook the notice as JSON, the chat its text.
func TestUsageNoticesReachTheSinks(t *testing.T) {
	e := startEmbedded(t, nil)
	hook, chat := startAgent(t), startAgent(t)
	const account = "acct_notice"
	since := time.Now().UTC()
	key := meteredProject(t, e.m, e.col.HTTP, account, "noticed", func(p *mirror.Project) {
		p.Name = "shop"
		p.Sinks = []mirror.Sink{
			{ID: "s_hook", Kind: "webhook", URL: hook.URL, Enabled: true, Since: since},
			{ID: "s_chat", Kind: "chat", URL: chat.URL, Format: "slack", Enabled: true, Since: since},
		}
	})
	limits, err := usage.OpenLimits(context.Background(), e.js, 1)
	require.NoError(t, err)
	require.NoError(t, limits.Set(context.Background(), account, 100))
	url := e.col.HTTP + "/v1/events/batch"
	require.Eventually(t, func() bool { // 100 accepted, then refused: the limit is in force
		return ingest("batch", url, key, jsonObjects(1), 1).status == http.StatusTooManyRequests
	}, 10*time.Second, 5*time.Millisecond)
	// More refusals do not send more notices.
	for i := 0; i < 5; i++ {
		assert.Equal(t, http.StatusTooManyRequests, ingest("batch", url, key, jsonObjects(1), 1).status)
	}
	postSentinel(t, e.col.HTTP, key, hook, chat)

	reset := usage.ResetAt(time.Now()).UTC().Format("2 January 2006 15:04 UTC")
	var texts []string
	for _, c := range beforeSentinel(t, hook.delivered()) {
		var n struct {
			Type, Text string
			Percent    int
		}
		require.NoError(t, json.Unmarshal(c.Body, &n), "%s", c.Body)
		assert.Equal(t, "usage_notice", n.Type)
		texts = append(texts, n.Text)
	}
	assert.Equal(t, []string{
		fmt.Sprintf("otelcol-svc: the account of project shop has used 80%% of this month's 100 events (80); at 100%% new events are refused until %s.", reset),
		fmt.Sprintf("otelcol-svc: the account of project shop has used 100%% of this month's 100 events; new events are refused (429 quota_exceeded) until %s. Ask for a higher limit, or send fewer events until then.", reset),
	}, texts, "each notice once, in order, in the service's own words")
	var chats []string
	for _, c := range beforeSentinel(t, chat.delivered()) {
		var m struct{ Text string }
		require.NoError(t, json.Unmarshal(c.Body, &m))
		chats = append(chats, m.Text)
	}
	assert.Equal(t, texts, chats, "the chat shows the notice's text")
	assert.Equal(t, 100, rawCount(t, e.js, "noticed"), "notices are not usage, and go to the output stream")
}

// A client retrying a request with the same Idempotency-Key (its answer was lost, say)
// has it stored once and counted once against the free tier, in both publish modes; the
// same request without a key is stored twice and counted twice.
func TestRetryWithIdempotencyKeyIsMeteredOnce(t *testing.T) {
	for _, mode := range []string{"async", "fast_batch"} {
		t.Run(mode, func(t *testing.T) {
			e := startReceiver(t, map[string]string{"SVC_PUBLISH_MODE": mode})
			account, project := "acct_retry_"+mode, "retry-"+strings.ReplaceAll(mode, "_", "-")
			key := meteredProject(t, e.m, e.col.HTTP, account, project, nil)
			batch, single := e.col.HTTP+"/v1/events/batch", e.col.HTTP+"/v1/events"
			idem := func(k string) map[string]string { return map[string]string{"Idempotency-Key": k} }

			for range 2 {
				r := post(t, batch, key, "application/json", jsonObjects(50), idem("retry-batch-1"))
				require.Equal(t, http.StatusAccepted, r.StatusCode, "%s", r.Body)
				r = post(t, single, key, "application/json", []byte(`{"n":1}`), idem("retry-one-1"))
				require.Equal(t, http.StatusAccepted, r.StatusCode, "%s", r.Body)
			}
			assert.Equal(t, 51, rawCount(t, e.js, project), "each keyed request stored once")
			usageEvents(t, e.js, account, 51)

			for range 2 {
				r := post(t, batch, key, "application/json", jsonObjects(20), nil)
				require.Equal(t, http.StatusAccepted, r.StatusCode, "%s", r.Body)
			}
			assert.Equal(t, 91, rawCount(t, e.js, project), "without a key both copies are stored")
			u := usageEvents(t, e.js, account, 91)
			assert.Equal(t, int64(freeTier-91), u.Remaining)
		})
	}
}
