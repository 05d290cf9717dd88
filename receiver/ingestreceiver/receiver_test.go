package ingestreceiver

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/mirrorcache"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/principal"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/pipelinectx"
	"github.com/otelcol-svc/otelcol-svc/receiver/ingestreceiver/internal/metadata"
)

// fakeAuth stands in for the projectauth extension: API key "key-<project>" opens that
// project's events and console reads; an ingest key opens its source's ingest URL.
type fakeAuth struct {
	sources map[string]mirror.Source // by ingest key
	js      jetstream.JetStream
}

func (f *fakeAuth) Authenticate(ctx context.Context, headers map[string][]string) (context.Context, error) {
	key := http.Header(headers).Get("X-Api-Key")
	if !strings.HasPrefix(key, "key-") {
		return ctx, principal.ErrInvalidKey
	}
	return principal.NewContext(ctx, principal.Principal{ProjectID: strings.TrimPrefix(key, "key-")}), nil
}

func (f *fakeAuth) AuthenticateIngest(ctx context.Context, _ map[string][]string, ingestKey string) (context.Context, mirror.Source, error) {
	src, ok := f.sources[ingestKey]
	if !ok {
		return ctx, mirror.Source{}, principal.ErrNotFound
	}
	return principal.NewContext(ctx, principal.Principal{ProjectID: src.ProjectID, SourceID: src.ID}), src, nil
}

func (f *fakeAuth) AuthenticateConsole(ctx context.Context, headers map[string][]string, projectID string) (context.Context, error) {
	if http.Header(headers).Get("X-Api-Key") != "key-"+projectID {
		return ctx, principal.ErrNotFound
	}
	return principal.NewContext(ctx, principal.Principal{ProjectID: projectID}), nil
}

// AuthorizeConsoleWrite lets the key write too: the real role check is the projectauth
// extension's.
func (f *fakeAuth) AuthorizeConsoleWrite(ctx context.Context, headers map[string][]string, projectID string) (context.Context, error) {
	return f.AuthenticateConsole(ctx, headers, projectID)
}

func (f *fakeAuth) JetStream() jetstream.JetStream { return f.js }

func (f *fakeAuth) MirrorCache() *mirrorcache.Cache { return nil }

// consumed is one request's records as the pipeline got them.
type consumed struct {
	info pipelinectx.Ingest
	recs []string
}

type testReceiver struct {
	*ingestReceiver
	url string

	mu  sync.Mutex
	got []consumed
}

func (tr *testReceiver) consumed() []consumed {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return append([]consumed(nil), tr.got...)
}

// startTestReceiver serves the receiver's routes with auth and records the requests its
// logs pipeline receives.
func startTestReceiver(t *testing.T, mutate func(*Config), auth *fakeAuth) *testReceiver {
	t.Helper()
	cfg := createDefaultConfig().(*Config)
	if mutate != nil {
		mutate(cfg)
	}
	r, err := newReceiver(cfg, receivertest.NewNopSettings(metadata.Type))
	require.NoError(t, err)
	tr := &testReceiver{ingestReceiver: r}
	r.logs, err = consumer.NewLogs(func(ctx context.Context, ld plog.Logs) error {
		c := consumed{info: pipelinectx.IngestFrom(ctx)}
		lrs := ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords()
		for i := 0; i < lrs.Len(); i++ {
			c.recs = append(c.recs, string(lrs.At(i).Body().Bytes().AsRaw()))
		}
		tr.mu.Lock()
		tr.got = append(tr.got, c)
		tr.mu.Unlock()
		return nil
	})
	require.NoError(t, err)
	if auth != nil {
		r.auth, r.dp = auth, auth
	}
	r.console = r.newConsole()
	srv := httptest.NewServer(r.routes())
	t.Cleanup(srv.Close)
	tr.url = srv.URL
	return tr
}

type answer struct {
	status int
	header http.Header
	body   []byte
}

func (a answer) code(t *testing.T) string {
	t.Helper()
	var b struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	require.NoError(t, json.Unmarshal(a.body, &b), "%s", a.body)
	require.NotEmpty(t, b.Error.Message, "%s", a.body)
	return b.Error.Code
}

func do(t *testing.T, method, url string, body []byte, headers map[string]string) answer {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
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

func githubSources() map[string]mirror.Source {
	return map[string]mirror.Source{
		"in_a": {ID: "src_a", ProjectID: "p1", Name: "github", Connector: "webhook"},
		"in_b": {ID: "src_b", ProjectID: "p1", Name: "stripe", Connector: "webhook"},
	}
}

// 10 MiB of {} are millions of records: a request of more objects than allowed is
// refused whole, naming the limit, and nothing reaches the pipeline.
func TestTooManyObjectsPublishNothing(t *testing.T) {
	tr := startTestReceiver(t, func(c *Config) { c.MaxObjectsPerRequest = 3 }, &fakeAuth{sources: githubSources()})
	for name, c := range map[string]struct {
		path, body string
	}{
		"push array":   {"/ingest/in_a", `[{},{},{},{}]`},
		"push NDJSON":  {"/ingest/in_a", "{}\n{}\n{}\n{}\n"},
		"batch array":  {"/v1/events/batch", `[{},{},{},{}]`},
		"batch NDJSON": {"/v1/events/batch", "{}\n{}\n{}\n{}\n"},
	} {
		a := do(t, http.MethodPost, tr.url+c.path, []byte(c.body), map[string]string{"X-API-Key": "key-p1"})
		assert.Equal(t, http.StatusRequestEntityTooLarge, a.status, "%s: %s", name, a.body)
		assert.Equal(t, "payload_too_large", a.code(t), name)
		assert.Contains(t, string(a.body), "more than 3 objects", name)
	}
	assert.Empty(t, tr.consumed(), "a refused request publishes nothing")

	for _, path := range []string{"/ingest/in_a", "/v1/events/batch"} {
		a := do(t, http.MethodPost, tr.url+path, []byte(`[{},{},{}]`), map[string]string{"X-API-Key": "key-p1"})
		assert.Equal(t, http.StatusAccepted, a.status, "%s: %s", path, a.body)
	}
	assert.Len(t, tr.consumed(), 2, "the limit itself is allowed")
}

// Deduplication is per stream, that is per project: each push source's Idempotency-Key
// is its own, so two sources that number their deliveries alike both get stored.
func TestPushIdempotencyKeyIsPerSource(t *testing.T) {
	tr := startTestReceiver(t, nil, &fakeAuth{sources: githubSources()})
	for _, key := range []string{"in_a", "in_b"} {
		a := do(t, http.MethodPost, tr.url+"/ingest/"+key, []byte(`{"n":1}`), map[string]string{"Idempotency-Key": "1"})
		require.Equal(t, http.StatusAccepted, a.status, "%s", a.body)
	}
	a := do(t, http.MethodPost, tr.url+"/ingest/in_a", []byte(`{"n":1}`), nil)
	require.Equal(t, http.StatusAccepted, a.status, "%s", a.body)
	a = do(t, http.MethodPost, tr.url+"/v1/events", []byte(`{"n":1}`), map[string]string{"X-API-Key": "key-p1", "Idempotency-Key": "1"})
	require.Equal(t, http.StatusAccepted, a.status, "%s", a.body)
	got := tr.consumed()
	require.Len(t, got, 4)
	assert.Equal(t, "src:src_a:1", got[0].info.IdempotencyKey)
	assert.Equal(t, "src:src_b:1", got[1].info.IdempotencyKey)
	assert.Equal(t, "", got[2].info.IdempotencyKey, "no key, no message id")
	assert.Equal(t, "1", got[3].info.IdempotencyKey, "/v1/events keeps the contract's Idempotency-Key as Nats-Msg-Id")
}

// Without the projectauth extension's data-plane side the receiver cannot serve push
// ingest at all: a server configuration problem, not an unknown URL.
func TestPushWithoutDataPlaneAuthIsAServerError(t *testing.T) {
	tr := startTestReceiver(t, nil, nil)
	a := do(t, http.MethodPost, tr.url+"/ingest/in_a", []byte(`{}`), nil)
	assert.Equal(t, http.StatusInternalServerError, a.status, "%s", a.body)
	assert.Equal(t, "internal", a.code(t))
	assert.Empty(t, tr.consumed())
}
