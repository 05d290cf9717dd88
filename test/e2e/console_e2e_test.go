package e2e

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/apikey"
	"github.com/otelcol-svc/otelcol-svc/internal/consoletoken"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
)

func get(t *testing.T, url string, headers map[string]string) response {
	t.Helper()
	return request(t, http.MethodGet, url, headers)
}

func request(t *testing.T, method, url string, headers map[string]string) response {
	t.Helper()
	return send(t, method, url, nil, headers)
}

type consoleEvents struct {
	Events []struct {
		Seq      uint64          `json:"seq"`
		Time     string          `json:"time"`
		Signal   string          `json:"signal"`
		SourceID string          `json:"source_id"`
		Record   json.RawMessage `json:"record"`
	} `json:"events"`
}

func readEvents(t *testing.T, url string, headers map[string]string) consoleEvents {
	t.Helper()
	r := get(t, url, headers)
	require.Equal(t, http.StatusOK, r.StatusCode, "%s", r.Body)
	var out consoleEvents
	require.NoError(t, json.Unmarshal(r.Body, &out), "%s", r.Body)
	require.NotNil(t, out.Events, "events is a list, never null: %s", r.Body)
	return out
}

// consoleKeys publishes a console token key pair's public half, as the control plane does.
func (e *env) consoleKeys(t *testing.T) ed25519.PrivateKey {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	require.NoError(t, e.m.PutConsoleKeys(context.Background(), mirror.ConsoleKeys{PublicKeys: []string{base64.StdEncoding.EncodeToString(pub)}}))
	return priv
}

func consoleToken(t *testing.T, priv ed25519.PrivateKey, project string) string {
	t.Helper()
	tok, err := consoletoken.Issue(priv, consoletoken.Claims{UserID: "user_1", ProjectID: project, Grant: 1}, 5*time.Minute, time.Now())
	require.NoError(t, err)
	return tok
}

func TestConsoleRecentEvents(t *testing.T) {
	e := startReceiver(t, nil)
	keyA := e.project(t, "cona")
	keyB := e.project(t, "conb")
	keyEmpty := e.project(t, "conempty")
	gh := e.source(t, githubSource("cona"), nil)
	other := githubSource("cona")
	other.ID, other.Name = "src_cona_2", "stripe"
	st := e.source(t, other, nil)

	require.Equal(t, http.StatusAccepted, post(t, e.col.HTTP+"/v1/events", keyA, "application/json", []byte(`{"n":1}`), nil).StatusCode)
	require.Equal(t, http.StatusAccepted, post(t, gh.url(e.col.HTTP), "", "application/json", []byte(`[{"action":"a","repo":{"name":"r1"}},{"action":"b","repo":{"name":"r2"}}]`), bearer(gh.APIKey)).StatusCode)
	require.Equal(t, http.StatusAccepted, post(t, st.url(e.col.HTTP), "", "application/json", []byte(`{"type":"charge.failed"}`), bearer(st.APIKey)).StatusCode)
	require.Equal(t, http.StatusAccepted, post(t, e.col.HTTP+"/v1/events", keyA, "application/json", []byte(`{"n":2}`), nil).StatusCode)
	require.Equal(t, http.StatusAccepted, post(t, gh.url(e.col.HTTP), "", "application/json", []byte(`{"action":"c","repo":{"name":"r3"}}`), bearer(gh.APIKey)).StatusCode)
	require.Equal(t, http.StatusAccepted, post(t, e.col.HTTP+"/v1/events", keyB, "application/json", []byte(`{"secret":"of B"}`), nil).StatusCode)
	msgs := stored(t, e.js, "cona")
	require.Len(t, msgs, 6)

	base := e.col.HTTP + "/console/v1/projects/cona/events"
	got := readEvents(t, base, map[string]string{"X-API-Key": keyA})
	require.Len(t, got.Events, 6)
	for i, ev := range got.Events {
		m := msgs[len(msgs)-1-i] // newest first
		assert.Equal(t, m.Sequence, ev.Seq, "event %d", i)
		assert.Equal(t, string(m.Data), string(ev.Record), "event %d: the record as stored", i)
		assert.Equal(t, m.Header.Get(streams.HeaderSignal), ev.Signal, "event %d", i)
		assert.Equal(t, m.Header.Get(streams.HeaderSourceID), ev.SourceID, "event %d", i)
		ts, err := time.Parse(time.RFC3339Nano, ev.Time)
		require.NoError(t, err)
		assert.True(t, m.Time.Equal(ts), "event %d: stored time %s, answered %s", i, m.Time, ev.Time)
	}
	assert.Equal(t, "source", got.Events[0].Signal)
	assert.Equal(t, gh.ID, got.Events[0].SourceID)
	assert.Equal(t, "event", got.Events[1].Signal)
	assert.Empty(t, got.Events[1].SourceID)

	got = readEvents(t, base+"?limit=2", map[string]string{"X-API-Key": keyA})
	require.Len(t, got.Events, 2)
	assert.Equal(t, msgs[5].Sequence, got.Events[0].Seq)
	assert.Equal(t, msgs[4].Sequence, got.Events[1].Seq)
	assert.Len(t, readEvents(t, base+"?limit=100000", map[string]string{"X-API-Key": keyA}).Events, 6, "a limit over the maximum is lowered to it")

	got = readEvents(t, base+"?source_id="+gh.ID, map[string]string{"X-API-Key": keyA})
	require.Len(t, got.Events, 3)
	for _, ev := range got.Events {
		assert.Equal(t, gh.ID, ev.SourceID)
	}
	assert.Contains(t, string(got.Events[0].Record), `"payload":{"action":"c","repo":{"name":"r3"}}`)
	got = readEvents(t, base+"?source_id="+st.ID+"&limit=5", map[string]string{"Authorization": "Bearer " + keyA})
	require.Len(t, got.Events, 1)
	assert.Len(t, readEvents(t, base+"?source_id=src_none", map[string]string{"X-API-Key": keyA}).Events, 0)

	// A project with no stream yet has no events.
	assert.Len(t, readEvents(t, e.col.HTTP+"/console/v1/projects/conempty/events", map[string]string{"X-API-Key": keyEmpty}).Events, 0)

	for name, c := range map[string]struct {
		url     string
		headers map[string]string
		status  int
		code    string
	}{
		"B's key reads A":      {base, map[string]string{"X-API-Key": keyB}, 404, "not_found"},
		"A's key reads B":      {e.col.HTTP + "/console/v1/projects/conb/events", map[string]string{"X-API-Key": keyA}, 404, "not_found"},
		"unknown project":      {e.col.HTTP + "/console/v1/projects/nope/events", map[string]string{"X-API-Key": keyA}, 404, "not_found"},
		"no credentials":       {base, nil, 401, "missing_api_key"},
		"unknown key":          {base, map[string]string{"X-API-Key": apikey.Generate(apikey.KindProject)}, 401, "invalid_api_key"},
		"ingest key":           {base, bearer(gh.APIKey), 401, "invalid_api_key"},
		"bad limit":            {base + "?limit=0", map[string]string{"X-API-Key": keyA}, 400, "invalid_body"},
		"not a number":         {base + "?limit=ten", map[string]string{"X-API-Key": keyA}, 400, "invalid_body"},
		"other console path":   {e.col.HTTP + "/console/v1/projects/cona/other", map[string]string{"X-API-Key": keyA}, 404, "not_found"},
		"forged console token": {base, bearer("eyJhbGciOiJFZERTQSJ9.eyJwcm9qZWN0X2lkIjoiY29uYSJ9.AAAA"), 503, "unavailable"}, // no keys published yet
	} {
		h := map[string]string{"Origin": "http://localhost:8080"} // the dashboard's, by default
		for k, v := range c.headers {
			h[k] = v
		}
		r := get(t, c.url, h)
		assert.Equal(t, c.status, r.StatusCode, "%s: %s", name, r.Body)
		assert.Equal(t, c.code, errorCode(t, r), name)
		assert.NotContains(t, string(r.Body), "of B", name)
		assert.Equal(t, "http://localhost:8080", r.Header.Get("Access-Control-Allow-Origin"), "%s: errors are readable by the dashboard too", name)
	}

	// Reads leave no consumer behind on the stream.
	s, err := e.js.Stream(context.Background(), streams.RawStream("cona"))
	require.NoError(t, err)
	names := s.ConsumerNames(context.Background())
	var left []string
	for n := range names.Name() {
		left = append(left, n)
	}
	require.NoError(t, names.Err())
	assert.Empty(t, left)
}

func TestConsoleTokensAndCORS(t *testing.T) {
	e := startReceiver(t, nil)
	keyA := e.project(t, "tokena")
	e.project(t, "tokenb")
	require.Equal(t, http.StatusAccepted, post(t, e.col.HTTP+"/v1/events", keyA, "application/json", []byte(`{"n":1}`), nil).StatusCode)
	priv := e.consoleKeys(t)
	base := e.col.HTTP + "/console/v1/projects/tokena/events"
	tokA := consoleToken(t, priv, "tokena")
	require.Eventually(t, func() bool { return get(t, base, bearer(tokA)).StatusCode == http.StatusOK }, 10*time.Second, 20*time.Millisecond)
	got := readEvents(t, base, bearer(tokA))
	require.Len(t, got.Events, 1)
	assert.Equal(t, `{"n":1}`, string(got.Events[0].Record))

	_, otherPriv, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	for name, c := range map[string]struct {
		tok    string
		status int
		code   string
	}{
		"token of project B":     {consoleToken(t, priv, "tokenb"), 404, "not_found"},
		"token signed elsewhere": {consoleToken(t, otherPriv, "tokena"), 401, "invalid_token"},
		"tampered token":         {tokA[:len(tokA)-4] + "AAAA", 401, "invalid_token"},
	} {
		r := get(t, base, bearer(c.tok))
		assert.Equal(t, c.status, r.StatusCode, "%s: %s", name, r.Body)
		assert.Equal(t, c.code, errorCode(t, r), name)
	}

	// The dashboard on another origin (SVC_DASHBOARD_ORIGIN, by default
	// http://localhost:8080): preflight, then the GET, allowed for its origin only.
	r := request(t, http.MethodOptions, base, map[string]string{
		"Origin": "http://localhost:8080", "Access-Control-Request-Method": "GET", "Access-Control-Request-Headers": "authorization",
	})
	assert.Equal(t, http.StatusNoContent, r.StatusCode)
	assert.Equal(t, "http://localhost:8080", r.Header.Get("Access-Control-Allow-Origin"))
	assert.Contains(t, r.Header.Get("Access-Control-Allow-Headers"), "Authorization")
	assert.Contains(t, r.Header.Get("Access-Control-Allow-Methods"), "GET")
	r = get(t, base, map[string]string{"Origin": "http://localhost:8080", "Authorization": "Bearer " + tokA})
	assert.Equal(t, http.StatusOK, r.StatusCode)
	assert.Equal(t, "http://localhost:8080", r.Header.Get("Access-Control-Allow-Origin"))
	// A page of another site holding the token still cannot read the answer.
	r = get(t, base, map[string]string{"Origin": "http://evil.example", "Authorization": "Bearer " + tokA})
	assert.Equal(t, http.StatusOK, r.StatusCode)
	assert.Empty(t, r.Header.Get("Access-Control-Allow-Origin"))
	// Only the read API is open to other origins.
	r = post(t, e.col.HTTP+"/v1/events", keyA, "application/json", []byte(`{"n":2}`), map[string]string{"Origin": "http://localhost:8080"})
	assert.Equal(t, http.StatusAccepted, r.StatusCode)
	assert.Empty(t, r.Header.Get("Access-Control-Allow-Origin"))
	assert.NotContains(t, e.col.Log(), tokA, "tokens are never logged")
}

type consoleFields struct {
	Sampled int `json:"sampled"`
	Fields  []struct {
		Path  string   `json:"path"`
		Count int      `json:"count"`
		Types []string `json:"types"`
	} `json:"fields"`
}

func readFields(t *testing.T, url, key string) (consoleFields, map[string]string) {
	t.Helper()
	r := get(t, url, map[string]string{"X-API-Key": key})
	require.Equal(t, http.StatusOK, r.StatusCode, "%s", r.Body)
	var out consoleFields
	require.NoError(t, json.Unmarshal(r.Body, &out), "%s", r.Body)
	byPath := map[string]string{}
	for _, f := range out.Fields {
		b, _ := json.Marshal(f.Types)
		byPath[f.Path] = itoa(f.Count) + " " + string(b)
	}
	return out, byPath
}

func TestConsoleFields(t *testing.T) {
	e := startReceiver(t, nil)
	key := e.project(t, "fields")
	gh := e.source(t, githubSource("fields"), nil)
	require.Equal(t, http.StatusAccepted, post(t, e.col.HTTP+"/v1/events", key, "application/json", []byte(`{"status":"failed","order":{"id":7}}`), nil).StatusCode)
	require.Equal(t, http.StatusAccepted, post(t, gh.url(e.col.HTTP), "", "application/json", []byte(
		`[{"action":"opened","repo":{"name":"a/b","stars":3},"labels":[{"name":"bug"}]},{"action":"closed","repo":{"name":"a/c","stars":"n/a"}},{"action":null,"repo":{}}]`), bearer(gh.APIKey)).StatusCode)

	base := e.col.HTTP + "/console/v1/projects/fields/fields"
	got, by := readFields(t, base+"?source_id="+gh.ID, key)
	assert.Equal(t, 3, got.Sampled)
	for path, want := range map[string]string{
		"_event_type":           `3 ["string"]`,
		"_source":               `3 ["string"]`,
		"text":                  `3 ["string"]`,
		"labels":                `3 ["object"]`,
		"labels.repo":           `2 ["string"]`,
		"payload.action":        `3 ["string","null"]`,
		"payload.repo":          `3 ["object"]`,
		"payload.repo.name":     `2 ["string"]`,
		"payload.repo.stars":    `2 ["string","number"]`,
		"payload.labels":        `1 ["array"]`,
		"payload.labels[].name": `1 ["string"]`,
	} {
		assert.Equal(t, want, by[path], path)
	}
	assert.NotContains(t, by, "status", "another source's fields are not sampled")

	got, by = readFields(t, base, key)
	assert.Equal(t, 4, got.Sampled)
	assert.Equal(t, `1 ["number"]`, by["order.id"])
	got, _ = readFields(t, base+"?limit=1", key)
	assert.Equal(t, 1, got.Sampled, "the newest record only")

	r := get(t, base, map[string]string{"X-API-Key": e.project(t, "fieldsother")})
	assert.Equal(t, http.StatusNotFound, r.StatusCode)

	// Reading never disturbs a durable consumer of the stream.
	ctx := context.Background()
	s, err := e.js.Stream(ctx, "svc-ai-raw-fields")
	require.NoError(t, err)
	c, err := s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "pipeline-like", AckPolicy: jetstream.AckExplicitPolicy})
	require.NoError(t, err)
	readFields(t, base, key)
	info, err := c.Info(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(4), info.NumPending, "all records still pending for the durable consumer")
	assert.Equal(t, uint64(0), info.Delivered.Consumer)
}

func TestConsoleReadsAcrossManyRecords(t *testing.T) {
	e := startReceiver(t, nil)
	key := e.project(t, "many")
	gh := e.source(t, githubSource("many"), nil)
	// Two source records, then 1200 events after them.
	require.Equal(t, http.StatusAccepted, post(t, gh.url(e.col.HTTP), "", "application/json", []byte(`[{"action":"first"},{"action":"second"}]`), bearer(gh.APIKey)).StatusCode)
	var batch []string
	for i := 0; i < 1200; i++ {
		batch = append(batch, `{"i":`+itoa(i)+`}`)
	}
	r := post(t, e.col.HTTP+"/v1/events/batch", key, "application/json", []byte("["+strings.Join(batch, ",")+"]"), nil)
	require.Equal(t, http.StatusAccepted, r.StatusCode, "%s", r.Body)

	base := e.col.HTTP + "/console/v1/projects/many/events"
	got := readEvents(t, base+"?limit=500", map[string]string{"X-API-Key": key})
	require.Len(t, got.Events, 500)
	for i, ev := range got.Events {
		assert.Equal(t, uint64(1202-i), ev.Seq, "newest first, none skipped")
		assert.Equal(t, `{"i":`+itoa(1199-i)+`}`, string(ev.Record))
	}
	// The source's records lie behind 1200 others.
	got = readEvents(t, base+"?source_id="+gh.ID, map[string]string{"X-API-Key": key})
	require.Len(t, got.Events, 2)
	assert.Equal(t, []uint64{2, 1}, []uint64{got.Events[0].Seq, got.Events[1].Seq})
	assert.Contains(t, string(got.Events[1].Record), `"payload":{"action":"first"}`)

	f, _ := readFields(t, e.col.HTTP+"/console/v1/projects/many/fields?limit=1000", key)
	assert.Equal(t, 1000, f.Sampled)
	require.Len(t, f.Fields, 1)
	assert.Equal(t, "i", f.Fields[0].Path)
	assert.Equal(t, 1000, f.Fields[0].Count)
}

// The Fields view over 100 posted events reports each path with how many of them have it,
// which is what a user reads to pick a reliable key field.
func TestConsoleFieldsOverAHundredEvents(t *testing.T) {
	e := startReceiver(t, nil)
	key := e.project(t, "hundred")
	src := e.source(t, githubSource("hundred"), nil)
	var ndjson strings.Builder
	for i := 0; i < 100; i++ {
		ev := map[string]any{"action": "opened", "id": i, "repo": map[string]any{"name": "shop"}}
		if i%2 == 0 {
			ev["user"] = map[string]any{"name": "u" + strconv.Itoa(i)}
		}
		if i%5 == 0 {
			ev["amount"] = 12.5
			if i%10 == 0 {
				ev["amount"] = "12.50" // a field whose type varies is worth knowing about
			}
		}
		if i%25 == 0 {
			ev["tags"] = []string{"a", "b"}
		}
		b, err := json.Marshal(ev)
		require.NoError(t, err)
		ndjson.Write(append(b, '\n'))
	}
	r := post(t, src.url(e.col.HTTP), "", "application/x-ndjson", []byte(ndjson.String()), bearer(src.APIKey))
	require.Equal(t, http.StatusAccepted, r.StatusCode, "%s", r.Body)

	got, by := readFields(t, e.col.HTTP+"/console/v1/projects/hundred/fields?limit=100&source_id="+src.ID, key)
	assert.Equal(t, 100, got.Sampled)
	for path, want := range map[string]string{
		"payload.id":        `100 ["number"]`,
		"payload.repo.name": `100 ["string"]`,
		"payload.user.name": `50 ["string"]`,
		"payload.amount":    `20 ["string","number"]`,
		"payload.tags":      `4 ["array"]`,
		"payload.tags[]":    `4 ["string"]`,
		"labels.repo":       `100 ["string"]`,
		"_event_type":       `100 ["string"]`,
	} {
		assert.Equal(t, want, by[path], path)
	}
}
